package mcpedge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolfleet/toolfleet/internal/mcpedge"
)

// A tools/call as the official Go SDK's client sends it (protocol 2026-07-28).
const (
	sdkMeta = `{"io.modelcontextprotocol/clientCapabilities":{"roots":{"listChanged":true}},` +
		`"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"},"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`
	addParams = `{"_meta":` + sdkMeta + `,"name":"add","arguments":{"a":40,"b":2}}`
)

// rawCall is an HTTP request to the edge: a tools/call of tool unless the test says
// otherwise.
type rawCall struct {
	name   string
	fast   bool              // the fast path answers it; else the SDK does
	method string            // POST when empty
	header map[string]string // set over the SDK client's headers; "" deletes one
	body   string
	want   string // a part of the answer
}

// envelope is a JSON-RPC request of tools/call with id and params.
func envelope(id, params string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":` + params + `}`
}

// params are a tools/call's params with the SDK client's _meta.
func params(tool, args string) string {
	return `{"_meta":` + sdkMeta + `,"name":"` + tool + `","arguments":` + args + `}`
}

// withMeta are a call of add with meta as its _meta.
func withMeta(meta string) string {
	return envelope("7", `{"_meta":`+meta+`,"name":"add","arguments":{"a":1,"b":2}}`)
}

var rawCalls = []rawCall{
	// Served by the fast path.
	{name: "the SDK client's call", fast: true, body: envelope("2", addParams), want: `"structuredContent":{"sum":42}`},
	{name: "a string output", fast: true, header: map[string]string{"Mcp-Name": "shout"},
		body: envelope("3", params("shout", `{"text":"<b>&</b> \u00e9"}`)), want: `"text":"HEY \u003cb\u003e\u0026\u003c/b\u003e é"`},
	{name: "a tool error", fast: true, header: map[string]string{"Mcp-Name": "fail"}, body: envelope("4", params("fail", `{}`)), want: `"isError":true`},
	{name: "schema violations", fast: true, body: envelope("5", params("add", `{"a":"x"}`)), want: `"io.toolfleet/violations"`},
	{name: "an unknown tool", fast: true, header: map[string]string{"Mcp-Name": "nope"}, body: envelope("6", params("nope", `{}`)), want: `unknown tool \"nope\"`},
	{name: "a tool the caller may not see", fast: true, header: map[string]string{"Mcp-Name": "admin_reset"},
		body: envelope("6", params("admin_reset", `{}`)), want: `unknown tool \"admin_reset\"`},
	{name: "an admin's tool for an admin", fast: true, header: map[string]string{"Mcp-Name": "admin_reset", "Authorization": "Bearer " + adminToken},
		body: envelope("6", params("admin_reset", `{}`))},
	{name: "a string id", fast: true, body: envelope(`"call-\u0041"`, addParams)},
	{name: "a negative id", fast: true, body: envelope("-12", addParams)},
	{name: "no arguments", fast: true, header: map[string]string{"Mcp-Name": "free_form"},
		body: envelope("8", `{"_meta":`+sdkMeta+`,"name":"free_form"}`)},
	{name: "null arguments", fast: true, header: map[string]string{"Mcp-Name": "free_form"},
		body: envelope("8", `{"_meta":`+sdkMeta+`,"name":"free_form","arguments":null}`)},
	{name: "a large output (chunked)", fast: true, header: map[string]string{"Mcp-Name": "free_form"},
		body: envelope("9", params("free_form", `{"text":"`+strings.Repeat("x<>", 2000)+`"}`))},
	{name: "no client info, a log level and a _meta key of the caller's", fast: true,
		body: withMeta(`{"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
			`"io.modelcontextprotocol/logLevel":"debug","acme/trace":[1,2]}`)},
	{name: "members in another order, with spaces", fast: true,
		body: ` { "params" : ` + addParams + ` , "method" : "tools/call" , "id" : 10 , "jsonrpc" : "2.0" } `},
	{name: "any Accept, a charset", fast: true,
		header: map[string]string{"Accept": "*/*", "Content-Type": "application/json; charset=utf-8"}, body: envelope("11", addParams)},

	// Handed to the SDK: what it refuses, and what the fast path does not cover.
	{name: "a 2025-11-25 client's call", header: map[string]string{"Mcp-Protocol-Version": "2025-11-25"},
		body: envelope("19", `{"name":"add","arguments":{"a":40,"b":2}}`), want: `"structuredContent":{"sum":42}`},
	{name: "no protocol version header", header: map[string]string{"Mcp-Protocol-Version": ""}, body: envelope("20", addParams)},
	{name: "an older protocol version", header: map[string]string{"Mcp-Protocol-Version": "2025-06-18"}, body: envelope("20", addParams)},
	{name: "an unknown protocol version", header: map[string]string{"Mcp-Protocol-Version": "2099-01-01"}, body: envelope("20", addParams)},
	{name: "no Mcp-Method", header: map[string]string{"Mcp-Method": ""}, body: envelope("21", addParams)},
	{name: "another Mcp-Method", header: map[string]string{"Mcp-Method": "tools/list"}, body: envelope("21", addParams)},
	{name: "no Mcp-Name", header: map[string]string{"Mcp-Name": ""}, body: envelope("22", addParams)},
	{name: "another Mcp-Name", header: map[string]string{"Mcp-Name": "shout"}, body: envelope("22", addParams)},
	{name: "a Last-Event-ID", header: map[string]string{"Last-Event-ID": "x_1"}, body: envelope("23", addParams)},
	{name: "a text body", header: map[string]string{"Content-Type": "text/plain"}, body: envelope("24", addParams)},
	{name: "JSON answers only", header: map[string]string{"Accept": "application/json"}, body: envelope("24", addParams)},
	{name: "another Host on loopback", header: map[string]string{"Host": "evil.example"}, body: envelope("25", addParams)},
	{name: "no bearer token", header: map[string]string{"Authorization": ""}, body: envelope("26", addParams)},
	{name: "a wrong bearer token", header: map[string]string{"Authorization": "Bearer nope"}, body: envelope("26", addParams)},
	{name: "a GET", method: http.MethodGet},
	{name: "malformed JSON", body: `{"jsonrpc":"2.0","id":27,"method":"tools/call","params":`},
	{name: "a batch", body: `[` + envelope("28", addParams) + `]`},
	{name: "a notification", body: `{"jsonrpc":"2.0","method":"tools/call","params":` + addParams + `}`},
	{name: "a null id", body: envelope("null", addParams)},
	{name: "a fractional id", body: envelope("29.5", addParams)},
	{name: "an exponent id", body: envelope("3e1", addParams)},
	{name: "a boolean id", body: envelope("true", addParams)},
	{name: "another JSON-RPC version", body: `{"jsonrpc":"1.0","id":30,"method":"tools/call","params":` + addParams + `}`},
	{name: "a member in capitals", body: `{"jsonrpc":"2.0","id":31,"METHOD":"tools/call","params":` + addParams + `}`},
	{name: "another method in the body", body: `{"jsonrpc":"2.0","id":32,"method":"tools/list","params":{"_meta":` + sdkMeta + `}}`},
	{name: "no params", body: `{"jsonrpc":"2.0","id":33,"method":"tools/call"}`},
	{name: "array arguments", body: envelope("34", params("add", `[1,2]`))},
	{name: "a number too large in the arguments", body: envelope("35", params("add", `{"a":1e400,"b":2}`))},
	{name: "a name that is not a string", header: map[string]string{"Mcp-Name": "1"},
		body: envelope("36", `{"_meta":`+sdkMeta+`,"name":1,"arguments":{}}`)},
	{name: "a params member it does not cover", body: envelope("37", `{"_meta":`+sdkMeta+`,"name":"add","arguments":{"a":1,"b":2},"requestState":"x"}`)},
	{name: "the same member twice: the last counts, in both", fast: true, header: map[string]string{"Mcp-Name": "shout"},
		body: envelope("38", `{"_meta":`+sdkMeta+`,"name":"add","name":"shout","arguments":{"text":"hi"}}`)},
	{name: "too deep", header: map[string]string{"Mcp-Name": "free_form"},
		body: envelope("39", params("free_form", `{"x":`+strings.Repeat("[", 1001)+strings.Repeat("]", 1001)+`}`))},
	{name: "invalid UTF-8", header: map[string]string{"Mcp-Name": "free_form"}, body: envelope("40", params("free_form", "{\"x\":\"\xff\"}"))},
	{name: "no _meta", body: envelope("41", `{"name":"add","arguments":{"a":1,"b":2}}`)},
	{name: "no protocol version in _meta", body: withMeta(`{"io.modelcontextprotocol/clientCapabilities":{}}`)},
	{name: "another protocol version in _meta",
		body: withMeta(`{"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/protocolVersion":"2025-06-18"}`)},
	{name: "no client capabilities", body: withMeta(`{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`)},
	{name: "client capabilities that are not an object",
		body: withMeta(`{"io.modelcontextprotocol/clientCapabilities":"all","io.modelcontextprotocol/protocolVersion":"2026-07-28"}`)},
	{name: "client capabilities of the wrong shape",
		body: withMeta(`{"io.modelcontextprotocol/clientCapabilities":{"roots":{"listChanged":"yes"}},"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`)},
	{name: "null client info",
		body: withMeta(`{"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":null,"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`)},
	{name: "client info of the wrong shape",
		body: withMeta(`{"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":5},"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`)},
}

// callIDs are the call ids in an answer (its _meta, an error's text): they differ
// between two calls.
var callIDs = regexp.MustCompile(`"io.toolfleet/callId":"([^"]+)"|call ([0-9A-Za-z]{22})\b`)

// answer is what a client sees of an HTTP answer, call ids replaced.
type answer struct {
	status int
	header http.Header
	body   string
}

func send(t *testing.T, url string, c rawCall) answer {
	t.Helper()
	method := c.method
	if method == "" {
		method = http.MethodPost
	}
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(c.body))
	if err != nil {
		t.Fatal(err)
	}
	h := map[string]string{"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
		"Mcp-Method": "tools/call", "Mcp-Name": "add", "Mcp-Protocol-Version": "2026-07-28", "Authorization": "Bearer " + userToken}
	maps.Copy(h, c.header)
	for k, v := range h {
		switch {
		case k == "Host":
			req.Host = v
		case v != "":
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range callIDs.FindAllSubmatch(body, -1) {
		for _, id := range m[1:] {
			if len(id) > 0 {
				body = bytes.ReplaceAll(body, id, []byte("CALL-ID"))
			}
		}
	}
	resp.Header.Del("Date")
	if len(resp.TransferEncoding) > 0 { // chunked or not is part of what a client sees
		resp.Header["Transfer-Encoding"] = resp.TransferEncoding
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: string(body)}
}

// TestFastPathAnswersAsTheSDK sends the same HTTP requests through the edge's handler,
// whose fast path answers plain stateless tools/calls, and through the SDK's handler
// alone: every answer (status, headers, body; call ids aside) is the same, the fast
// path answers exactly the requests it covers, and the SDK every other.
func TestFastPathAnswersAsTheSDK(t *testing.T) {
	f := startFleet(t)
	_, e := f.edge(t, testAuth, 0)
	withFast := httptest.NewServer(e.Handler())
	t.Cleanup(withFast.Close)
	sdkOnly := httptest.NewServer(e.SDKHandler())
	t.Cleanup(sdkOnly.Close)

	for _, c := range rawCalls {
		t.Run(c.name, func(t *testing.T) {
			want := send(t, sdkOnly.URL, c)
			before := e.FastCalls()
			got := send(t, withFast.URL, c)
			if served := e.FastCalls() - before; served != 0 != c.fast {
				t.Errorf("the fast path answered %d, want it to answer: %v", served, c.fast)
			}
			if got.status != want.status || !maps.EqualFunc(got.header, want.header, slicesEqual) || got.body != want.body {
				t.Errorf("with the fast path:\n%d %v\n%s\nthe SDK's:\n%d %v\n%s", got.status, got.header, got.body,
					want.status, want.header, want.body)
			}
			if !strings.Contains(want.body, c.want) {
				t.Errorf("the answer does not say %q: %d %s", c.want, want.status, want.body)
			}
			if c.fast && (want.status != http.StatusOK && want.status != http.StatusBadRequest) {
				t.Errorf("a request the fast path covers answered %d: %s", want.status, want.body)
			}
		})
	}
}

func slicesEqual(a, b []string) bool { return strings.Join(a, "\x00") == strings.Join(b, "\x00") }

// TestFastPathAnswersAnUnreachableFleetAsTheSDK: when the call cannot be published
// (the edge's NATS connection is closed), both paths answer the same JSON-RPC internal
// error.
func TestFastPathAnswersAnUnreachableFleetAsTheSDK(t *testing.T) {
	f := startFleet(t)
	nc := f.js.Srv.Connect()
	_, e := f.edgeOn(t, nc, testAuth, 0)
	withFast := httptest.NewServer(e.Handler())
	t.Cleanup(withFast.Close)
	sdkOnly := httptest.NewServer(e.SDKHandler())
	t.Cleanup(sdkOnly.Close)
	nc.Close()

	c := rawCall{body: envelope("1", addParams)}
	want, got := send(t, sdkOnly.URL, c), send(t, withFast.URL, c)
	if e.FastCalls() != 1 {
		t.Errorf("the fast path answered %d calls, want 1", e.FastCalls())
	}
	if !strings.Contains(want.body, `"code":-32603`) {
		t.Errorf("the SDK's answer is not an internal error: %d %s", want.status, want.body)
	}
	if got.status != want.status || !maps.EqualFunc(got.header, want.header, slicesEqual) || got.body != want.body {
		t.Errorf("with the fast path: %d %v %s\nthe SDK's: %d %v %s", got.status, got.header, got.body, want.status, want.header, want.body)
	}
}

// TestTheSDKClientTakesTheFastPath: the official client's tools/call (what
// BenchmarkCall measures) is answered by the fast path, and its list is not.
func TestTheSDKClientTakesTheFastPath(t *testing.T) {
	f := startFleet(t)
	url, e := f.edge(t, testAuth, 0)
	cs := connect(t, url, userToken, "")
	waitForTools(t, cs, anonymousTools)
	if n := e.FastCalls(); n != 0 {
		t.Fatalf("tools/list took the fast path (%d)", n)
	}
	res, err := call(t, cs, "add", map[string]int{"a": 40, "b": 2})
	if err != nil || res.IsError || text(res) != `{"sum":42}` {
		t.Fatalf("add: %+v %v", res, err)
	}
	if n := e.FastCalls(); n != 1 {
		t.Errorf("the fast path answered %d calls, want 1", n)
	}
}

// TestPlainCallIsCanceledWithItsClient: a tools/call without a progress token (the fast
// path's) whose client gives up is canceled on the fleet: the tool sees its context end.
func TestPlainCallIsCanceledWithItsClient(t *testing.T) {
	f := startFleet(t)
	url, e := f.edge(t, testAuth, 0)
	cs := connect(t, url, userToken, "")
	waitForTools(t, cs, anonymousTools)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	answered := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{}})
		answered <- err
	}()
	var callID string
	select {
	case callID = <-f.slowStarted:
	case err := <-answered:
		t.Fatalf("the call ended before it started: %v", err)
	case <-time.After(waitTimeout):
		t.Fatalf("the slow call did not start (calls the fast path answered or holds: %d)", e.FastCalls())
	}
	cancel()
	if err := <-answered; !errors.Is(err, context.Canceled) {
		t.Fatalf("the canceled call returned %v", err)
	}
	awaitSlow(t, f.slowCanceled, callID, "it saw its context canceled")
	if n := e.FastCalls(); n != 1 {
		t.Errorf("the fast path answered %d calls, want 1", n)
	}
}

// TestBusyFleetIsToldAsBusy: a call JetStream does not take now (no responders: its
// stream electing a leader, here gone) is answered the edge's busy error, its
// counterpart of the planner API's 429 — nothing was called, try again after
// data.retryAfter — not an internal error; both paths answer the same.
func TestBusyFleetIsToldAsBusy(t *testing.T) {
	f := startFleet(t)
	_, e := f.edge(t, testAuth, 0)
	withFast := httptest.NewServer(e.Handler())
	t.Cleanup(withFast.Close)
	sdkOnly := httptest.NewServer(e.SDKHandler())
	t.Cleanup(sdkOnly.Close)
	for _, stream := range f.cfg.CallStreams() {
		if err := f.js.JS.DeleteStream(t.Context(), stream); err != nil {
			t.Fatal(err)
		}
	}

	c := rawCall{body: envelope("1", addParams)}
	want, got := send(t, sdkOnly.URL, c), send(t, withFast.URL, c)
	var resp struct {
		Error struct {
			Code    int
			Message string
			Data    struct{ RetryAfter int }
		}
	}
	if err := json.Unmarshal([]byte(want.body), &resp); err != nil {
		t.Fatalf("the answer is not JSON: %s", want.body)
	}
	if resp.Error.Code != mcpedge.CodeBusy || resp.Error.Data.RetryAfter != 1 || !strings.Contains(resp.Error.Message, "nothing was called") {
		t.Errorf("the answer: %d %s; want the busy error with retryAfter 1", want.status, want.body)
	}
	if got.status != want.status || !maps.EqualFunc(got.header, want.header, slicesEqual) || got.body != want.body {
		t.Errorf("with the fast path: %d %v %s\nthe SDK's: %d %v %s", got.status, got.header, got.body, want.status, want.header, want.body)
	}
}
