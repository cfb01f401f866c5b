package allinone

import (
	"context"
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
	fmt.Fprintf(o.Out, "toolfleet dev: NATS %s, planner API %s, model %s, sandbox %s\n", f.Server.ClientURL(), api, f.Model, f.Sandbox)
	auth := ""
	if o.Token != "" {
		auth = ` -H "Authorization: Bearer $TOOLFLEET_API_TOKEN"`
	}
	fmt.Fprintf(o.Out, "start a run:\n  curl -s%s %s/v1/runs -H 'Content-Type: application/json' -d '{\"input\":\"What is 6*7?\",\"tools\":[\"calculator\"],\"wait\":true}'\n", auth, api)
	fmt.Fprintf(o.Out, "follow it:   curl -sN%s %s/v1/runs/<id>/events\nstop with Ctrl-C\n", auth, api)
	if f.Model == ScriptedModelName {
		fmt.Fprintln(o.Out, "model: scripted model — no LLM; it follows the demo script whatever the input (set TOOLFLEET_MODEL for a real one)")
	}
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
