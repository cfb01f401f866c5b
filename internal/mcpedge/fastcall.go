package mcpedge

import (
	"bytes"
	"encoding/json"
	"errors"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolfleet/toolfleet/internal/apiauth"
	"github.com/toolfleet/toolfleet/internal/jsonscan"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// The fast path of tools/call.
//
// Why it exists: through the SDK's stateless handler, a tools/call cost the edge more
// than the fleet call it makes. Per request the SDK builds a server session (a JSON-RPC
// connection whose goroutines hand the request and its answer over by channels) and
// decodes the body about eight times, each decode with a fresh buffer: on two cores,
// most of the edge's added p50 (BenchmarkCall). The fast path answers the one request
// that latency matters for, a stateless (2026-07-28) tools/call that wants a plain JSON
// answer, in the HTTP handler's own goroutine with a few small decodes, and writes what
// the SDK would: the same callTool, the SDK's serverInfo annotation, the SDK's JSON-RPC
// encoding (jsonrpc.EncodeMessage), headers and status codes.
//
// It serves only a request that it can show the SDK would serve: it makes every check
// the SDK makes of such a request, the same way (the functions below that copy the
// SDK's say so), and hands anything else to the SDK untouched, which answers it as it
// always did, errors included: an older protocol version, a batch, a notification, a
// task, progress, params or an id it does not cover, any header or _meta the SDK would
// refuse. fastcall_test.go sends the same requests, valid and not, through both and
// compares the answers byte for byte.

// fastVersion is the protocol version the fast path serves: the SDK's latest, stateless one.
const fastVersion = "2026-07-28"

// maxDepth is the SDK's bound on a message's nesting (internal/json.defaultMaxDepth),
// which jsonscan.MaxDepth equals.
const maxDepth = jsonscan.MaxDepth

// fastCall is a tools/call the fast path serves: its JSON-RPC id and its request.
type fastCall struct {
	id  jsonrpc.ID
	req *mcp.CallToolRequest
}

// serveFast answers r, a POST whose body was read, when it is a tools/call the fast
// path serves, and reports whether it did; it writes nothing when it did not.
func (e *Edge) serveFast(w http.ResponseWriter, r *http.Request, body []byte) bool {
	fc, ok := parseFast(r, body)
	if !ok {
		return false
	}
	e.fastCalls.Add(1)
	ctx := r.Context()
	res, err := e.callTool(ctx, apiauth.Caller(ctx), fc.req)
	if err != nil && ctx.Err() != nil { // the client went away: nobody reads an answer
		return true
	}
	e.writeFast(w, fc.id, res, err)
	return true
}

// writeFast writes the answer to call id as the SDK's handler does with JSONResponse:
// the result annotated with the server's info, or the error with the status the
// specification gives its code.
func (e *Edge) writeFast(w http.ResponseWriter, id jsonrpc.ID, res *mcp.CallToolResult, err error) {
	resp := &jsonrpc.Response{ID: id, Error: err}
	if err == nil {
		if res.Meta == nil {
			res.Meta = mcp.Meta{}
		}
		if _, ok := res.Meta[mcp.MetaKeyServerInfo]; !ok {
			res.Meta[mcp.MetaKeyServerInfo] = e.impl
		}
		raw, merr := tools.MarshalJSON(res) // the SDK's encoding: no HTML escaping
		if merr != nil {
			resp.Error = internalError(merr)
		}
		resp.Result = raw
	}
	data, err := jsonrpc.EncodeMessage(resp)
	if err != nil {
		data, _ = jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: internalError(err)}) // an id and a message always encode
	}
	h := w.Header()
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("Content-Type", "application/json")
	w.WriteHeader(errorStatus(resp.Error))
	_, _ = w.Write(data)
}

// errorStatus is the HTTP status of an answer with err (the SDK's extractErrorStatus, for
// 2026-07-28): 404 for an unknown method, 400 for invalid params and the protocol's
// version and capability errors, else 200.
func errorStatus(err error) int {
	var jerr *jsonrpc.Error
	if !errors.As(err, &jerr) {
		return http.StatusOK
	}
	switch jerr.Code {
	case jsonrpc.CodeMethodNotFound:
		return http.StatusNotFound
	case jsonrpc.CodeInvalidParams, mcp.CodeUnsupportedProtocolVersion, mcp.CodeMissingRequiredClientCapabilities:
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// parseFast returns the call of r when the fast path serves it: headers first (cheap),
// then the body.
func parseFast(r *http.Request, body []byte) (fastCall, bool) {
	h := r.Header
	name := h.Get("Mcp-Name")
	if h.Get("Mcp-Protocol-Version") != fastVersion || h.Get("Mcp-Method") != "tools/call" || name == "" ||
		len(h.Values("Last-Event-ID")) > 0 || rebinding(r) {
		return fastCall{}, false
	}
	if mt, _, err := mime.ParseMediaType(h.Get("Content-Type")); err != nil || mt != "application/json" {
		return fastCall{}, false
	}
	if jsonOK, streamOK := accepts(h.Values("Accept")); !jsonOK || !streamOK {
		return fastCall{}, false
	}
	// jsonscan.Depth counts as the SDK's check does for any body that parses; one that
	// does not is refused below, and goes to the SDK either way.
	if !utf8.Valid(body) || jsonscan.Depth(body) > maxDepth {
		return fastCall{}, false
	}
	// The envelope: exactly these four members (a map, not a struct: encoding/json
	// matches struct fields case-insensitively, the SDK does not).
	var env map[string]json.RawMessage
	if json.Unmarshal(body, &env) != nil || len(env) != 4 ||
		!isString(env["jsonrpc"], "2.0") || !isString(env["method"], "tools/call") {
		return fastCall{}, false
	}
	id, ok := parseID(env["id"])
	if !ok {
		return fastCall{}, false
	}
	p, ok := parseParams(env["params"], name)
	if !ok {
		return fastCall{}, false
	}
	return fastCall{id: id, req: &mcp.CallToolRequest{Params: p}}, true
}

// parseParams returns the params of a tools/call of the tool name (the Mcp-Name header)
// when they hold nothing but _meta (the 2026-07-28 triple the SDK checks, and no task
// or progress), name and arguments (an object, null or none). Its Meta is left out:
// callTool reads only a progress token there, which a request on the fast path has not.
func parseParams(raw json.RawMessage, name string) (*mcp.CallToolParamsRaw, bool) {
	var params map[string]json.RawMessage
	if json.Unmarshal(raw, &params) != nil || params == nil {
		return nil, false
	}
	p, hasMeta := &mcp.CallToolParamsRaw{}, false
	for k, v := range params {
		switch k {
		case "name":
			if !isString(v, name) {
				return nil, false
			}
			p.Name = name
		case "arguments":
			// The SDK decodes them into an any (extractName): a number too large
			// for a float64 fails there.
			var args any
			if json.Unmarshal(v, &args) != nil {
				return nil, false
			}
			if _, isObject := args.(map[string]any); !isObject && args != nil {
				return nil, false
			}
			p.Arguments = v
		case "_meta":
			if !goodMetas.check(v) {
				return nil, false
			}
			hasMeta = true
		default:
			return nil, false
		}
	}
	return p, p.Name != "" && hasMeta
}

// metaCache remembers the _meta values that fastMeta passed: a client sends the same
// one with every call, and checking it is most of the fast path's decoding. It holds
// small values only, and starts over when full.
type metaCache struct {
	mu   sync.RWMutex
	good map[string]struct{}
}

const (
	metaCacheSize = 1024 // values
	metaCacheMax  = 2048 // bytes of one value
)

var goodMetas = &metaCache{good: map[string]struct{}{}}

// check reports whether raw, a request's _meta, passes fastMeta.
func (c *metaCache) check(raw json.RawMessage) bool {
	c.mu.RLock()
	_, ok := c.good[string(raw)]
	c.mu.RUnlock()
	if ok {
		return true
	}
	var meta mcp.Meta
	if json.Unmarshal(raw, &meta) != nil || !fastMeta(meta) {
		return false
	}
	if len(raw) <= metaCacheMax {
		c.mu.Lock()
		if len(c.good) >= metaCacheSize {
			clear(c.good)
		}
		c.good[string(raw)] = struct{}{}
		c.mu.Unlock()
	}
	return true
}

// fastMeta reports whether a request's _meta passes the SDK's checks of a 2026-07-28
// call (validateRequestMeta, servePOST): the protocol version of the header, client
// capabilities (required) and client info (optional) that decode into the SDK's types;
// and whether the call is not a task, which the SDK's path makes.
func fastMeta(meta mcp.Meta) bool {
	if v, _ := meta[mcp.MetaKeyProtocolVersion].(string); v != fastVersion {
		return false
	}
	caps, ok := meta[mcp.MetaKeyClientCapabilities].(map[string]any)
	if !ok || declaresTasks(meta) {
		return false
	}
	// The SDK's clientCapabilitiesV2: ClientCapabilities with roots of their own.
	var v2 struct {
		mcp.ClientCapabilities
		//lint:ignore SA1019 roots are deprecated but still sent by clients during the deprecation window: the fast path must read them as the SDK does
		Roots *mcp.RootCapabilities `json:"roots,omitempty"`
	}
	if remarshal(caps, &v2) != nil {
		return false
	}
	if info, present := meta[mcp.MetaKeyClientInfo]; present {
		var impl mcp.Implementation
		if _, ok := info.(map[string]any); !ok || remarshal(info, &impl) != nil {
			return false
		}
	}
	return true
}

func remarshal(from, to any) error {
	b, err := json.Marshal(from)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, to)
}

// parseID returns a JSON-RPC id the SDK echoes as it came: a string, or an integer
// small enough that the SDK's float64 holds it exactly. Anything else (none, null, a
// fraction, an exponent) goes to the SDK.
func parseID(raw json.RawMessage) (jsonrpc.ID, bool) {
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return jsonrpc.ID{}, false
		}
		id, err := jsonrpc.MakeID(s)
		return id, err == nil
	}
	digits := bytes.TrimPrefix(raw, []byte("-"))
	if len(digits) == 0 || len(digits) > 15 || strings.Trim(string(digits), "0123456789") != "" {
		return jsonrpc.ID{}, false
	}
	var f float64
	if json.Unmarshal(raw, &f) != nil {
		return jsonrpc.ID{}, false
	}
	id, err := jsonrpc.MakeID(f)
	return id, err == nil
}

// isString reports whether raw is the JSON string want.
func isString(raw json.RawMessage, want string) bool {
	var s string
	return len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &s) == nil && s == want
}

// rebinding reports whether the SDK refuses r as DNS rebinding: it came to a loopback
// address with a Host that is not one (StreamableHTTPHandler.ServeHTTP).
func rebinding(r *http.Request) bool {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	return ok && local != nil && isLoopback(local.String()) && !isLoopback(r.Host)
}

// isLoopback is the SDK's (internal/util.IsLoopback).
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = strings.Trim(addr, "[]")
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// accepts is the SDK's check of the Accept header (streamableAccepts).
func accepts(values []string) (jsonOK, streamOK bool) {
	for _, value := range values {
		for _, raw := range strings.Split(value, ",") {
			base, _, _ := strings.Cut(strings.TrimSpace(raw), ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	return jsonOK, streamOK
}
