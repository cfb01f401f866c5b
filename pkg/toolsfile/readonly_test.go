package toolsfile_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/internal/testsupport/mcptooltest"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/internal/testsupport/nettest"
	"github.com/toolfleet/toolfleet/pkg/client"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/executor"
	"github.com/toolfleet/toolfleet/pkg/mcptool"
	"github.com/toolfleet/toolfleet/pkg/sandbox"
	"github.com/toolfleet/toolfleet/pkg/tools"
	"github.com/toolfleet/toolfleet/pkg/toolsfile"
)

// needSandbox skips where the kernel cannot confine TCP (Landlock ABI < 4) or there is
// no bash (its /dev/tcp opens the connections).
func needSandbox(t *testing.T) {
	t.Helper()
	if abi, err := sandbox.ABI(); abi < 4 {
		t.Skipf("Landlock ABI %d (%v): the read-only sandbox needs ABI 4", abi, err)
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
}

// serve runs an executor for reg on an embedded JetStream and returns a client of it.
func serve(t *testing.T, reg *tools.Registry) (*client.Client, context.Context) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	fx := natstest.StartJetStream(t, events.Config{})
	ex, err := executor.New(fx.Srv.Connect(), reg, executor.WithGracePeriod(time.Second), executor.WithApprovalTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- ex.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	<-ex.Ready()
	c, err := client.New(fx.NC)
	if err != nil {
		t.Fatal(err)
	}
	return c, ctx
}

func callTool(ctx context.Context, t *testing.T, c *client.Client, tool, args string) (events.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	return c.Call(ctx, client.Request{Tool: tool, Arguments: json.RawMessage(args)})
}

// A no-schema command tool under noSchemaMode read-only runs in the read-only sandbox:
// its write and its TCP connect fail inside it (the file does not exist, the listener
// got nothing), and its result still says validated:false. The same program under
// full writes the file and connects.
func TestReadOnlyCommandToolCannotWriteOrConnect(t *testing.T) {
	needSandbox(t)
	_, port, accepted := nettest.Listen(t)
	out := t.TempDir()
	probe := `#!/bin/bash
{ echo x > "$PROBE_FILE"; } 2>/dev/null && echo wrote || echo write-refused
{ exec 3<>/dev/tcp/127.0.0.1/$PROBE_PORT; } 2>/dev/null && echo connected || echo connect-refused
`
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "probe.sh"), []byte(probe), 0o755); err != nil {
		t.Fatal(err)
	}
	roFile, fullFile := filepath.Join(out, "ro-probe"), filepath.Join(out, "full-probe")
	path := filepath.Join(dir, "tools.yaml")
	if err := os.WriteFile(path, []byte(`
tools:
  - name: ro_probe
    safe: true
    allowNoSchema: true
    noSchemaMode: read-only
    capabilities: [read-only]
    command: {argv: [./probe.sh], env: {PROBE_FILE: `+roFile+`, PROBE_PORT: "`+port+`"}}
  - name: full_probe
    safe: true
    allowNoSchema: true
    noSchemaMode: full
    command: {argv: [./probe.sh], env: {PROBE_FILE: `+fullFile+`, PROBE_PORT: "`+port+`"}}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	specs, err := toolsfile.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	reg := tools.NewRegistry()
	if err := toolsfile.Register(reg, specs); err != nil {
		t.Fatal(err)
	}
	c, ctx := serve(t, reg)

	res, err := callTool(ctx, t, c, "ro_probe", `{"anything":1}`)
	if err != nil || res.Status != events.StatusOK {
		t.Fatalf("ro_probe: %+v %v", res, err)
	}
	if string(res.Output) != `"write-refused\nconnect-refused"` || res.Validated || res.NoSchemaMode != tools.NoSchemaReadOnly {
		t.Errorf("ro_probe: output %s, validated %v, mode %q; want both refused, validated false, read-only", res.Output, res.Validated, res.NoSchemaMode)
	}
	if _, err := os.Stat(roFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the read-only tool created %s (stat: %v)", roFile, err)
	}
	if n := accepted(0); n != 0 {
		t.Errorf("the listener got %d connections from the read-only tool", n)
	}

	res, err = callTool(ctx, t, c, "full_probe", `{}`)
	if err != nil || string(res.Output) != `"wrote\nconnected"` {
		t.Fatalf("full_probe: %+v %v; want it to write and connect", res, err)
	}
	if _, err := os.Stat(fullFile); err != nil {
		t.Errorf("the full tool did not write %s: %v", fullFile, err)
	}
	if n := accepted(1); n != 1 {
		t.Errorf("the listener got %d connections, want 1 (the full tool's)", n)
	}
}

// An HTTP tool that declares itself read-only but sends POST cannot be kept to reads:
// its call is parked for approval, saying why, and the endpoint gets nothing until it
// is approved; the same tool with GET runs at once, its arguments in the query.
func TestReadOnlyHTTPToolWithPOSTWaitsForApproval(t *testing.T) {
	var posts, gets atomic.Int32
	var query atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			gets.Add(1)
			query.Store(r.URL.RawQuery)
		} else {
			posts.Add(1)
		}
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(srv.Close)
	path := writeFile(t, "tools.yaml", `
tools:
  - {name: ro_post, safe: true, allowNoSchema: true, noSchemaMode: read-only, capabilities: [read-only], http: {url: "`+srv.URL+`/post"}}
  - {name: ro_get, safe: true, allowNoSchema: true, noSchemaMode: read-only, capabilities: [read-only], http: {url: "`+srv.URL+`/get?v=1", method: GET}}
`)
	specs, err := toolsfile.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	reg := tools.NewRegistry()
	if err := toolsfile.Register(reg, specs); err != nil {
		t.Fatal(err)
	}
	c, ctx := serve(t, reg)
	w, err := c.WatchApprovals(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	res, err := callTool(ctx, t, c, "ro_get", `{"city":"Oslo","days":[1,2]}`)
	if err != nil || string(res.Output) != `{"ok":true}` {
		t.Fatalf("ro_get: %+v %v", res, err)
	}
	if q, _ := query.Load().(string); q != "city=Oslo&days=1&days=2&v=1" {
		t.Errorf("ro_get sent the query %q, want city=Oslo&days=1&days=2&v=1", q)
	}

	posted := make(chan events.Result, 1)
	go func() {
		res, _ := callTool(ctx, t, c, "ro_post", `{"q":"x"}`)
		posted <- res
	}()
	_, req, err := w.Next()
	if err != nil || req.Tool != "ro_post" {
		t.Fatalf("approval request: %+v %v, want one for ro_post", req, err)
	}
	if !strings.Contains(req.Reason, "cannot confine it to reads") || !strings.Contains(req.Reason, "POST") || req.Validated {
		t.Errorf("approval reason %q (validated %v); want it to say the POST tool cannot be confined, validated false", req.Reason, req.Validated)
	}
	if n := posts.Load(); n != 0 {
		t.Fatalf("the endpoint got %d POSTs before any approval", n)
	}
	if err := c.Answer(ctx, req.Tool, req.CallID, events.ApprovalAnswer{Decision: events.DecisionApprove, By: "test"}); err != nil {
		t.Fatal(err)
	}
	if res := <-posted; res.Status != events.StatusOK || posts.Load() != 1 {
		t.Errorf("ro_post after approval: %+v, %d POSTs", res, posts.Load())
	}
}

// An imported MCP tool that the tools file declares read-only runs only when the server
// declares readOnlyHint for it (add); without the hint (echo) its call waits for an
// approval and never reaches the server.
func TestReadOnlyMCPToolWithoutReadOnlyHintWaitsForApproval(t *testing.T) {
	srv, counts := mcptooltest.NewServer(func() {})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reg := tools.NewRegistry()
	ro := mcptool.Override{Safe: new(true), Capabilities: []string{tools.CapabilityReadOnly}}
	s, err := mcptool.Start(ctx, reg, mcptool.Config{Name: "test", Prefix: "t", Transport: mcptooltest.InMemory(srv, nil),
		Policy: mcptool.Policy{Include: []string{"add", "echo"}, Tools: map[string]mcptool.Override{"add": ro, "echo": ro}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, cctx := serve(t, reg)
	w, err := c.WatchApprovals(cctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	res, err := callTool(cctx, t, c, "t_add", `{"a":1,"b":2}`)
	if err != nil || string(res.Output) != `{"sum":3}` {
		t.Fatalf("t_add (readOnlyHint): %+v %v, want it to run", res, err)
	}
	echoed := make(chan events.Result, 1)
	go func() {
		res, _ := callTool(cctx, t, c, "t_echo", `{"text":"hi"}`)
		echoed <- res
	}()
	_, req, err := w.Next()
	if err != nil || req.Tool != "t_echo" || !strings.Contains(req.Reason, "does not declare readOnlyHint") {
		t.Fatalf("approval request %+v %v; want t_echo's, saying the server does not declare readOnlyHint", req, err)
	}
	if n := counts.Get("echo"); n != 0 {
		t.Fatalf("the server ran echo %d times before any approval", n)
	}
	if err := c.Answer(cctx, req.Tool, req.CallID, events.ApprovalAnswer{Decision: events.DecisionDeny, By: "test"}); err != nil {
		t.Fatal(err)
	}
	if res := <-echoed; res.Status != events.StatusDenied || counts.Get("echo") != 0 {
		t.Errorf("t_echo denied: %+v, server ran it %d times", res, counts.Get("echo"))
	}
}
