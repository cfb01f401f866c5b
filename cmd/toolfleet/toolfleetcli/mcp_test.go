package toolfleetcli

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolfleet/toolfleet/internal/testsupport/opstest"
)

// toolfleet mcp serves the fleet's tools over stdio to the client that started it: here
// the Go SDK's client over pipes, on a dev fleet.
func TestMCPStdio(t *testing.T) {
	t.Setenv("TOOLFLEET_MODEL", "")
	a, stop := startDev(t, DevOptions{HTTPAddr: ":0", Out: io.Discard})
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("dev: %v", err)
		}
	}()
	c, err := Parse([]string{"mcp", "-nats-url", a.NATS}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	o := c.MCP
	toServer, fromClient := io.Pipe()
	toClient, fromServer := io.Pipe()
	o.In, o.Out = toServer, fromServer
	served := opstest.Run(t, func(ctx context.Context) error { return MCP(ctx, o) })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(t.Context(),
		&mcp.IOTransport{Reader: toClient, Writer: fromClient}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "calculator", Arguments: map[string]string{"expression": "6*7"}})
	if err != nil || res.IsError || len(res.Content) != 1 || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "42") {
		t.Errorf("calculator over stdio: %+v %v", res, err)
	}
	_ = cs.Close()
	if err := served(); err != nil {
		t.Errorf("toolfleet mcp: %v", err)
	}
}

func TestParseMCP(t *testing.T) {
	t.Setenv("TOOLFLEET_MCP_TENANT", "")
	t.Setenv("TOOLFLEET_MCP_ROLE", "")
	c, err := Parse([]string{"mcp", "-nats-url", "nats://127.0.0.1:4999", "-tenant", "acme", "-role", "admin"}, io.Discard)
	if err != nil || c.Name != "mcp" || c.MCP.Caller.Tenant != "acme" || c.MCP.Caller.Role != "admin" || c.MCP.NATS.URL != "nats://127.0.0.1:4999" {
		t.Errorf("mcp: %+v %v", c, err)
	}
	if _, err := Parse([]string{"mcp", "-tenant", "acme"}, io.Discard); err == nil {
		t.Error("a tenant without a role was taken")
	}
	if _, err := Parse([]string{"mcp", "-tenant", "a.b", "-role", "x"}, io.Discard); err == nil {
		t.Error("a tenant that is not a subject token was taken")
	}
}
