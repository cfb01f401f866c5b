package toolfleetcli

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/toolfleet/toolfleet/cmd/planner/plannercli"
	"github.com/toolfleet/toolfleet/internal/inspector"
	"github.com/toolfleet/toolfleet/internal/mcpedge"
	"github.com/toolfleet/toolfleet/internal/ops"
	"github.com/toolfleet/toolfleet/internal/planner/plannerapi"
	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/pkg/client/runs"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// DevOptions configure `toolfleet dev`.
type DevOptions struct {
	Fleet Options
	// Host is the address NATS, the planner API and the ops server bind: 127.0.0.1 by
	// default, 0.0.0.0 to be reached from outside a container.
	Host string
	// HTTPAddr is the planner API's listen address; one without a host binds Host.
	// Default Host:8080.
	HTTPAddr string
	// OpsAddr is the ops server's listen address (/metrics, /healthz, /readyz); one
	// without a host binds Host. Empty: no ops server.
	OpsAddr string
	// Token, when set, protects the API with a bearer token (its holder is anonymous);
	// Tokens map more tokens to the tenant and role their holders act with (see
	// plannerapi.Auth).
	Token  string
	Tokens map[string]events.Identity
	Out    io.Writer
	// Ready, when set, is called with the addresses once everything serves.
	Ready func(DevAddrs)
}

// DevAddrs are where a dev fleet serves.
type DevAddrs struct {
	API  string // the planner API's URL, http://host:port
	NATS string // the embedded server's client URL
	Ops  string // the ops server's host:port; empty when off
	MCP  string // the MCP edge's URL, the API's /mcp
	UI   string // the inspector's URL, the API's /ui/
}

// echoExample is a message the echo model answers with the calculator's result, quoted
// for a shell.
const echoExample = `'calculator {"expression": "6*7"}'`

// printDevHelp shows how to drive the fleet with the toolfleet CLI, which finds dev at
// its default addresses by itself; other addresses (and a token) are set once in the
// environment the CLI reads. The demo's script is followed whatever the input, so its
// example is the demo's run, which stops at an approval the user gives; a script of the
// user's own answers as it says, so its example is the echo model's, whose answer is
// the tool's result; a real model gets a question of its own.
func printDevHelp(out io.Writer, a DevAddrs, token, tokensFile bool, model string) {
	switch {
	case model == ScriptedModelName:
		fmt.Fprintln(out, "model: scripted model — no LLM; it follows the demo's script whatever the input (-model or TOOLFLEET_MODEL for a real one)")
	case isScripted(model):
		fmt.Fprintf(out, "model: %s, a scripted model — no LLM; it answers from its script (the demo's script is %s)\n", model, ScriptedModelName)
	default:
		fmt.Fprintf(out, "model: %s\n", model)
	}
	fmt.Fprintln(out, "drive it with the CLI in another terminal (go install ./cmd/toolfleet, or alias toolfleet='go run ./cmd/toolfleet'; docs/cli.md):")
	var env []string
	if a.API != runs.DefaultURL {
		env = append(env, "TOOLFLEET_API_URL="+a.API)
	}
	if a.NATS != defaultNATSURL {
		env = append(env, "TOOLFLEET_NATS_URL="+a.NATS)
	}
	switch {
	case token:
		env = append(env, "TOOLFLEET_API_TOKEN=<the token given to dev>")
	case tokensFile:
		env = append(env, "TOOLFLEET_API_TOKEN=<a token of TOOLFLEET_API_TOKENS_FILE: its tenant and role are the runs'>")
	}
	if len(env) > 0 {
		fmt.Fprintf(out, "  export %s\n", strings.Join(env, " "))
	}
	switch {
	case model == ScriptedModelName:
		fmt.Fprintf(out, "  toolfleet run %q --tools %s --follow\n", "Total the orders and write a report", strings.Join(demoTools, ","))
		fmt.Fprintln(out, "    (it waits at write_file, which is unsafe, until you answer)")
	case isScripted(model):
		fmt.Fprintf(out, "  toolfleet run %s --model %s --tools calculator --wait\n", echoExample, provider.EchoModelName)
		fmt.Fprintln(out, "    (the echo model calls the tools a message names; the answer is their results)")
	default:
		fmt.Fprintln(out, `  toolfleet run "What is 6*7?" --tools calculator --wait`)
	}
	fmt.Fprintln(out, "  toolfleet approvals ls                  # calls waiting for you; approvals approve|deny|modify <callId>")
	fmt.Fprintln(out, `  toolfleet runs ls                       # runs get|watch|cancel <id>, runs send <id> "and then?" --wait`)
	fmt.Fprintln(out, "  toolfleet tools ls                      # the tools, their executors and queues")
	fmt.Fprintln(out, `  toolfleet call calculator '{"expression":"6*7"}'   # one call over NATS, no planner`)
	fmt.Fprintf(out, "the HTTP API: %s/openapi.json (docs/api.md); stop with Ctrl-C\n", a.API)
}

// Dev runs the fleet with the planner's HTTP API and the ops server until ctx ends,
// then stops gracefully.
func Dev(ctx context.Context, o DevOptions) error {
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	if o.HTTPAddr == "" {
		o.HTTPAddr = ":8080"
	}
	if o.Fleet.NATSPort == 0 {
		o.Fleet.NATSPort = 4222
	}
	o.Fleet.NATSHost = o.Host
	if o.Fleet.Metrics == nil {
		o.Fleet.Metrics = ops.NewRegistry()
	}
	// The fleet first: it checks its configuration before it binds a port (a bad model
	// or tools file is exit 2 whatever holds the ops port), then the ops server.
	f, err := Start(ctx, o.Fleet)
	if err != nil {
		return err
	}
	defer f.Stop()
	srv, err := ops.Start(onHost(o.OpsAddr, o.Host), o.Fleet.Metrics, o.Fleet.Log)
	if err != nil {
		return err
	}
	defer srv.Close()
	srv.SetReady(f.Ready)
	ln, err := net.Listen("tcp", onHost(o.HTTPAddr, o.Host))
	if err != nil {
		return fmt.Errorf("planner API: listen %s: %w", onHost(o.HTTPAddr, o.Host), err)
	}
	auth := plannerapi.Auth{Token: o.Token, Tokens: o.Tokens}
	edge, err := mcpedge.Start(ctx, f.NC, mcpedge.Config{Auth: auth, OperatorRoles: o.Fleet.OperatorRoles, Log: o.Fleet.Log})
	if err != nil {
		ln.Close()
		return err
	}
	defer edge.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	serveErr := make(chan error, 1)
	go func() {
		serveErr <- plannercli.ServeAPI(ctx, ln, inspector.Mount(mcpedge.Mount(plannerapi.Handler(f.Planner, auth), edge.Handler())))
	}()
	addrs := DevAddrs{API: "http://" + ln.Addr().String(), NATS: f.Server.ClientURL(), Ops: srv.Addr()}
	addrs.MCP = addrs.API + mcpedge.Path
	addrs.UI = addrs.API + inspector.Path
	fmt.Fprintf(o.Out, "toolfleet dev: inspector %s (runs, calls, approvals, the fleet; live)\n", addrs.UI)
	fmt.Fprintf(o.Out, "toolfleet dev: NATS %s (connect any NATS client, e.g. nats --server %s sub 'toolfleet.>'), planner API %s, sandbox %s\n",
		addrs.NATS, addrs.NATS, addrs.API, f.Sandbox)
	if addrs.Ops != "" {
		fmt.Fprintf(o.Out, "ops: http://%s/metrics, /healthz, /readyz\n", addrs.Ops)
	}
	printDevHelp(o.Out, addrs, o.Token != "", len(o.Tokens) > 0, f.Model)
	fmt.Fprintf(o.Out, "MCP edge (streamable HTTP, the same tokens): %s\n  e.g. npx -y @modelcontextprotocol/inspector@0 --cli %s --transport http --method tools/list\n", addrs.MCP, addrs.MCP)
	if o.Ready != nil {
		o.Ready(addrs)
	}
	select {
	case <-ctx.Done():
	case err := <-serveErr:
		return err
	case err := <-f.Err():
		cancel()
		<-serveErr // the API's graceful shutdown: nothing of dev runs after it returns
		return err
	}
	return <-serveErr // the API's graceful shutdown
}

// onHost puts host into a listen address that has none (":8080"); an empty address
// stays empty.
func onHost(addr, host string) string {
	h, port, err := net.SplitHostPort(addr)
	if err != nil || h != "" {
		return addr
	}
	return net.JoinHostPort(host, port)
}
