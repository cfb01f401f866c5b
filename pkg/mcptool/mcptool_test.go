package mcptool_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolfleet/toolfleet/internal/testsupport/mcptooltest"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/mcptool"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

func start(t *testing.T, reg *tools.Registry, cfg mcptool.Config) *mcptool.Server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s, err := mcptool.Start(ctx, reg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// run hydrates and runs one call through the registry, as an executor does.
func run(t *testing.T, reg *tools.Registry, name, args string) tools.Outcome {
	t.Helper()
	call, err := reg.Hydrate(name, []byte(args))
	if err != nil {
		t.Fatalf("hydrate %s %s: %v", name, args, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return call.Run(ctx)
}

func TestToolsAreRegisteredPrefixedWithTheirSchemasAndUnsafe(t *testing.T) {
	srv, _ := mcptooltest.NewServer(func() {})
	reg := tools.NewRegistry()
	s := start(t, reg, mcptool.Config{Name: "test", Prefix: "t", Transport: mcptooltest.InMemory(srv, nil)})
	want := []string{"t_add", "t_crash", "t_echo", "t_fail", "t_grow", "t_picture", "t_shrink", "t_sleep", "t_stats"}
	if got := s.Names(); !slices.Equal(got, want) {
		t.Fatalf("names %v, want %v", got, want)
	}
	d, ok := reg.Lookup("t_add")
	if !ok {
		t.Fatal("t_add is not registered")
	}
	var schema struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if err := json.Unmarshal(d.Parameters, &schema); err != nil {
		t.Fatal(err)
	}
	if schema.Type != "object" || schema.Properties["a"] == nil || schema.Properties["b"] == nil || !slices.Contains(schema.Required, "a") {
		t.Errorf("t_add parameters %s, want the server's inputSchema", d.Parameters)
	}
	if d.Description != "Add two integers." || d.Safe || d.IsIdempotent() || !slices.Contains(d.Tags, "mcp") || !slices.Contains(d.Tags, "test") {
		t.Errorf("t_add definition %+v: want the server's description, unsafe, not idempotent, tagged mcp and test", d)
	}
}

func TestPolicyOverridesDefaults(t *testing.T) {
	srv, _ := mcptooltest.NewServer(func() {})
	reg := tools.NewRegistry()
	start(t, reg, mcptool.Config{Name: "test", Transport: mcptooltest.InMemory(srv, nil), Policy: mcptool.Policy{
		Defaults: mcptool.Override{Idempotent: new(true), Roles: []string{"dev"}},
		Tools: map[string]mcptool.Override{
			"add":  {Safe: new(true), Timeout: tools.Duration(3 * time.Second), Name: "plus", Tags: []string{"math"}},
			"echo": {Idempotent: new(false), Roles: []string{"ops"}, Tenants: []string{"acme"}},
		},
		Exclude: []string{"crash"},
	}})
	plus, ok := reg.Lookup("plus")
	if !ok || !plus.Safe || !plus.IsIdempotent() || plus.Timeout.D() != 3*time.Second || !slices.Equal(plus.Roles, []string{"dev"}) || !slices.Contains(plus.Tags, "math") {
		t.Errorf("plus: %+v (found %v): want safe, idempotent, 3s, role dev, tag math", plus, ok)
	}
	echo, _ := reg.Lookup("test_echo")
	if echo.Safe || echo.IsIdempotent() || !slices.Equal(echo.Roles, []string{"ops"}) || !slices.Equal(echo.Tenants, []string{"acme"}) {
		t.Errorf("test_echo: %+v: want unsafe, not idempotent, role ops", echo)
	}
	if _, ok := reg.Lookup("test_crash"); ok {
		t.Error("test_crash is registered although excluded")
	}
	if _, ok := reg.Lookup("test_add"); ok {
		t.Error("add is registered under its prefixed name although renamed")
	}
}

func TestCallsMapTheServersAnswers(t *testing.T) {
	srv, counts := mcptooltest.NewServer(func() {})
	reg := tools.NewRegistry()
	start(t, reg, mcptool.Config{Name: "t", Transport: mcptooltest.InMemory(srv, nil)})

	if o := run(t, reg, "t_add", `{"a":2,"b":40}`); o.Err != nil || string(o.Output) != `{"sum":42}` {
		t.Errorf("t_add: %s %v, want structured content {\"sum\":42}", o.Output, o.Err)
	}
	if o := run(t, reg, "t_echo", `{"text":"hi there"}`); o.Err != nil || string(o.Output) != `"hi there"` {
		t.Errorf("t_echo: %s %v, want the text as a JSON string", o.Output, o.Err)
	}
	o := run(t, reg, "t_picture", `{}`)
	var pic struct {
		Content []map[string]any `json:"content"`
	}
	if err := json.Unmarshal(o.Output, &pic); o.Err != nil || err != nil || len(pic.Content) != 2 || pic.Content[0]["type"] != "text" || pic.Content[1]["type"] != "image" {
		t.Errorf("t_picture: %s %v, want {\"content\":[text, image]}", o.Output, o.Err)
	}
	o = run(t, reg, "t_fail", `{}`)
	if !errors.Is(o.Err, tools.ErrToolFailedPermanent) || !strings.Contains(o.Err.Message, "boom") {
		t.Errorf("t_fail: %s %v, want tool_error_permanent saying boom", o.Output, o.Err)
	}

	// A schema violation is refused by the registry: the server never sees it.
	before := counts.Get("add")
	_, err := reg.Hydrate("t_add", []byte(`{"a":"two","b":40}`))
	if !errors.Is(err, tools.ErrInvalidInput) {
		t.Fatalf("t_add with a string: %v, want invalid_tool_input", err)
	}
	if _, err := reg.Hydrate("t_add", []byte(`{"a":2}`)); !errors.Is(err, tools.ErrInvalidInput) {
		t.Fatalf("t_add without b: %v, want invalid_tool_input", err)
	}
	if got := counts.Get("add"); got != before {
		t.Errorf("the server got %d calls of add for invalid arguments", got-before)
	}
}

// A failed tool whose only content cannot be shown as JSON says so and why, instead of
// saying nothing.
func TestAFailuresContentThatCannotBeShownIsSaid(t *testing.T) {
	_, err := mcptool.Output(&mcp.CallToolResult{IsError: true, StructuredContent: math.Inf(1)})
	var te *tools.Error
	if !errors.As(err, &te) || !strings.Contains(te.Message, "structuredContent cannot be shown") || !strings.Contains(te.Message, "unsupported value") {
		t.Fatalf("Output: %v, want a failure saying its structuredContent cannot be shown and why", err)
	}
}

func TestADeadlineCancelsTheCall(t *testing.T) {
	srv, _ := mcptooltest.NewServer(func() {})
	reg := tools.NewRegistry()
	start(t, reg, mcptool.Config{Name: "t", Transport: mcptooltest.InMemory(srv, nil)})
	call, err := reg.Hydrate("t_sleep", []byte(`{"ms":5000}`))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if o := call.Run(ctx); !errors.Is(o.Err, tools.ErrTimeout) {
		t.Errorf("t_sleep past its deadline: %v, want timeout", o.Err)
	}
	if o := run(t, reg, "t_echo", `{"text":"still here"}`); o.Err != nil {
		t.Errorf("a call after a timed-out one: %v", o.Err)
	}
}

func TestToolsThatCannotBeServedAreRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tool   *mcp.Tool
		policy mcptool.Policy
		says   []string
	}{
		{name: "schema does not compile",
			tool: &mcp.Tool{Name: "bad", InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"type":"integer","minimum":"zero"}}}`)},
			says: []string{"bad", "does not compile"}},
		{name: "remote ref",
			tool: &mcp.Tool{Name: "remote", InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"$ref":"https://example.com/x.json"}}}`)},
			says: []string{"remote", "https://example.com/x.json", "refused"}},
		{name: "name outside the pattern",
			tool: &mcp.Tool{Name: "read.file", InputSchema: json.RawMessage(`{"type":"object"}`)},
			says: []string{`"read.file"`, `"t_read.file"`, "exclude it"}},
		{name: "name collision",
			tool:   &mcp.Tool{Name: "plus", InputSchema: json.RawMessage(`{"type":"object"}`)},
			policy: mcptool.Policy{Tools: map[string]mcptool.Override{"plus": {Name: "t_add"}}},
			says:   []string{"t_add", "plus", "add"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := mcptooltest.NewServer(func() {})
			srv.AddTool(tc.tool, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{}, nil
			})
			reg := tools.NewRegistry()
			_, err := mcptool.Start(context.Background(), reg, mcptool.Config{Name: "t", Transport: mcptooltest.InMemory(srv, nil), Policy: tc.policy})
			if err == nil {
				t.Fatal("Start accepted the server")
			}
			for _, w := range tc.says {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if reg.Len() != 0 {
				t.Errorf("%d tools registered after a refusal, want none", reg.Len())
			}
			// Excluding the tool lets the rest start.
			tc.policy.Exclude = []string{tc.tool.Name}
			start(t, reg, mcptool.Config{Name: "t", Transport: mcptooltest.InMemory(srv, nil), Policy: tc.policy})
			if _, ok := reg.Lookup("t_add"); !ok {
				t.Error("t_add is not registered once the refused tool is excluded")
			}
		})
	}
}

func TestListChangedAddsAndRemovesTools(t *testing.T) {
	srv, _ := mcptooltest.NewServer(func() {})
	reg := tools.NewRegistry()
	var mu sync.Mutex
	var changes []mcptool.Change
	s := start(t, reg, mcptool.Config{Name: "t", Transport: mcptooltest.InMemory(srv, nil), Refresh: -1,
		OnChange: func(c mcptool.Change) { mu.Lock(); changes = append(changes, c); mu.Unlock() }})
	if o := run(t, reg, "t_grow", `{"name":"shout"}`); o.Err != nil {
		t.Fatal(o.Err)
	}
	natstest.Eventually(t, 5*time.Second, "t_shout registered after list_changed", func() bool {
		_, ok := reg.Lookup("t_shout")
		return ok
	})
	if o := run(t, reg, "t_shout", `{"text":"hey"}`); string(o.Output) != `"shout: hey"` {
		t.Errorf("t_shout: %s %v", o.Output, o.Err)
	}
	srv.RemoveTools("shout", "fail")
	natstest.Eventually(t, 5*time.Second, "t_shout and t_fail removed after list_changed", func() bool {
		_, a := reg.Lookup("t_shout")
		_, b := reg.Lookup("t_fail")
		return !a && !b
	})
	if slices.Contains(s.Names(), "t_fail") {
		t.Errorf("names %v still list t_fail", s.Names())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(changes) == 0 || !slices.Contains(changes[0].Added, "t_shout") {
		t.Errorf("changes %+v, want t_shout added first", changes)
	}
}

func TestARefreshIntervalPicksUpChangesWithoutNotifications(t *testing.T) {
	// A server whose list changes without telling: the adapter finds out on its own.
	var mu sync.Mutex
	extra := false
	srv := mcp.NewServer(&mcp.Implementation{Name: "quiet"}, &mcp.ServerOptions{
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: false}},
	})
	srv.AddTool(&mcp.Tool{Name: "one", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	})
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			mu.Lock()
			defer mu.Unlock()
			if lr, ok := res.(*mcp.ListToolsResult); ok && extra {
				lr.Tools = append(lr.Tools, &mcp.Tool{Name: "two", InputSchema: map[string]any{"type": "object"}})
			}
			return res, err
		}
	})
	reg := tools.NewRegistry()
	start(t, reg, mcptool.Config{Name: "q", Transport: mcptooltest.InMemory(srv, nil), Refresh: time.Second})
	mu.Lock()
	extra = true
	mu.Unlock()
	natstest.Eventually(t, 5*time.Second, "q_two registered by the periodic refresh", func() bool {
		_, ok := reg.Lookup("q_two")
		return ok
	})
}

func TestTheServersTTLHintDecidesWhenToListAgain(t *testing.T) {
	// No notifications and no refresh interval: only the ttl hint (1 s) brings the
	// change in.
	var mu sync.Mutex
	extra := false
	srv := mcp.NewServer(&mcp.Implementation{Name: "cached"}, &mcp.ServerOptions{
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: false}},
		SetCacheable: func(_ context.Context, req mcp.Request, c *mcp.Cacheable) {
			if _, ok := req.(*mcp.ListToolsRequest); ok {
				c.TTLMs = 1000
			}
		},
	})
	srv.AddTool(&mcp.Tool{Name: "one", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	})
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			mu.Lock()
			defer mu.Unlock()
			if lr, ok := res.(*mcp.ListToolsResult); ok && extra {
				lr.Tools = append(lr.Tools, &mcp.Tool{Name: "two", InputSchema: map[string]any{"type": "object"}})
			}
			return res, err
		}
	})
	reg := tools.NewRegistry()
	start(t, reg, mcptool.Config{Name: "c", Transport: mcptooltest.InMemory(srv, nil), Refresh: -1})
	mu.Lock()
	extra = true
	mu.Unlock()
	natstest.Eventually(t, 5*time.Second, "c_two registered when the ttl ran out", func() bool {
		_, ok := reg.Lookup("c_two")
		return ok
	})
}

func TestTheAdapterReconnectsAfterTheConnectionEnds(t *testing.T) {
	srv, _ := mcptooltest.NewServer(func() {})
	sessions := make(chan *mcp.ServerSession, 4)
	reg := tools.NewRegistry()
	start(t, reg, mcptool.Config{Name: "t", Transport: mcptooltest.InMemory(srv, sessions)})
	first := <-sessions
	_ = first.Close()
	natstest.Eventually(t, 10*time.Second, "a second connection", func() bool { return len(sessions) > 0 })
	if o := run(t, reg, "t_echo", `{"text":"back"}`); o.Err != nil || string(o.Output) != `"back"` {
		t.Errorf("a call after reconnecting: %s %v", o.Output, o.Err)
	}
}

func TestStartFailsClearlyWhenTheServerCannotBeReached(t *testing.T) {
	reg := tools.NewRegistry()
	begin := time.Now()
	_, err := mcptool.Start(context.Background(), reg, mcptool.Config{Name: "gone", ConnectTimeout: 500 * time.Millisecond,
		Transport: mcptool.Command(func() *exec.Cmd { return exec.Command("/nonexistent/mcp-server") })})
	if err == nil || !strings.Contains(err.Error(), "gone") || !strings.Contains(err.Error(), "/nonexistent/mcp-server") {
		t.Fatalf("Start: %v, want an error naming the server and the program", err)
	}
	if d := time.Since(begin); d > 5*time.Second {
		t.Errorf("Start gave up after %s, want about the connect timeout", d)
	}
}

func TestStreamableHTTPWithAHeader(t *testing.T) {
	srv, counts := mcptooltest.NewServer(func() {})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)

	reg := tools.NewRegistry()
	_, err := mcptool.Start(context.Background(), reg, mcptool.Config{Name: "web", ConnectTimeout: 300 * time.Millisecond,
		Transport: mcptool.HTTP(hs.URL, hs.Client())})
	if err == nil || !strings.Contains(err.Error(), "web") {
		t.Fatalf("Start without the header: %v, want an error naming the server", err)
	}
	client := &http.Client{Transport: headerTransport{"Authorization": "Bearer s3cret"}}
	start(t, reg, mcptool.Config{Name: "web", Transport: mcptool.HTTP(hs.URL, client)})
	if o := run(t, reg, "web_add", `{"a":1,"b":2}`); o.Err != nil || string(o.Output) != `{"sum":3}` {
		t.Errorf("web_add: %s %v", o.Output, o.Err)
	}
	if counts.Get("add") != 1 {
		t.Errorf("the server counted %d calls of add, want 1", counts.Get("add"))
	}
	// list_changed travels over the standalone SSE stream.
	if o := run(t, reg, "web_grow", `{"name":"later"}`); o.Err != nil {
		t.Fatal(o.Err)
	}
	natstest.Eventually(t, 5*time.Second, "web_later registered after list_changed over HTTP", func() bool {
		_, ok := reg.Lookup("web_later")
		return ok
	})
}

type headerTransport map[string]string

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

func TestStdioServerDyingMidCall(t *testing.T) {
	bin := mcptooltest.BuildStdioServer(t)
	reg := tools.NewRegistry()
	start(t, reg, mcptool.Config{Name: "io", Transport: mcptool.Command(func() *exec.Cmd { return exec.Command(bin) })})
	if o := run(t, reg, "io_add", `{"a":20,"b":22}`); o.Err != nil || string(o.Output) != `{"sum":42}` {
		t.Fatalf("io_add: %s %v", o.Output, o.Err)
	}
	o := run(t, reg, "io_crash", `{}`)
	if !errors.Is(o.Err, tools.ErrToolFailed) || !strings.Contains(o.Err.Message, "connection to MCP server io was lost during the call") {
		t.Fatalf("io_crash: %s %v, want tool_error saying the connection was lost", o.Output, o.Err)
	}
	if testing.Verbose() {
		t.Logf("io_crash: %v", o.Err)
	}
	// A fresh process serves the next call.
	natstest.Eventually(t, 10*time.Second, "io_echo answering after the restart", func() bool {
		return run(t, reg, "io_echo", `{"text":"again"}`).Err == nil
	})
}
