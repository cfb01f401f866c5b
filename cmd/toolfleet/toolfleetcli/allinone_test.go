package toolfleetcli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/toolfleet/toolfleet/internal/ops"
	"github.com/toolfleet/toolfleet/internal/planner"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/internal/testsupport/opstest"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// The demo's run takes the scripted path — a parallel step, an invalid call repaired, an
// approved write — and its load loses and doubles nothing.
func TestDemo(t *testing.T) {
	t.Setenv("TOOLFLEET_MODEL", "")
	sandbox, data := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(sandbox, "orders.txt"), []byte("order 1: 17 widgets\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, progress bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := Demo(ctx, DemoOptions{Calls: 500, Out: &out, Progress: &progress,
		Fleet: Options{SandboxRoot: sandbox, DataDir: data}})
	s := out.String()
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, s)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`scripted model — no LLM`),
		regexp.MustCompile(`timeline of run r\w+`),
		// the parallel step: two calls in step 0
		regexp.MustCompile(`(?m)^  0 +get_time .* ok +1 .*\n  0 +list_dir .* ok +1 `),
		// the invalid call, answered with the validator's messages, then repaired
		regexp.MustCompile(`(?m)^  1 +calculator +\{"expr":.* invalid +0 .*invalid_tool_input`),
		regexp.MustCompile(`↳ fed back to the model to repair its call: missing property 'expression'`),
		regexp.MustCompile(`(?m)^  2 +calculator +\{"expression":.* ok +1 .*"result":84`),
		// the approval, by the demo, labelled as such
		regexp.MustCompile(`approval requested: write_file \{"content":"orders total: 84`),
		regexp.MustCompile(`the demo auto-approves it`),
		regexp.MustCompile(`(?m)^  3 +write_file .* ok +1 `),
		regexp.MustCompile(`(?m)^  4 +read_file .* ok +1 .*orders total: 84`),
		regexp.MustCompile(`answer: The orders total 84`),
		regexp.MustCompile(`termination: completed, steps: 6, tool calls: 6, tokens: \d+`),
		regexp.MustCompile(`summary: 500 calls in \S+: \d+ calls/s, p50 [\d.]+ms, p99 [\d.]+ms, retries 0, failures 0, lost 0, doubled 0`),
		regexp.MustCompile(`results by status: ok 500; every call got exactly one result: yes`),
		regexp.MustCompile(`demo ok`),
	} {
		if !want.MatchString(s) {
			t.Errorf("demo output lacks %s:\n%s", want, s)
		}
	}
	if !strings.Contains(progress.String(), "100% (500/500)") {
		t.Errorf("progress lacks its last line:\n%s", progress.String())
	}
	// The approved write happened, in the sandbox; JetStream's files stayed in -data.
	if b, err := os.ReadFile(filepath.Join(sandbox, "report.txt")); err != nil || string(b) != "orders total: 84\n" {
		t.Errorf("report.txt = %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(data, "jetstream")); err != nil {
		t.Errorf("the data directory holds no JetStream files: %v", err)
	}
}

// A model that cannot be configured, or a context already ended, is a clear error, not a
// hang or a half-started fleet.
func TestDemoStartErrors(t *testing.T) {
	t.Setenv("TOOLFLEET_MODEL", "bogus")
	err := Demo(context.Background(), DemoOptions{Calls: 10, Out: io.Discard})
	if err == nil || !strings.Contains(err.Error(), "TOOLFLEET_MODEL") {
		t.Errorf("bad TOOLFLEET_MODEL: %v", err)
	}
	t.Setenv("TOOLFLEET_MODEL", "")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Demo(ctx, DemoOptions{Calls: 10, Out: io.Discard}); !errors.Is(err, context.Canceled) {
		t.Errorf("ended context: %v", err)
	}
}

// The scripted run's check catches a run that strayed from the script.
func TestScriptedRunProblem(t *testing.T) {
	calls := func(spec ...string) []*planner.CallRecord {
		var cs []*planner.CallRecord
		for _, s := range spec {
			var c planner.CallRecord
			fmt.Sscanf(strings.ReplaceAll(s, ":", " "), "%d %s %s", &c.Step, &c.Name, &c.Status)
			cs = append(cs, &c)
		}
		return cs
	}
	good := []string{"0:get_time:ok", "0:list_dir:ok", "1:calculator:invalid", "2:calculator:ok", "3:write_file:ok", "4:read_file:ok"}
	for _, tc := range []struct {
		name   string
		calls  []string
		answer string
		ok     bool
	}{
		{"as scripted", good, "The orders total 84.", true},
		{"no answer", good, "", false},
		{"not parallel", []string{"0:get_time:ok", "1:list_dir:ok", "2:calculator:invalid", "3:calculator:ok", "4:write_file:ok", "5:read_file:ok"}, "84", false},
		{"write denied", []string{"0:get_time:ok", "0:list_dir:ok", "1:calculator:invalid", "2:calculator:ok", "3:write_file:denied"}, "84", false},
		{"no repair", []string{"0:get_time:ok", "0:list_dir:ok", "1:calculator:ok", "2:write_file:ok", "3:read_file:ok"}, "84", false},
	} {
		got := scriptedRunProblem(&planner.Run{Calls: calls(tc.calls...), Answer: tc.answer})
		if (got == "") != tc.ok {
			t.Errorf("%s: problem %q", tc.name, got)
		}
	}
}

// On a terminal the bar is redrawn in place; elsewhere it is a line every 10%.
func TestProgress(t *testing.T) {
	var tty, plain bytes.Buffer
	pt, pp := newProgress(&tty, true, 200), newProgress(&plain, false, 200)
	for _, n := range []int{0, 10, 25, 100, 190, 200} {
		pt.show(n)
		pp.show(n)
	}
	pt.done()
	pp.done()
	if strings.Count(tty.String(), "\r") != 6 || strings.Count(tty.String(), "\n") != 1 ||
		!strings.HasSuffix(tty.String(), "\r  ["+strings.Repeat("#", 40)+"] 200/200\n") {
		t.Errorf("terminal bar = %q", tty.String())
	}
	want := "    0% (0/200)\n   10% (25/200)\n   50% (100/200)\n   90% (190/200)\n  100% (200/200)\n"
	if plain.String() != want {
		t.Errorf("plain progress = %q, want %q", plain.String(), want)
	}
}

// dev serves the planner API and NATS until its context ends: a run started over HTTP
// waits for its approval, is approved over HTTP and answers; a NATS client's call gets
// its result; then a clean stop.
func TestDev(t *testing.T) {
	t.Setenv("TOOLFLEET_MODEL", "")
	var out bytes.Buffer
	a, stop := startDev(t, DevOptions{HTTPAddr: ":0", OpsAddr: ":0", Out: &out})
	// It says how to drive it with the CLI, set to its addresses (not the defaults
	// here), and no raw curl.
	if !strings.Contains(out.String(), "export TOOLFLEET_API_URL="+a.API+" TOOLFLEET_NATS_URL="+a.NATS+"\n") ||
		!strings.Contains(out.String(), "  toolfleet run \"Total the orders and write a report\" --tools get_time,list_dir,calculator,write_file,read_file --follow\n") ||
		!strings.Contains(out.String(), "  toolfleet approvals ls") || strings.Contains(out.String(), "curl") ||
		!strings.Contains(out.String(), "http://"+a.Ops+"/metrics") {
		t.Errorf("dev did not print how to drive it with the CLI and reach the ops server:\n%s", out.String())
	}
	// The inspector is served beside the API, and dev says where.
	if a.UI != a.API+"/ui/" || !strings.Contains(out.String(), "inspector "+a.UI) {
		t.Errorf("dev did not print the inspector's address %q:\n%s", a.UI, out.String())
	}
	if res, err := http.Get(a.UI); err != nil || res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
		t.Errorf("GET %s: %v %v", a.UI, res, err)
	} else {
		res.Body.Close()
	}
	// Without -host, everything is on loopback.
	for _, addr := range []string{a.API, a.NATS, a.Ops} {
		if !strings.Contains(addr, "127.0.0.1:") {
			t.Errorf("%s is not on 127.0.0.1", addr)
		}
	}
	// One ops server for the whole fleet, ready once every part is.
	opstest.WaitReady(t, a.Ops)

	// The approver: it sees the approval request on NATS, as a console would.
	nc, err := nats.Connect(a.NATS)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	requests := make(chan events.ApprovalRequest, 4)
	if _, err := nc.Subscribe(events.AllEvents, func(m *nats.Msg) {
		var req events.ApprovalRequest
		if e, err := events.Decode(events.CoreMsg(m), 0); err == nil && e.Type == events.TypeApprovalRequest && e.DataAs(&req) == nil {
			requests <- req
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	// POST /v1/runs with wait answers once the run is done, which needs the approval.
	type answer struct {
		code int
		view planner.RunView
	}
	answered := make(chan answer, 1)
	go func() {
		body, _ := json.Marshal(map[string]any{"input": demoInput, "tools": demoTools, "wait": true, "waitTimeout": "60s"})
		var ans answer
		ans.code, ans.view = post(a.API+"/v1/runs", string(body))
		answered <- ans
	}()
	var req events.ApprovalRequest
	select {
	case req = <-requests:
	case <-time.After(30 * time.Second):
		t.Fatal("no approval request within 30s")
	}
	// Until it is approved, the run waits, visibly.
	var v planner.RunView
	natstest.EventuallyNil(t, 30*time.Second, "the run to show its call awaiting approval", func() error {
		call(t, http.MethodGet, a.API+"/v1/runs/"+req.RunID, "", &v) // polling the API, as a client would
		if !awaiting(v, req.CallID) {
			return fmt.Errorf("the run is %+v", v)
		}
		return nil
	})
	// write_file is its step's only call: the run waits on a person, until its deadline.
	if req.Tool != "write_file" || v.Status != planner.StatusAwaitingApproval || v.ApprovalDeadline == nil {
		t.Fatalf("approval of %s; run %s", req.Tool, v.Status)
	}
	if code := call(t, http.MethodPost, a.API+"/v1/approvals/"+req.CallID, `{"decision":"approve","by":"test"}`, nil); code != http.StatusAccepted {
		t.Fatalf("POST /v1/approvals: %d", code)
	}
	var got answer
	select {
	case got = <-answered:
	case <-time.After(60 * time.Second):
		t.Fatal("POST /v1/runs with wait did not answer within 60s of the approval")
	}
	if got.code != http.StatusOK || got.view.ID != req.RunID || got.view.Status != planner.StatusDone ||
		got.view.Termination != planner.TerminationCompleted || !strings.Contains(got.view.Answer, "84") {
		t.Errorf("POST /v1/runs with wait = %d %+v", got.code, got.view)
	}
	// A follow-up is answered (the script's last step repeats), not a model_error.
	var f planner.RunView
	if code := call(t, http.MethodPost, a.API+"/v1/runs/"+req.RunID+"/messages", `{"input":"Thanks. Anything else?"}`, &f); code >= 300 {
		t.Fatalf("follow-up: %d %+v", code, f)
	}
	if f = waitDone(t, a.API, req.RunID, 2); f.Termination != planner.TerminationCompleted || !strings.Contains(f.Answer, "scripted demo model") {
		t.Errorf("follow-up: %s %q (%s)", f.Termination, f.Answer, f.Detail)
	}
	if code := call(t, http.MethodPost, a.API+"/v1/runs", `{"input":"x","tools":["nope"]}`, nil); code != http.StatusBadRequest {
		t.Errorf("a run with an unknown tool: %d, want 400", code)
	}

	// Any NATS client reaches the fleet on the printed address.
	sub, err := nc.SubscribeSync("toolfleet.result.cli.*")
	if err != nil {
		t.Fatal(err)
	}
	msg, err := events.NewCall(events.CallOptions{Source: "/test", ID: "c1", RunID: "cli"}, events.Call{Tool: "calculator", Arguments: json.RawMessage(`{"expression":"6*7"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.PublishMsg(msg); err != nil {
		t.Fatal(err)
	}
	m, err := sub.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatalf("no result for a NATS client's call: %v", err)
	}
	if _, res, err := events.DecodeResult(events.CoreMsg(m)); err != nil || res.Status != events.StatusOK || !strings.Contains(string(res.Output), "42") {
		t.Errorf("result = %+v, %v", res, err)
	}
	// Any MCP client reaches the fleet at the printed /mcp: the official Go SDK's lists
	// the demo's tools and calls one.
	if a.MCP != a.API+"/mcp" || !strings.Contains(out.String(), a.MCP) {
		t.Errorf("the MCP edge's URL %q is not printed:\n%s", a.MCP, out.String())
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(t.Context(),
		&mcp.StreamableClientTransport{Endpoint: a.MCP}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for tool, err := range cs.Tools(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	if !slices.Contains(names, "calculator") || !slices.IsSorted(names) {
		t.Errorf("MCP tools/list: %v", names)
	}
	mres, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "calculator", Arguments: map[string]string{"expression": "6*7"}})
	if err != nil || mres.IsError || len(mres.Content) != 1 || !strings.Contains(mres.Content[0].(*mcp.TextContent).Text, "42") {
		t.Errorf("MCP tools/call calculator: %+v %v", mres, err)
	}
	_ = cs.Close()
	// Its metrics are every part's.
	opstest.Serves(t, a.Ops, "toolfleet_picker_catalog_tools", "toolfleet_executor_calls_total")

	if err := stop(); err != nil {
		t.Fatalf("dev returned %v after its context ended", err)
	}
	if _, err := http.Get(a.API + "/v1/runs/" + req.RunID); err == nil {
		t.Error("the API still answers after dev stopped")
	}
}

// dev -host binds NATS, the planner API and the ops server on that address, here every
// interface, as inside a container; the health probe still finds the ops server on
// loopback.
func TestDevHost(t *testing.T) {
	t.Setenv("TOOLFLEET_MODEL", "")
	a, stop := startDev(t, DevOptions{Host: "0.0.0.0", HTTPAddr: ":0", OpsAddr: ":0", Out: io.Discard})
	for what, addr := range map[string]string{"API": strings.TrimPrefix(a.API, "http://"), "ops": a.Ops} {
		host, _, err := net.SplitHostPort(addr)
		if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsUnspecified() {
			t.Errorf("the %s listens on %s, want every interface", what, addr)
		}
	}
	if !strings.HasPrefix(a.NATS, "nats://0.0.0.0:") {
		t.Errorf("NATS listens on %s, want every interface", a.NATS)
	}
	opstest.WaitReady(t, a.Ops)
	if err := ops.Probe(context.Background(), a.Ops); err != nil {
		t.Errorf("the health probe of %s: %v", a.Ops, err)
	}
	if err := stop(); err != nil {
		t.Fatalf("dev returned %v", err)
	}
}

// startDev runs Dev on a free NATS port until the test calls stop, and returns where it
// serves once it does.
func startDev(t *testing.T, o DevOptions) (DevAddrs, func() error) {
	t.Helper()
	o.Fleet.NATSPort = -1
	if o.OpsAddr == "" || o.OpsAddr == ops.DefaultAddr {
		o.OpsAddr = ":0" // never the default :9090, which a running fleet may hold
	}
	ready := make(chan DevAddrs, 1)
	o.Ready = func(a DevAddrs) { ready <- a }
	failed := make(chan error, 1)
	stop := opstest.Run(t, func(ctx context.Context) error {
		err := Dev(ctx, o)
		failed <- err
		return err
	})
	select {
	case a := <-ready:
		return a, stop
	case err := <-failed:
		t.Fatalf("dev stopped before it served: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("dev not ready after 30s")
	}
	return DevAddrs{}, nil
}

func awaiting(v planner.RunView, callID string) bool {
	for _, c := range v.Calls {
		if c.ID == callID && c.Status == "awaiting_approval" {
			return true
		}
	}
	return false
}

// post is call for a goroutine: failures come back as a zero code.
func post(url, body string) (int, planner.RunView) {
	var v planner.RunView
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, v
	}
	defer resp.Body.Close()
	if json.NewDecoder(resp.Body).Decode(&v) != nil {
		return 0, v
	}
	return resp.StatusCode, v
}

// call sends a JSON request and decodes the answer into v (when not nil).
func call(t *testing.T, method, url, body string, v any) int {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if v != nil {
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatalf("%s %s: %v", method, url, err)
		}
	}
	return resp.StatusCode
}
