package allinone

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// DevOptions configure `toolfleet dev`.
type DevOptions struct {
	Fleet Options
	// HTTPAddr is the planner API's listen address. Default 127.0.0.1:8080.
	HTTPAddr string
	// Token, when set, protects the API with a bearer token.
	Token string
	Out   io.Writer
	// Ready, when set, is called with the API's and NATS's addresses once both serve.
	Ready func(apiURL, natsURL string)
}

// printDevHelp shows how to start a run with curl. The scripted model follows the demo's
// script whatever the input, so its example is the demo's request, which stops at an
// approval the user gives; a real model gets a question of its own.
func printDevHelp(out io.Writer, api string, token bool, model string) {
	auth := ""
	if token {
		auth = ` -H "Authorization: Bearer $TOOLFLEET_API_TOKEN"`
	}
	body, _ := json.Marshal(map[string]any{"input": "What is 6*7?", "tools": []string{"calculator"}, "wait": true})
	if isScripted(model) {
		fmt.Fprintln(out, "model: scripted model — no LLM; it follows the demo's script whatever the input (set TOOLFLEET_MODEL for a real one)")
		body, _ = json.Marshal(map[string]any{"input": demoInput, "tools": demoTools, "wait": true, "waitTimeout": "5s"})
	} else {
		fmt.Fprintf(out, "model: %s\n", model)
	}
	fmt.Fprintf(out, "start a run:\n  curl -s%s %s/v1/runs -H 'Content-Type: application/json' -d '%s'\n", auth, api, body)
	if isScripted(model) {
		fmt.Fprintln(out, "  (it waits at write_file, which is unsafe: its call shows \"status\":\"awaiting_approval\")")
	}
	fmt.Fprintf(out, "approve a call:\n  curl -s%s %s/v1/approvals/<callId> -H 'Content-Type: application/json' -d '{\"decision\":\"approve\"}'\n", auth, api)
	fmt.Fprintf(out, "see a run:    curl -s%s %s/v1/runs/<id>\nfollow a run: curl -sN%s %s/v1/runs/<id>/events\nstop with Ctrl-C\n", auth, api, auth, api)
}

// Dev runs the fleet with the planner's HTTP API until ctx ends, then stops gracefully.
func Dev(ctx context.Context, o DevOptions) error {
	if o.HTTPAddr == "" {
		o.HTTPAddr = "127.0.0.1:8080"
	}
	if o.Fleet.NATSPort == 0 {
		o.Fleet.NATSPort = 4222
	}
	f, err := Start(ctx, o.Fleet)
	if err != nil {
		return err
	}
	defer f.Stop()
	ln, err := net.Listen("tcp", o.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", o.HTTPAddr, err)
	}
	srv := &http.Server{Handler: f.Planner.Handler(o.Token), ReadHeaderTimeout: 10 * time.Second}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	api := "http://" + ln.Addr().String()
	fmt.Fprintf(o.Out, "toolfleet dev: NATS %s (connect any NATS client, e.g. nats --server %s sub 'toolfleet.>'), planner API %s, sandbox %s\n",
		f.Server.ClientURL(), f.Server.ClientURL(), api, f.Sandbox)
	printDevHelp(o.Out, api, o.Token != "", f.Model)
	if o.Ready != nil {
		o.Ready(api, f.Server.ClientURL())
	}
	select {
	case <-ctx.Done():
	case err := <-serveErr:
		return err
	case err := <-f.Err():
		return err
	}
	shut, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shut); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
