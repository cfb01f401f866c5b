package planner

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// keptModel counts the model calls and keeps the requests it was sent.
type keptModel struct {
	provider.Model
	mu   sync.Mutex
	reqs []provider.Request
}

func (m *keptModel) Generate(ctx context.Context, req provider.Request) (*provider.Response, error) {
	m.mu.Lock()
	m.reqs = append(m.reqs, req)
	m.mu.Unlock()
	return m.Model.Generate(ctx, req)
}

// Stream is what the loop calls: kept like Generate, streaming nothing.
func (m *keptModel) Stream(ctx context.Context, req provider.Request, _ func(provider.Delta)) (*provider.Response, error) {
	return m.Generate(ctx, req)
}

func (m *keptModel) calls() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.reqs)
}

func (m *keptModel) last() provider.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reqs[len(m.reqs)-1]
}

// withModels serves the bundle's runs with a planner whose models are the scripts,
// each counted.
func (b *testBundle) withModels(t *testing.T, scripts map[string]string) map[string]*keptModel {
	t.Helper()
	counted := map[string]*keptModel{}
	models := map[string]provider.Model{}
	for name, s := range scripts {
		counted[name] = &keptModel{Model: scriptedModel(t, s)}
		models[name] = counted[name]
	}
	b.swapPlanner(t, Config{Models: models, DefaultModel: "main"})
	return counted
}

// tenantAPI serves the bundle's API with two tenants' tokens: "acme" and "globex".
func tenantAPI(t *testing.T, b *testBundle) *httptest.Server {
	t.Helper()
	file := filepath.Join(t.TempDir(), "tokens.json")
	if err := os.WriteFile(file, []byte(`[{"token":"acme","tenant":"acme","role":"user"},{"token":"globex","tenant":"globex","role":"user"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := LoadTokens(file)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(b.p.Handler(APIAuth{Tokens: tokens}))
	t.Cleanup(srv.Close)
	return srv
}

// longTool is a tool that runs until its context ends, saying when it started and when
// it saw its context end.
type longTool struct {
	started, stopped chan string
}

func newLongTool(t *testing.T, b *testBundle, name string, idempotent bool) *longTool {
	lt := &longTool{started: make(chan string, 8), stopped: make(chan string, 8)}
	startExecutor(t, b, tools.Definition{Type: "function", Name: name, Description: "Runs until stopped.", Safe: true,
		Parameters: json.RawMessage(`{"type":"object"}`), Timeout: tools.Duration(time.Minute), Idempotent: &idempotent},
		func(ctx context.Context, _ json.RawMessage) (any, error) {
			info, _ := tools.CallInfoFrom(ctx)
			lt.started <- info.CallID
			<-ctx.Done()
			lt.stopped <- info.CallID
			return nil, ctx.Err()
		})
	return lt
}

func recv(t *testing.T, ch chan string, what string) string {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitTimeout):
		t.Fatalf("timed out waiting for %s", what)
		return ""
	}
}

// awaitCall waits until the run's call has status and returns the run.
func (b *testBundle) awaitCallStatus(t *testing.T, runID, callID, status string) *Run {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		run, err := b.p.Get(b.ctx, runID)
		seen := ""
		if err == nil {
			for _, c := range run.Calls {
				if c.ID == callID {
					seen = c.Status
				}
			}
			if seen == status {
				return run
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("call %s is %q (%v), want %s", callID, seen, err, status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

const longScript = `
steps:
  - calls: [{name: long, arguments: {}}]
  - text: the model was asked again
`

const onceScript = `
steps:
  - calls: [{name: long_once, arguments: {}}]
  - text: the model was asked again
`

// A run canceled through the API ends canceled with who and why; its running call's
// context ends (the tool sees it) and its result says canceled (interrupted for a
// non-idempotent tool); the result is recorded but no next step is asked for. Another
// tenant cannot cancel it (404), and canceling it again answers 409 with the run.
func TestCancelARunThroughTheAPI(t *testing.T) {
	b := setup(t, nil)
	long := newLongTool(t, b, "long", true)
	once := newLongTool(t, b, "long_once", false)
	models := b.withModels(t, map[string]string{"main": longScript, "once": onceScript})
	srv := tenantAPI(t, b)

	status, body := apiCall(t, srv, "POST", "/v1/runs", "acme", map[string]any{"input": "wait", "tools": []string{"long"}})
	if status != http.StatusAccepted {
		t.Fatalf("start: %d %v", status, body)
	}
	runID := body["id"].(string)
	callID := recv(t, long.started, "the long tool to start")

	if status, body := apiCall(t, srv, "POST", "/v1/runs/"+runID+"/cancel", "globex", map[string]any{"reason": "mine now"}); status != http.StatusNotFound {
		t.Fatalf("another tenant's cancel: %d %v, want 404", status, body)
	}
	status, body = apiCall(t, srv, "POST", "/v1/runs/"+runID+"/cancel", "acme", map[string]any{"reason": "changed my mind"})
	if status != http.StatusOK || body["termination"] != string(TerminationCanceled) || body["status"] != string(StatusDone) ||
		body["canceled"].(map[string]any)["reason"] != "changed my mind" {
		t.Fatalf("cancel: %d %v", status, body)
	}
	if got := recv(t, long.stopped, "the long tool to see its context end"); got != callID {
		t.Fatalf("the tool saw call %s end, want %s", got, callID)
	}
	run := b.awaitCallStatus(t, runID, callID, string(events.StatusCanceled))
	if run.Termination != TerminationCanceled || run.Canceled == nil || run.Canceled.By != "api:acme/user" ||
		run.Canceled.Reason != "changed my mind" || run.Detail != "canceled by api:acme/user: changed my mind" {
		t.Fatalf("run ended %s (%q), cancel %+v", run.Termination, run.Detail, run.Canceled)
	}
	if n := models["main"].calls(); n != 1 {
		t.Fatalf("the model was asked %d times, want 1 (no step after the cancel)", n)
	}
	if run.Step != 0 {
		t.Fatalf("the run moved to step %d after its cancel", run.Step)
	}
	// Canceling again, or another tenant canceling, changes nothing.
	status, body = apiCall(t, srv, "POST", "/v1/runs/"+runID+"/cancel", "acme", nil)
	if status != http.StatusConflict || body["run"] == nil || body["run"].(map[string]any)["termination"] != string(TerminationCanceled) {
		t.Fatalf("second cancel: %d %v, want 409 with the run", status, body)
	}

	// A non-idempotent tool cut off mid-run is interrupted.
	status, body = apiCall(t, srv, "POST", "/v1/runs", "acme", map[string]any{"input": "wait", "model": "once", "tools": []string{"long_once"}})
	if status != http.StatusAccepted {
		t.Fatalf("start: %d %v", status, body)
	}
	runID = body["id"].(string)
	callID = recv(t, once.started, "the non-idempotent tool to start")
	if status, body := apiCall(t, srv, "POST", "/v1/runs/"+runID+"/cancel", "acme", nil); status != http.StatusOK {
		t.Fatalf("cancel: %d %v", status, body)
	}
	recv(t, once.stopped, "the non-idempotent tool to see its context end")
	b.awaitCallStatus(t, runID, callID, string(events.StatusInterrupted))
	if n := models["once"].calls(); n != 1 {
		t.Fatalf("the model was asked %d times, want 1", n)
	}
}

const parentScript = `
steps:
  - calls: [{name: run_agent, arguments: {task: wait, tools: [long], model: child}}]
  - text: the parent was asked again
`

// A run canceled over NATS (request/reply on its cancel subject, for its tenant) ends
// canceled, and its nested runs with it: the child's running call is canceled. The
// subject's tenant decides whose runs it may cancel.
func TestCancelARunOverNATSWithItsChildren(t *testing.T) {
	b := setup(t, nil)
	long := newLongTool(t, b, "long", true)
	models := b.withModels(t, map[string]string{"main": parentScript, "child": longScript})
	run, err := b.p.Start(b.ctx, StartRequest{Input: "delegate", Tools: []string{AgentToolName, "long"},
		Caller: events.Identity{Tenant: "acme", Role: "user"}})
	if err != nil {
		t.Fatal(err)
	}
	callID := recv(t, long.started, "the child's long tool to start")
	child := childID(callID0(run.ID))

	ask := func(tenant string) ControlReply {
		t.Helper()
		subj, err := events.RunCancelSubject(events.Identity{Tenant: tenant, Role: "user"}, run.ID)
		if err != nil {
			t.Fatal(err)
		}
		msg, err := b.nc.Request(subj, []byte(`{"reason":"enough"}`), waitTimeout)
		if err != nil {
			t.Fatal(err)
		}
		var reply ControlReply
		if err := json.Unmarshal(msg.Data, &reply); err != nil {
			t.Fatal(err)
		}
		return reply
	}
	if r := ask("globex"); r.Status != http.StatusNotFound || r.Run != nil {
		t.Fatalf("globex's cancel: %+v, want 404", r)
	}
	if r := ask("acme"); r.Status != http.StatusOK || r.Run == nil || r.Run.Termination != TerminationCanceled {
		t.Fatalf("acme's cancel: %+v", r)
	}
	recv(t, long.stopped, "the child's long tool to see its context end")
	b.awaitCallStatus(t, child, callID, string(events.StatusCanceled))
	got, err := b.p.Wait(b.ctx, child)
	if err != nil || got.Termination != TerminationCanceled || got.Canceled == nil {
		t.Fatalf("child ended %s, %v", got.Termination, err)
	}
	if r := ask("acme"); r.Status != http.StatusConflict || r.Run == nil {
		t.Fatalf("second cancel: %+v, want 409 with the run", r)
	}
	// The child's end answers the parent's call (recorded), and neither asks its model again.
	b.awaitCallStatus(t, run.ID, callID0(run.ID), string(events.StatusError))
	if models["main"].calls() != 1 || models["child"].calls() != 1 {
		t.Fatalf("model calls after the cancel: parent %d, child %d; want 1 each", models["main"].calls(), models["child"].calls())
	}
}

// callID0 is the id of the first call of a run's first step.
func callID0(run string) string { return callID(run, 0, 0) }

// GET /v1/runs/{id} counts the steps the model answered: a run stopped by max_steps
// before its third model call took 2, one that answered at its first took 1.
func TestStepsOfARunStoppedBeforeAModelCall(t *testing.T) {
	b := setup(t, map[string]string{"main": `
steps:
  - calls: [{name: add, arguments: {a: 1, b: 1}}]
  - calls: [{name: add, arguments: {a: 1, b: 2}}]
  - calls: [{name: add, arguments: {a: 1, b: 3}}]
  - text: never
`, "answer": answerScript})
	srv := httptest.NewServer(b.p.Handler(APIAuth{}))
	defer srv.Close()
	for _, tc := range []struct {
		model string
		limit int
		want  float64
		term  Termination
	}{{"main", 2, 2, TerminationMaxSteps}, {"answer", 2, 1, TerminationCompleted}} {
		status, body := apiCall(t, srv, "POST", "/v1/runs", "", map[string]any{"input": "count", "model": tc.model,
			"tools": []string{"add"}, "limits": map[string]any{"maxSteps": tc.limit}, "wait": true})
		if status != http.StatusOK || body["termination"] != string(tc.term) {
			t.Fatalf("%s: %d %v", tc.model, status, body)
		}
		_, body = apiCall(t, srv, "GET", "/v1/runs/"+body["id"].(string), "", nil)
		if body["steps"] != tc.want {
			t.Fatalf("%s: steps %v, want %v", tc.model, body["steps"], tc.want)
		}
	}
}

// With parallel false, a step's calls run one after another in the model's order: as
// the executor saw them, each started after the one before had finished.
func TestSequentialCalls(t *testing.T) {
	b := setup(t, map[string]string{"main": `
steps:
  - calls:
      - {name: stamp, arguments: {n: 1}}
      - {name: stamp, arguments: {n: 2}}
      - {name: stamp, arguments: {n: 3}}
  - text: stamped
`})
	type span struct {
		n          int
		start, end time.Time
	}
	var mu sync.Mutex
	var spans []span
	startExecutor(t, b, tools.Definition{Type: "function", Name: "stamp", Description: "Notes when it ran.", Safe: true,
		Parameters: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)},
		func(_ context.Context, args json.RawMessage) (any, error) {
			var in struct{ N int }
			if err := json.Unmarshal(args, &in); err != nil {
				return nil, err
			}
			s := span{n: in.N, start: time.Now()}
			time.Sleep(5 * time.Millisecond)
			s.end = time.Now()
			mu.Lock()
			spans = append(spans, s)
			mu.Unlock()
			return in.N, nil
		})
	run := b.run(t, StartRequest{Input: "stamp three times", Tools: []string{"stamp"}, Parallel: new(false)})
	if run.Termination != TerminationCompleted || len(run.Calls) != 3 || !run.Sequential {
		t.Fatalf("run ended %s (%s) with %d calls, sequential %v", run.Termination, run.Detail, len(run.Calls), run.Sequential)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(spans) != 3 {
		t.Fatalf("the tool ran %d times, want 3", len(spans))
	}
	for i, s := range spans {
		if s.n != i+1 {
			t.Fatalf("call %d ran as number %d: %+v", s.n, i+1, spans)
		}
		if i > 0 && s.start.Before(spans[i-1].end) {
			t.Fatalf("call %d started before call %d finished: %+v", s.n, spans[i-1].n, spans)
		}
	}
	// Each call's record is its own: it was called when the one before had finished, so
	// its duration is not its wait behind the calls before it.
	for i := 1; i < len(run.Calls); i++ {
		prev, c := run.Calls[i-1], run.Calls[i]
		if prev.FinishedAt == nil || c.CalledAt.Before(*prev.FinishedAt) {
			t.Errorf("call %d calledAt %s, before call %d finished (%v)", i, c.CalledAt, i-1, prev.FinishedAt)
		}
	}
}
