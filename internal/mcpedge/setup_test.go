package mcpedge_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/toolfleet/toolfleet/internal/apiauth"
	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/internal/mcpedge"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/executor"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// TestMain fails the package's tests when a goroutine outlives them (a catalog watch
// not stopped by Close).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"))
}

// waitTimeout bounds every wait of these tests; nothing asserts on timing.
const waitTimeout = 30 * time.Second

// Tokens of the tests' tokens file.
const (
	adminToken    = "admin-token"    // tenant acme, role admin
	userToken     = "user-token"     // tenant acme, role user
	approverToken = "approver-token" // tenant acme, role approver (the fleet's operator role)
	globexToken   = "globex-token"   // tenant globex, role user
)

var testAuth = apiauth.Auth{Tokens: map[string]events.Identity{
	apiauth.HashToken(adminToken):    {Tenant: "acme", Role: "admin"},
	apiauth.HashToken(userToken):     {Tenant: "acme", Role: "user"},
	apiauth.HashToken(approverToken): {Tenant: "acme", Role: "approver"},
	apiauth.HashToken(globexToken):   {Tenant: "globex", Role: "user"},
}}

// operatorRoles are the fleet's operator roles, the edges' and the executor's.
var operatorRoles = []string{"approver"}

const addSchema = `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"],"additionalProperties":false}`

// testTools are served by a real executor behind every edge of these tests.
var testTools = []struct {
	def tools.Definition
	fn  tools.Func
}{
	{tools.Definition{Name: "add", Description: "Add two integers.", Safe: true, Capabilities: []string{tools.CapabilityReadOnly},
		Parameters: json.RawMessage(addSchema)},
		func(_ context.Context, args json.RawMessage) (any, error) {
			var in struct{ A, B int }
			if err := json.Unmarshal(args, &in); err != nil {
				return nil, err
			}
			return map[string]int{"sum": in.A + in.B}, nil
		}},
	{tools.Definition{Name: "shout", Description: "Upper-cases a text.", Safe: true,
		Parameters: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)},
		func(_ context.Context, args json.RawMessage) (any, error) {
			var in struct{ Text string }
			if err := json.Unmarshal(args, &in); err != nil {
				return nil, err
			}
			return "HEY " + in.Text, nil
		}},
	{tools.Definition{Name: "fail", Description: "Always fails.", Safe: true, Retry: &tools.RetryPolicy{MaxRetries: new(int)},
		Parameters: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, json.RawMessage) (any, error) { return nil, errors.New("the disk is on fire") }},
	{tools.Definition{Name: "admin_reset", Description: "Resets everything; admins only.", Safe: true, Idempotent: new(false),
		Roles: []string{"admin"}, Parameters: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, _ json.RawMessage) (any, error) {
			info, _ := tools.CallInfoFrom(ctx) // the identity the executor established
			return map[string]any{"reset": true, "by": info.Tenant + "/" + info.Role}, nil
		}},
	{tools.Definition{Name: "delete_all", Description: "Deletes everything.", Safe: false,
		Parameters: json.RawMessage(`{"type":"object","properties":{"where":{"type":"string"}},"required":["where"]}`)},
		func(_ context.Context, args json.RawMessage) (any, error) {
			return map[string]any{"deleted": args}, nil
		}},
	// slow's function is each fleet's own (fleet.slow), so that its signals are its test's.
	{tools.Definition{Name: "slow", Description: "Reports progress until canceled (a minute at most).", Safe: true,
		Parameters: json.RawMessage(`{"type":"object"}`)}, nil},
	{tools.Definition{Name: "free_form", Description: "Takes anything.", Safe: true, AllowNoSchema: true, NoSchemaMode: tools.NoSchemaFull},
		func(_ context.Context, args json.RawMessage) (any, error) { return args, nil }},
}

// fleet is an embedded JetStream with an executor serving testTools; "approver" is the
// fleet's operator role (it answers other roles' approvals).
type fleet struct {
	js  *natstest.JetStream
	cfg events.Config
	// slowStarted and slowCanceled are the test's signals from the fleet's slow tool:
	// the call id of each slow call as it starts running, and as it sees its context
	// canceled. They are the tool's own word, where a run event (tool_started, published
	// once and not retried) is news that may not come.
	slowStarted, slowCanceled chan string
}

// slow reports progress every 20ms until its context ends (a minute at most), telling
// f's test when it started and when it saw its context canceled.
func (f *fleet) slow(ctx context.Context, _ json.RawMessage) (any, error) {
	info, _ := tools.CallInfoFrom(ctx)
	signal(f.slowStarted, info.CallID)
	for i := 1; i <= 3000; i++ {
		tools.ReportProgress(ctx, tools.Progress{Message: fmt.Sprintf("step %d", i), Fraction: float64(i) / 3000})
		select {
		case <-ctx.Done():
			signal(f.slowCanceled, info.CallID)
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return "done", nil
}

// signal sends callID on c unless c is full: a test that makes more slow calls than c
// holds reads none of them.
func signal(c chan<- string, callID string) {
	select {
	case c <- callID:
	default:
	}
}

// awaitSlow waits for slow call callID's signal on c, failing the test with what.
func awaitSlow(t *testing.T, c <-chan string, callID, what string) {
	t.Helper()
	timeout := time.After(waitTimeout)
	for {
		select {
		case id := <-c:
			if id == callID {
				return
			}
		case <-timeout:
			t.Fatalf("slow call %s: no signal within %s that %s", callID, waitTimeout, what)
		}
	}
}

func startFleet(t testing.TB) *fleet {
	t.Helper()
	fx := natstest.StartJetStream(t, events.Config{AckWait: tools.Duration(5 * time.Second)})
	f := &fleet{js: fx, cfg: fx.Cfg, slowStarted: make(chan string, 16), slowCanceled: make(chan string, 16)}
	reg := tools.NewRegistry()
	for _, tt := range testTools {
		fn := tt.fn
		if fn == nil {
			fn = f.slow
		}
		if err := reg.AddFunc(tt.def, fn); err != nil {
			t.Fatal(err)
		}
	}
	ex, err := executor.New(fx.Srv.Connect(), reg, executor.WithStreamConfig(fx.Cfg), executor.WithLogger(zerolog.Nop()),
		executor.WithConcurrency(64), executor.WithOperatorRoles(operatorRoles...))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ex.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("executor: %v", err)
		}
	})
	// Wait for the executor's catalog entries: a client caches a list for its ttlMs.
	cat, err := jsutil.OpenCatalog(ctx, fx.JS, fx.Cfg)
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, waitTimeout, "the executor's tools in the catalog", func() bool {
		defs, err := cat.List(ctx)
		return err == nil && len(defs) == len(testTools)
	})
	return f
}

// edge starts an edge replica on a connection of its own and serves it over HTTP; the
// URL is its /mcp endpoint.
func (f *fleet) edge(t testing.TB, auth apiauth.Auth, pageSize int) (string, *mcpedge.Edge) {
	t.Helper()
	return f.edgeOn(t, f.js.Srv.Connect(), auth, pageSize)
}

func (f *fleet) edgeOn(t testing.TB, nc *nats.Conn, auth apiauth.Auth, pageSize int) (string, *mcpedge.Edge) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	e, err := mcpedge.Start(ctx, nc, mcpedge.Config{Events: f.cfg, Auth: auth, PageSize: pageSize, OperatorRoles: operatorRoles, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	mux := http.NewServeMux()
	mux.Handle(mcpedge.Path, e.Handler())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + mcpedge.Path, e
}

// bearer adds a bearer token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// connect is the official Go SDK's client on url, with token when not empty, speaking
// version (empty: the SDK's latest, 2026-07-28).
func connect(t testing.TB, url, token, version string) *mcp.ClientSession {
	t.Helper()
	return connectWith(t, url, token, version, nil)
}

// connectWith is connect with the client's options (its notification handlers).
func connectWith(t testing.TB, url, token, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	hc := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	if token != "" {
		hc.Transport = bearer{token: token, next: hc.Transport}
	}
	t.Cleanup(hc.CloseIdleConnections)
	c := mcp.NewClient(&mcp.Implementation{Name: "mcpedge-test", Version: "1"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// listNames lists every tool page by page.
func listNames(t testing.TB, cs *mcp.ClientSession) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	var names []string
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	return names
}

func call(t testing.TB, cs *mcp.ClientSession, name string, args any) (*mcp.CallToolResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	return cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
}

func text(r *mcp.CallToolResult) string {
	var s string
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			s += tc.Text
		}
	}
	return s
}
