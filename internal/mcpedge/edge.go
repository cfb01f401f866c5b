package mcpedge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/apiauth"
	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/pkg/client"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Path is where the planner program and `toolfleet dev` serve the edge.
const Path = "/mcp"

// Config configures an [Edge].
type Config struct {
	// Events are the fleet's stream settings; CatalogTTL/3 becomes tools/list's ttlMs.
	Events events.Config
	// Auth maps bearer tokens to identities; the zero Auth is an open, anonymous edge.
	Auth apiauth.Auth
	// OperatorRoles are the fleet's operator roles: besides a task's creator, they may
	// see, answer the approval of and cancel the tasks of their tenant (events.MayAct).
	// Give the edge the roles its planner and executors have.
	OperatorRoles []string
	// MaxWait bounds how long a tools/call waits for its result; default 5 minutes.
	MaxWait time.Duration
	// PageSize is the most tools one tools/list page holds; default 1000.
	PageSize int
	// TaskTimeout bounds a task's call (the tasks extension, tasks.go): its deadline,
	// which travels with it; default 1 hour.
	TaskTimeout time.Duration
	// Version is the server's version in its implementation info; default "dev".
	Version string
	Log     zerolog.Logger
}

// Edge is the MCP server edge of a fleet. It is safe for concurrent use.
type Edge struct {
	cfg Config
	nc  *nats.Conn
	js  jetstream.JetStream
	// clients calls the fleet, one pkg/client per caller identity (fleetcall.go).
	clients sync.Map
	view    *view
	server  *mcp.Server
	ttlMs   int
	// impl is the server's implementation info, which every result's _meta names.
	impl *mcp.Implementation
	// fastCalls counts the tools/calls the fast path answered (fastcall.go).
	fastCalls atomic.Int64
	// taskTTLMs is a task's ttlMs: its call's deadline, then how long its result is kept.
	taskTTLMs int64

	cancel context.CancelFunc
	done   chan struct{}
}

// Start opens the catalog on nc (the fleet's streams and buckets must exist: any
// executor or planner creates them), reads it, and follows it until [Edge.Close].
func Start(ctx context.Context, nc *nats.Conn, cfg Config) (*Edge, error) {
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = 5 * time.Minute
	}
	if cfg.PageSize <= 0 {
		cfg.PageSize = 1000
	}
	if cfg.TaskTimeout <= 0 {
		cfg.TaskTimeout = time.Hour
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("mcp edge: jetstream: %w", err)
	}
	cat, err := jsutil.OpenCatalog(ctx, js, cfg.Events)
	if err != nil {
		return nil, fmt.Errorf("mcp edge: %w", err)
	}
	ev := cfg.Events.WithDefaults()
	e := &Edge{
		cfg: cfg, nc: nc, js: js, view: newView(cat, cfg.Log),
		ttlMs:     int(ev.CatalogTTL.D().Milliseconds() / 3),
		taskTTLMs: (cfg.TaskTimeout + ev.ResultsMaxAge.D()).Milliseconds(),
		done:      make(chan struct{}),
	}
	if err := e.view.load(ctx); err != nil {
		return nil, fmt.Errorf("mcp edge: %w", err)
	}
	fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	e.cancel = cancel
	go func() {
		defer close(e.done)
		e.view.follow(fctx)
	}()
	e.impl = &mcp.Implementation{Name: "toolfleet", Title: "toolfleet MCP edge", Version: cfg.Version}
	e.server = e.newServer(e.caller)
	return e, nil
}

// newServer is an MCP server whose tools/list and tools/call are the fleet's, for the
// callers identify names.
func (e *Edge) newServer(identify func(mcp.Request) events.Identity) *mcp.Server {
	caps := &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}}
	caps.AddExtension(tasksExtension, map[string]any{})
	s := mcp.NewServer(e.impl, &mcp.ServerOptions{Capabilities: caps})
	e.addTaskMethods(s)
	s.AddReceivingMiddleware(e.middleware(identify))
	return s
}

// ServeStdio serves one client on t (an mcp.StdioTransport: a local client that started
// this process) until the client leaves or ctx ends; every request acts as caller. The
// NATS connection's user must be allowed caller's subjects.
func (e *Edge) ServeStdio(ctx context.Context, caller events.Identity, t mcp.Transport) error {
	return e.newServer(func(mcp.Request) events.Identity { return caller }).Run(ctx, t)
}

// Close stops following the catalog.
func (e *Edge) Close() {
	e.cancel()
	<-e.done
}

// Handler serves MCP over stateless streamable HTTP at any path it is mounted on, behind
// the bearer-token check of [Config].Auth. A response is plain JSON, except for a request
// that asks for progress (a progressToken): its progress notifications come first, on
// an SSE stream (see progress.go). A plain stateless tools/call takes a fast path that
// answers as the SDK would, without it (fastcall.go).
func (e *Edge) Handler() http.Handler {
	return e.handler(e.serveFast)
}

// handler is Handler with fast as its fast path (nil: every request goes to the SDK).
func (e *Edge) handler(fast func(http.ResponseWriter, *http.Request, []byte) bool) http.Handler {
	// The SDK refuses a localhost request with another Host (DNS rebinding); a
	// browser's cross-origin POST is refused too; a client that goes away ends the
	// handler's context (PropagateRequestCancellation), which cancels its call.
	getServer := func(*http.Request) *mcp.Server { return e.server }
	plain := mcp.NewStreamableHTTPHandler(getServer,
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true, PropagateRequestCancellation: true})
	streamed := mcp.NewStreamableHTTPHandler(getServer,
		&mcp.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true})
	h := http.NewCrossOriginProtection().Handler(byProgress(plain, streamed, fast))
	return e.cfg.Auth.Middleware(h, func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":"missing or wrong bearer token"}` + "\n"))
	})
}

// caller is the identity of a request's bearer token; the HTTP middleware has refused
// unknown tokens already.
func (e *Edge) caller(req mcp.Request) events.Identity {
	extra := req.GetExtra()
	if extra == nil || extra.Header == nil {
		return events.Identity{}
	}
	id, _ := e.cfg.Auth.Identify(&http.Request{Header: extra.Header})
	return id
}

// middleware answers tools/list and tools/call from the fleet; everything else is the
// SDK's.
func (e *Edge) middleware(identify func(mcp.Request) events.Identity) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return e.handle(next, identify)
	}
}

func (e *Edge) handle(next mcp.MethodHandler, identify func(mcp.Request) events.Identity) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if strings.HasPrefix(method, "tasks/") { // the tasks extension's methods (tasks.go) act as the caller too
			ctx = withRequest(ctx, identify(req), req)
		}
		switch method {
		case "tools/list":
			r, ok := req.(*mcp.ListToolsRequest)
			if !ok {
				break
			}
			return e.listTools(identify(req), r.Params)
		case "tools/call":
			r, ok := req.(*mcp.CallToolRequest)
			if !ok {
				break
			}
			if wantsTask(r.Params) {
				return e.createTask(ctx, identify(req), r.Params)
			}
			return e.callTool(ctx, identify(req), r)
		}
		return next(ctx, method, req)
	}
}

// listTools answers one page of the caller's tools, after the cursor's name.
func (e *Edge) listTools(caller events.Identity, p *mcp.ListToolsParams) (*mcp.ListToolsResult, error) {
	s := e.view.cur.Load()
	start := 0
	if p != nil && p.Cursor != "" {
		after := p.Cursor
		start = sort.Search(len(s.sorted), func(i int) bool { return s.sorted[i].def.Name > after })
	}
	res := &mcp.ListToolsResult{Tools: []*mcp.Tool{}}
	res.TTLMs = e.ttlMs
	res.CacheScope = "private"
	if e.cfg.Auth.Open() {
		res.CacheScope = "public"
	}
	for _, en := range s.sorted[start:] {
		if !en.def.AllowsCaller(caller.Tenant, caller.Role) {
			continue
		}
		if len(res.Tools) == e.cfg.PageSize {
			res.NextCursor = res.Tools[len(res.Tools)-1].Name
			break
		}
		res.Tools = append(res.Tools, en.tool)
	}
	return res, nil
}

// unknownTool is the answer for a tool the caller cannot call: absent, or not its.
func unknownTool(name string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", name)}
}

// callable returns the client that calls p's tool for caller, or the error the caller
// gets: no name, or a tool it may not see (unknown to it).
func (e *Edge) callable(ctx context.Context, caller events.Identity, p *mcp.CallToolParamsRaw) (*client.Client, error) {
	if p == nil || p.Name == "" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "tools/call needs a tool name"}
	}
	en, ok := e.view.lookup(ctx, p.Name)
	if !ok || !en.def.AllowsCaller(caller.Tenant, caller.Role) {
		return nil, unknownTool(p.Name)
	}
	c, err := e.clientFor(caller)
	if err != nil {
		return nil, internalError(err)
	}
	return c, nil
}

// callTool makes the call on the fleet and answers with its result. With a progress
// token, the tool's progress events are forwarded as progress notifications; when the
// request's context ends first (the client closed the stream, or sent
// notifications/cancelled), the call is canceled on the fleet.
func (e *Edge) callTool(ctx context.Context, caller events.Identity, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	p := req.Params
	c, err := e.callable(ctx, caller, p)
	if err != nil {
		return nil, err
	}
	id := nuid.Next()
	if token := p.GetProgressToken(); token != nil && req.Session != nil {
		stop, err := e.forwardProgress(ctx, req.Session, token, caller.Tenant, id)
		if err != nil {
			return nil, internalError(err)
		}
		defer stop()
	}
	cctx, cancel := context.WithTimeout(ctx, e.cfg.MaxWait)
	defer cancel()
	res, err := c.Call(cctx, client.Request{Tool: p.Name, Arguments: callArguments(p.Arguments), ID: id, FreshID: true})
	var te *tools.Error
	switch {
	case err == nil, res.CallID != "" && res.Status != events.StatusOK: // the fleet's answer
		return toResult(id, res), nil
	case ctx.Err() != nil: // the client went away: so does the call
		e.cancelCall(ctx, c, p.Name, id)
		return nil, ctx.Err()
	case errors.Is(err, context.DeadlineExceeded):
		return errorResult(id, events.StatusTimeout, &tools.Error{Code: tools.CodeTimeout,
			Message: fmt.Sprintf("no result within %s; the call's deadline has passed, so the fleet gives it up", e.cfg.MaxWait)}, nil), nil
	case errors.As(err, &te): // refused before it was sent, or a result that does not decode
		return errorResult(id, events.StatusOf(te), te, nil), nil
	case res.CallID != "": // answered, but its output stored by reference cannot be read
		te = &tools.Error{Code: tools.CodeInternal, Message: err.Error()}
		return errorResult(id, events.StatusOf(te), te, nil), nil
	case notTakenNow(err):
		return nil, busyError(err)
	default:
		return nil, internalError(err)
	}
}

// CodeBusy is the JSON-RPC error code of a call the fleet could not take now, the
// edge's counterpart of the planner API's 429 and 503 with Retry-After: JetStream did not
// take the call (no responders while its stream elects a leader or its server
// restarts, or it answered that it is unavailable or too busy), so nothing was called,
// and the same call may be sent again after the error's data.retryAfter seconds. It is
// the first of JSON-RPC's implementation-defined server error codes.
const CodeBusy = -32000

// CodeForbidden is the JSON-RPC error code of an act on a task (tasks/get, tasks/update,
// tasks/cancel) that its caller may not do: another role's task, for a role that is not
// an operator role, or an approval of a tool the caller may not call itself. It is the
// refusal of events.MayAct — the rule the planner's API answers 403 with and the
// executors apply to an approval answer or a cancel over NATS — with its message, and
// data {"status":403}. Another tenant's task is "task not found" (the API's 404).
const CodeForbidden = -32001

// forbidden is the error of an act events.MayAct refused (CodeForbidden).
func forbidden(why *events.Refusal) error {
	return &jsonrpc.Error{Code: CodeForbidden, Message: why.Message, Data: json.RawMessage(`{"status":403}`)}
}

// busyRetryAfter is the wait a busy error asks for, in seconds.
const busyRetryAfter = 1

// notTakenNow reports whether err is JetStream not taking a call's publish now, in a
// way that passes: no responders, or an API error of a server that is unavailable (503)
// or too busy (429). A timeout is not: the call may have been stored.
func notTakenNow(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.As(err, &apiErr) && (apiErr.Code == http.StatusServiceUnavailable || apiErr.Code == http.StatusTooManyRequests)
}

// busyError is the error of a call the fleet could not take now (CodeBusy).
func busyError(err error) error {
	return &jsonrpc.Error{Code: CodeBusy, Data: json.RawMessage(`{"retryAfter":` + strconv.Itoa(busyRetryAfter) + `}`),
		Message: fmt.Sprintf("the fleet cannot take the call now (%v); nothing was called: try again after %ds", err, busyRetryAfter)}
}

// callArguments are a call's arguments as the fleet takes them: none is {}.
func callArguments(args json.RawMessage) json.RawMessage {
	if len(args) == 0 || string(args) == "null" {
		return json.RawMessage("{}")
	}
	return args
}

// cancelCall publishes the fleet's cancel of call id, whose client has gone (ctx has
// ended): the executor running it cancels the tool's context, and one that has not
// started it answers it canceled without running it.
func (e *Edge) cancelCall(ctx context.Context, c *client.Client, tool, id string) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := c.Cancel(cctx, tool, id); err != nil {
		e.cfg.Log.Warn().Err(err).Str("tool", tool).Str("call_id", id).Msg("mcp edge: cancel of an abandoned call not published")
	}
}

// toResult maps a fleet result to a tools/call result.
func toResult(id string, res events.Result) *mcp.CallToolResult {
	if res.Status != events.StatusOK {
		te := res.Error
		if te == nil {
			te = &tools.Error{Code: tools.CodeToolFailed, Message: "the call ended with status " + string(res.Status)}
		}
		return errorResult(id, res.Status, te, res.Output)
	}
	out := &mcp.CallToolResult{Content: []mcp.Content{}, Meta: mcp.Meta{
		"io.toolfleet/callId": id, "io.toolfleet/status": string(res.Status)}}
	o := trimJSON(res.Output)
	switch {
	case len(o) == 0 || string(o) == "null":
	case o[0] == '"':
		var s string
		if json.Unmarshal(o, &s) == nil {
			out.Content = append(out.Content, &mcp.TextContent{Text: s})
		} else {
			out.Content = append(out.Content, &mcp.TextContent{Text: string(o)})
		}
	case o[0] == '{':
		out.Content = append(out.Content, &mcp.TextContent{Text: string(o)})
		out.StructuredContent = json.RawMessage(o)
	default:
		out.Content = append(out.Content, &mcp.TextContent{Text: string(o)})
	}
	return out
}

// errorResult is the isError answer for a failed call: the error's text (the fleet's
// message already lists the schema violations) and, when the tool's callbacks made an
// error output of their own, that output.
func errorResult(id string, status events.Status, te *tools.Error, output json.RawMessage) *mcp.CallToolResult {
	out := &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: te.Error()}}, Meta: mcp.Meta{
		"io.toolfleet/callId": id, "io.toolfleet/status": string(status), "io.toolfleet/code": string(te.Code)}}
	if len(te.Violations) > 0 {
		out.Meta["io.toolfleet/violations"] = te.Violations
		if !strings.Contains(te.Message, te.Violations[0].Message) {
			var b strings.Builder
			b.WriteString(te.Error())
			for _, v := range te.Violations {
				fmt.Fprintf(&b, "\n- %s", violationText(v))
			}
			out.Content[0] = &mcp.TextContent{Text: b.String()}
		}
	}
	if o := trimJSON(output); len(o) > 0 && string(o) != "null" && !justTheError(o) {
		out.Content = append(out.Content, &mcp.TextContent{Text: string(o)})
	}
	return out
}

// justTheError reports whether an error output is the fleet's own {"error": {...}},
// which the first text item says already.
func justTheError(o json.RawMessage) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(o, &m) != nil {
		return false
	}
	_, ok := m["error"]
	return ok && len(m) == 1
}

func violationText(v tools.Violation) string {
	at := v.Pointer
	if at == "" {
		at = "(root)"
	}
	return at + ": " + v.Message
}

func trimJSON(b json.RawMessage) json.RawMessage {
	return json.RawMessage(strings.TrimSpace(string(b)))
}
