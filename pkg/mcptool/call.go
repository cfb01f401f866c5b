package mcptool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// runner is the tools.Func of the server's tool called mcpName.
func (s *Server) runner(mcpName string) tools.Func {
	return func(ctx context.Context, args json.RawMessage) (any, error) {
		return s.call(ctx, mcpName, args)
	}
}

// call runs one tools/call and maps its answer; see the package doc for the mapping.
func (s *Server) call(ctx context.Context, mcpName string, args json.RawMessage) (any, error) {
	tool := s.cfg.Name + "/" + mcpName
	sess, err := s.session(ctx)
	if err != nil {
		return nil, s.callError(ctx, tool, err, nil)
	}
	params := &mcp.CallToolParams{Name: mcpName, Arguments: args}
	if info, ok := tools.CallInfoFrom(ctx); ok {
		// The call's identity, so that a server can make its effects idempotent per call.
		params.Meta = mcp.Meta{"io.toolfleet/call-id": info.CallID, "io.toolfleet/run-id": info.RunID, "io.toolfleet/attempt": info.Attempt}
	}
	res, err := sess.CallTool(ctx, params)
	if err != nil {
		return nil, s.callError(ctx, tool, err, sess)
	}
	return Output(res)
}

// callError classifies a failed tools/call: the caller's deadline, the server's JSON-RPC
// error, or the connection lost (then the session is closed, so that the supervisor
// connects again).
func (s *Server) callError(ctx context.Context, tool string, err error, sess *mcp.ClientSession) *tools.Error {
	if ctx.Err() != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return tools.Wrap(tools.CodeTimeout, err, fmt.Sprintf("MCP tool %s: no answer before the deadline; the request was cancelled", tool))
		}
		return tools.Wrap(tools.CodeCanceled, err, fmt.Sprintf("MCP tool %s: canceled", tool))
	}
	var rpc *jsonrpc.Error
	if errors.As(err, &rpc) {
		return tools.Wrap(tools.CodeToolFailedPermanent, err, fmt.Sprintf("MCP tool %s: the server answered error %d: %s", tool, rpc.Code, rpc.Message))
	}
	if sess == nil {
		return tools.Wrap(tools.CodeToolFailed, err, fmt.Sprintf("MCP tool %s: %v", tool, err))
	}
	// Anything else is the transport: the process died, the connection or the HTTP
	// session was lost. The supervisor drops the session and connects again.
	s.lose(sess)
	return tools.Wrap(tools.CodeToolFailed, err, fmt.Sprintf(
		"MCP tool %s: the connection to MCP server %s was lost during the call (%v); the call may or may not have taken effect; the adapter reconnects for later calls",
		tool, s.cfg.Name, err))
}

// Output turns a tools/call result into a tool's output, or into an error when the
// server said the call failed (isError). See the package doc for the mapping.
func Output(res *mcp.CallToolResult) (any, error) {
	if res.IsError {
		return nil, &tools.Error{Code: tools.CodeToolFailedPermanent, Message: "the MCP tool failed: " + errorText(res)}
	}
	if res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return nil, tools.Wrap(tools.CodeToolFailedPermanent, err, fmt.Sprintf("the MCP tool's structuredContent: %v", err))
		}
		return json.RawMessage(b), nil
	}
	switch len(res.Content) {
	case 0:
		return nil, nil
	case 1:
		if t, ok := res.Content[0].(*mcp.TextContent); ok {
			return t.Text, nil
		}
	}
	b, err := json.Marshal(map[string]any{"content": res.Content})
	if err != nil {
		return nil, tools.Wrap(tools.CodeToolFailedPermanent, err, fmt.Sprintf("the MCP tool's content: %v", err))
	}
	return json.RawMessage(b), nil
}

// errorText is what a failed tool said: its text content, else its structured content,
// else its content as JSON; at most 4 KiB.
func errorText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	msg := strings.Join(parts, "\n")
	if msg == "" && res.StructuredContent != nil {
		msg = shownJSON("structuredContent", res.StructuredContent)
	}
	if msg == "" && len(res.Content) > 0 {
		msg = shownJSON("content", res.Content)
	}
	if msg == "" {
		msg = "(no message)"
	}
	if len(msg) > errTextLimit {
		msg = strings.ToValidUTF8(msg[:errTextLimit], "") + "…"
	}
	return msg
}

// shownJSON is v as JSON for a failure's message, or why the failure's field called
// what cannot be shown.
func shownJSON(what string, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "(its " + what + " cannot be shown: " + err.Error() + ")"
	}
	return string(b)
}
