package mcpedge_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolfleet/toolfleet/internal/apiauth"
	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/client"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// anonymousTools are the tools an anonymous caller sees, in order: all but admin_reset.
var anonymousTools = []string{"add", "delete_all", "fail", "free_form", "shout", "slow"}

// adminTools are the tools an admin of acme sees, in order.
var adminTools = []string{"add", "admin_reset", "delete_all", "fail", "free_form", "shout", "slow"}

// waitForTools waits until the session lists want (the executor has filled the catalog).
func waitForTools(t *testing.T, cs *mcp.ClientSession, want []string) {
	t.Helper()
	natstest.EventuallyNil(t, waitTimeout, fmt.Sprintf("the edge to list %v", want), func() error {
		if got := listNames(t, cs); !slices.Equal(got, want) {
			return fmt.Errorf("it lists %v", got)
		}
		return nil
	})
}

func TestListShowsTheCatalogInOrderWithSchemasAndTTL(t *testing.T) {
	f := startFleet(t)
	url, _ := f.edge(t, apiauth.Auth{}, 2) // pages of two tools: the cursor is walked
	cs := connect(t, url, "", "")
	waitForTools(t, cs, anonymousTools)

	ctx := t.Context()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.TTLMs != int(f.cfg.WithDefaults().CatalogTTL.D().Milliseconds()/3) || res.CacheScope != "public" {
		t.Errorf("ttlMs %d cacheScope %q, want the catalog's refresh interval and public on an open edge", res.TTLMs, res.CacheScope)
	}
	if len(res.Tools) != 2 || res.NextCursor == "" {
		t.Fatalf("first page: %d tools, next cursor %q", len(res.Tools), res.NextCursor)
	}
	add := res.Tools[0]
	schema, _ := json.Marshal(add.InputSchema)
	var want, got any
	_ = json.Unmarshal([]byte(addSchema), &want)
	_ = json.Unmarshal(schema, &got)
	if !jsonEqual(want, got) {
		t.Errorf("add's inputSchema %s, want the definition's parameters %s", schema, addSchema)
	}
	if add.Description != "Add two integers." || add.Annotations == nil || !add.Annotations.ReadOnlyHint ||
		add.Annotations.DestructiveHint == nil || *add.Annotations.DestructiveHint || !add.Annotations.IdempotentHint {
		t.Errorf("add: description %q annotations %+v", add.Description, add.Annotations)
	}
	del := res.Tools[1]
	if del.Name != "delete_all" || del.Annotations.DestructiveHint == nil || !*del.Annotations.DestructiveHint ||
		del.Annotations.ReadOnlyHint || del.Meta["io.toolfleet/needsApproval"] != true {
		t.Errorf("delete_all: %+v annotations %+v", del, del.Annotations)
	}

	var free *mcp.Tool
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		if tool.Name == "free_form" {
			free = tool
		}
	}
	schema, _ = json.Marshal(free.InputSchema)
	if string(schema) != `{"type":"object"}` || !strings.Contains(free.Description, "no input schema") {
		t.Errorf("free_form: schema %s description %q", schema, free.Description)
	}
}

func TestCallAnswersWithTheFleetsResult(t *testing.T) {
	f := startFleet(t)
	url, _ := f.edge(t, apiauth.Auth{}, 0)
	cs := connect(t, url, "", "")
	waitForTools(t, cs, anonymousTools)

	res, err := call(t, cs, "add", map[string]int{"a": 40, "b": 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || text(res) != `{"sum":42}` || res.Meta["io.toolfleet/status"] != "ok" || res.Meta["io.toolfleet/callId"] == "" {
		t.Fatalf("add: %+v text %q", res, text(res))
	}
	if sc, _ := json.Marshal(res.StructuredContent); string(sc) != `{"sum":42}` {
		t.Errorf("structuredContent %s", sc)
	}

	res, err = call(t, cs, "shout", map[string]string{"text": "you"})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || text(res) != "HEY you" || res.StructuredContent != nil {
		t.Errorf("shout: a string output is its text, without structured content: %+v %q", res, text(res))
	}

	res, err = call(t, cs, "fail", map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(text(res), "the disk is on fire") || res.Meta["io.toolfleet/status"] != "error" ||
		res.Meta["io.toolfleet/code"] == "" {
		t.Errorf("fail: %+v %q", res.Meta, text(res))
	}
}

func TestInvalidCallIsAToolErrorWithTheViolations(t *testing.T) {
	f := startFleet(t)
	url, _ := f.edge(t, apiauth.Auth{}, 0)
	cs := connect(t, url, "", "")
	waitForTools(t, cs, anonymousTools)

	res, err := call(t, cs, "add", map[string]any{"a": "forty", "c": 1})
	if err != nil {
		t.Fatalf("a schema violation is a tool error, not a protocol error: %v", err)
	}
	txt := text(res)
	if !res.IsError || res.Meta["io.toolfleet/code"] != string(tools.CodeInvalidInput) || res.Meta["io.toolfleet/status"] != "invalid" ||
		!strings.Contains(txt, "/a: got string, want integer") || !strings.Contains(txt, "missing property 'b'") ||
		len(res.Content) != 1 || res.Meta["io.toolfleet/violations"] == nil {
		t.Errorf("invalid call: meta %+v text %q", res.Meta, txt)
	}
}

func TestUnknownToolIsInvalidParams(t *testing.T) {
	f := startFleet(t)
	url, _ := f.edge(t, apiauth.Auth{}, 0)
	cs := connect(t, url, "", "")
	waitForTools(t, cs, anonymousTools)

	_, err := call(t, cs, "no_such_thing", map[string]any{})
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInvalidParams || !strings.Contains(werr.Message, "unknown tool") {
		t.Fatalf("unknown tool: %v", err)
	}
	// admin_reset exists but an anonymous caller may not call it: the same answer.
	_, err = call(t, cs, "admin_reset", map[string]any{})
	if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInvalidParams || werr.Message != `unknown tool "admin_reset"` {
		t.Fatalf("a tool the caller may not see: %v", err)
	}
}

func TestRolesHideAndRefuseTools(t *testing.T) {
	f := startFleet(t)
	url, _ := f.edge(t, testAuth, 0)
	admin := connect(t, url, adminToken, "")
	user := connect(t, url, userToken, "")
	waitForTools(t, admin, adminTools)
	waitForTools(t, user, anonymousTools)

	res, err := admin.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.CacheScope != "private" {
		t.Errorf("cacheScope %q: a caller's own list is private", res.CacheScope)
	}
	if res, err := call(t, admin, "admin_reset", map[string]any{}); err != nil || res.IsError || text(res) != `{"by":"acme/admin","reset":true}` {
		t.Fatalf("admin calls admin_reset: %v %+v", err, res)
	}
	var werr *jsonrpc.Error
	if _, err := call(t, user, "admin_reset", map[string]any{}); !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInvalidParams {
		t.Fatalf("user calls admin_reset: %v", err)
	}

	// No token, or a wrong one: 401 before MCP is spoken.
	for _, auth := range []string{"", "Bearer nope"} {
		req, _ := http.NewRequest("POST", url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("authorization %q: status %d", auth, resp.StatusCode)
		}
	}
}

func TestAnyReplicaAnswers(t *testing.T) {
	f := startFleet(t)
	url1, _ := f.edge(t, testAuth, 0)
	url2, _ := f.edge(t, testAuth, 0)
	one := connect(t, url1, adminToken, "")
	two := connect(t, url2, adminToken, "")
	waitForTools(t, one, adminTools)
	res, err := call(t, two, "admin_reset", map[string]any{})
	if err != nil || res.IsError || text(res) != `{"by":"acme/admin","reset":true}` {
		t.Fatalf("call on the second replica: %v %+v", err, res)
	}
	if res, err := call(t, two, "add", map[string]int{"a": 1, "b": 2}); err != nil || text(res) != `{"sum":3}` {
		t.Fatalf("add on the second replica: %v %+v", err, res)
	}
}

func TestLegacyClientThatInitializes(t *testing.T) {
	f := startFleet(t)
	url, _ := f.edge(t, testAuth, 0)
	cs := connect(t, url, userToken, "2025-11-25")
	if v := cs.InitializeResult().ProtocolVersion; v != "2025-11-25" {
		t.Errorf("negotiated %q", v)
	}
	waitForTools(t, cs, anonymousTools)
	res, err := call(t, cs, "add", map[string]int{"a": 2, "b": 3})
	if err != nil || res.IsError || text(res) != `{"sum":5}` {
		t.Fatalf("legacy call: %v %+v", err, res)
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// Calls through the edge hold nothing on the server once answered: far more calls than
// a stream takes consumers (1,000) all get their results.
func TestManyCalls(t *testing.T) {
	f := startFleet(t)
	url, _ := f.edge(t, apiauth.Auth{}, 0)
	const sessions, each = 8, 150
	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	for i := range sessions {
		cs := connect(t, url, "", "")
		wg.Go(func() {
			for j := range each {
				res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "add", Arguments: map[string]int{"a": i, "b": j}})
				if err == nil && (res.IsError || text(res) != fmt.Sprintf(`{"sum":%d}`, i+j)) {
					err = fmt.Errorf("add(%d, %d): %s", i, j, text(res))
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// Over stdio (here in-memory transports, as a local client that started `toolfleet mcp`
// would connect) every request acts as the configured caller.
func TestStdio(t *testing.T) {
	f := startFleet(t)
	_, e := f.edge(t, apiauth.Auth{}, 0)
	st, ct := mcp.NewInMemoryTransports()
	served := make(chan error, 1)
	go func() { served <- e.ServeStdio(t.Context(), events.Identity{Tenant: "acme", Role: "admin"}, st) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "stdio-test", Version: "1"}, nil).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitForTools(t, cs, adminTools)
	if res, err := call(t, cs, "admin_reset", map[string]any{}); err != nil || text(res) != `{"by":"acme/admin","reset":true}` {
		t.Fatalf("admin_reset over stdio: %v %+v", err, res)
	}
	_ = cs.Close()
	if err := <-served; err != nil {
		t.Errorf("ServeStdio returned %v once the client left", err)
	}
}

// A call of an unsafe tool waits for its approval, which an approver gives on NATS
// (pkg/client), as for any other caller; the call then answers with the tool's result.
// The approval is for the caller's tenant, on its subjects, from an operator role of the
// fleet (the executor carries out no other role's answer).
func TestUnsafeCallWaitsForItsApproval(t *testing.T) {
	f := startFleet(t)
	url, _ := f.edge(t, testAuth, 0)
	cs := connect(t, url, userToken, "")
	approver, err := client.New(f.js.NC, client.WithIdentity(events.Identity{Tenant: "acme", Role: "approver"}))
	if err != nil {
		t.Fatal(err)
	}
	approvals, err := approver.WatchApprovals(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer approvals.Stop()
	type answer struct {
		res *mcp.CallToolResult
		err error
	}
	answered := make(chan answer, 1)
	go func() {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "delete_all", Arguments: map[string]string{"where": "tmp"}})
		answered <- answer{res, err}
	}()
	_, req, err := approvals.Next()
	if err != nil {
		t.Fatal(err)
	}
	if req.Tool != "delete_all" || req.Caller != (events.Identity{Tenant: "acme", Role: "user"}) {
		t.Fatalf("approval request %+v", req)
	}
	if err := approver.Answer(t.Context(), req.Tool, req.CallID, events.ApprovalAnswer{Decision: events.DecisionApprove, By: "test"}); err != nil {
		t.Fatal(err)
	}
	got := <-answered
	if got.err != nil || got.res.IsError || got.res.Meta["io.toolfleet/callId"] != req.CallID || !strings.Contains(text(got.res), "tmp") {
		t.Fatalf("approved delete_all: %v %+v", got.err, got.res)
	}
}

// The edge follows the catalog: a tool put after it started is listed, a deleted one
// leaves the list and its calls are refused.
func TestListFollowsTheCatalog(t *testing.T) {
	f := startFleet(t)
	url, _ := f.edge(t, apiauth.Auth{}, 0)
	cat, err := jsutil.OpenCatalog(t.Context(), f.js.JS, f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	late := tools.Definition{Type: "function", Name: "late", Description: "Came later.", Safe: true, Parameters: json.RawMessage(`{"type":"object"}`)}
	if err := cat.Put(t.Context(), late); err != nil {
		t.Fatal(err)
	}
	lists := func() []string { return listNames(t, connect(t, url, "", "")) } // a new client: no cached list
	natstest.Eventually(t, waitTimeout, "late in the list", func() bool { return slices.Contains(lists(), "late") })
	// late has no executor to refresh it: deleted, it stays gone.
	if err := cat.Delete(t.Context(), "late"); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, waitTimeout, "late gone from the list", func() bool { return !slices.Contains(lists(), "late") })
	var werr *jsonrpc.Error
	if _, err := call(t, connect(t, url, "", ""), "late", map[string]string{}); !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("a call of a tool gone from the catalog: %v", err)
	}
}
