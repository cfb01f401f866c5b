package toolfleetcli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/envflag"
	"github.com/toolfleet/toolfleet/internal/mcpedge"
	"github.com/toolfleet/toolfleet/internal/natsconn"
	"github.com/toolfleet/toolfleet/internal/ops"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// MCPOptions configure `toolfleet mcp`: the MCP edge over stdio, for a local MCP client
// that starts it, on a fleet reached over NATS.
type MCPOptions struct {
	NATS natsconn.Config
	// Caller is the identity every call is made with; zero is anonymous. The NATS user
	// must be allowed its subjects.
	Caller events.Identity
	Log    zerolog.Logger
	// In and Out are the client's stream; both nil: stdin and stdout.
	In  io.ReadCloser
	Out io.WriteCloser
}

// mcpFlags defines `toolfleet mcp`'s flags on fs and returns what reads its options once
// they are parsed.
func mcpFlags(fs *flag.FlagSet) func() (MCPOptions, error) {
	var o MCPOptions
	o.NATS.Register(fs)
	fs.StringVar(&o.Caller.Tenant, "tenant", envflag.String("TOOLFLEET_MCP_TENANT", ""), "the tenant calls are made for (env TOOLFLEET_MCP_TENANT; empty: anonymous)")
	fs.StringVar(&o.Caller.Role, "role", envflag.String("TOOLFLEET_MCP_ROLE", ""), "the caller's role within -tenant (env TOOLFLEET_MCP_ROLE)")
	level := fs.String("log-level", envflag.String("TOOLFLEET_LOG_LEVEL", "warn"), "logs on stderr: debug, info, warn or error (env TOOLFLEET_LOG_LEVEL)")
	return func() (MCPOptions, error) {
		if (o.Caller.Tenant == "") != (o.Caller.Role == "") {
			return o, fmt.Errorf("give both -tenant and -role, or neither (anonymous)")
		}
		if err := o.Caller.Validate(); err != nil {
			return o, err
		}
		if err := o.NATS.Validate(); err != nil {
			return o, err
		}
		lvl, err := zerolog.ParseLevel(*level)
		if err != nil {
			return o, fmt.Errorf("-log-level %q: %w", *level, err)
		}
		o.NATS.Name = "toolfleet-mcp"
		o.Log = ops.NewLogger(os.Stderr, "toolfleet-mcp", lvl) // stdout is the protocol's
		return o, nil
	}
}

// MCP serves the MCP edge over In and Out until the client leaves or ctx ends.
func MCP(ctx context.Context, o MCPOptions) error {
	var extra []nats.Option
	if o.Caller.Tenant != "" { // a tenant's user may use its own inbox prefix only
		extra = append(extra, nats.CustomInboxPrefix("_INBOX_"+o.Caller.Tenant))
	}
	nc, err := o.NATS.Connect(o.Log, extra...)
	if err != nil {
		return err
	}
	defer nc.Close()
	edge, err := mcpedge.Start(ctx, nc, mcpedge.Config{Log: o.Log})
	if err != nil {
		return err
	}
	defer edge.Close()
	var t mcp.Transport = &mcp.StdioTransport{}
	if o.In != nil && o.Out != nil {
		t = &mcp.IOTransport{Reader: o.In, Writer: o.Out}
	}
	if err := edge.ServeStdio(ctx, o.Caller, t); err != nil && ctx.Err() == nil {
		return err
	}
	return nil // the client left, or a signal stopped it
}
