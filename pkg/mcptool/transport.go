package mcptool

import (
	"context"
	"net/http"
	"os/exec"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Command is a [Config].Transport that runs a stdio server: each connection starts a
// fresh process from newCmd (which must return a new, unstarted *exec.Cmd each time).
// The process's stdin and stdout carry the protocol; closing the connection closes its
// stdin, then terminates it. Tools files use a variant that also kills the process's
// group and passes only a declared environment (package toolsfile).
func Command(newCmd func() *exec.Cmd) func(context.Context) (mcp.Transport, error) {
	return func(context.Context) (mcp.Transport, error) {
		return &mcp.CommandTransport{Command: newCmd()}, nil
	}
}

// HTTP is a [Config].Transport that reaches a server over streamable HTTP at endpoint.
// client (nil: http.DefaultClient) carries what the server needs, such as an
// Authorization header set by its Transport.
func HTTP(endpoint string, client *http.Client) func(context.Context) (mcp.Transport, error) {
	return func(context.Context) (mcp.Transport, error) {
		return &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: client}, nil
	}
}
