package plannerapi

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/toolfleet/toolfleet/internal/planner"
	"github.com/toolfleet/toolfleet/internal/testsupport/plannertest"
	"github.com/toolfleet/toolfleet/pkg/events"
)

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
	srv := httptest.NewServer(Handler(b.p, Auth{Tokens: tokens}))
	t.Cleanup(srv.Close)
	return srv
}

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
	models := b.withModels(t, map[string]string{"main": plannertest.LongScript, "once": onceScript})
	srv := tenantAPI(t, b)

	status, body := apiCall(t, srv, "POST", "/v1/runs", "acme", map[string]any{"input": "wait", "tools": []string{"long"}})
	if status != http.StatusAccepted {
		t.Fatalf("start: %d %v", status, body)
	}
	runID := body["id"].(string)
	callID := plannertest.Recv(t, long.Started, "the long tool to start")

	if status, body := apiCall(t, srv, "POST", "/v1/runs/"+runID+"/cancel", "globex", map[string]any{"reason": "mine now"}); status != http.StatusNotFound {
		t.Fatalf("another tenant's cancel: %d %v, want 404", status, body)
	}
	// The record names the caller, whatever the body's by says.
	status, body = apiCall(t, srv, "POST", "/v1/runs/"+runID+"/cancel", "acme", map[string]any{"reason": "changed my mind", "by": "mallory"})
	if status != http.StatusOK || body["termination"] != string(planner.TerminationCanceled) || body["status"] != string(planner.StatusDone) ||
		body["canceled"].(map[string]any)["reason"] != "changed my mind" {
		t.Fatalf("cancel: %d %v", status, body)
	}
	// The answer shows the call as the cancel left it, not as it was before.
	if got := callStatuses(body); len(got) != 1 || got[callID] != string(events.StatusCanceled) {
		t.Errorf("the cancel's answer shows the calls %v, want %s canceled", got, callID)
	}
	if got := plannertest.Recv(t, long.Stopped, "the long tool to see its context end"); got != callID {
		t.Fatalf("the tool saw call %s end, want %s", got, callID)
	}
	run := b.awaitCallStatus(t, runID, callID, string(events.StatusCanceled))
	if run.Termination != planner.TerminationCanceled || run.Canceled == nil || run.Canceled.By != "acme/user" ||
		run.Canceled.Reason != "changed my mind" || run.Detail != "canceled by acme/user: changed my mind" {
		t.Fatalf("run ended %s (%q), cancel %+v", run.Termination, run.Detail, run.Canceled)
	}
	if n := models["main"].Calls(); n != 1 {
		t.Fatalf("the model was asked %d times, want 1 (no step after the cancel)", n)
	}
	if run.Step != 0 {
		t.Fatalf("the run moved to step %d after its cancel", run.Step)
	}
	// Canceling again, or another tenant canceling, changes nothing.
	status, body = apiCall(t, srv, "POST", "/v1/runs/"+runID+"/cancel", "acme", nil)
	if status != http.StatusConflict || body["run"] == nil || body["run"].(map[string]any)["termination"] != string(planner.TerminationCanceled) {
		t.Fatalf("second cancel: %d %v, want 409 with the run", status, body)
	}

	// A non-idempotent tool cut off mid-run is interrupted.
	status, body = apiCall(t, srv, "POST", "/v1/runs", "acme", map[string]any{"input": "wait", "model": "once", "tools": []string{"long_once"}})
	if status != http.StatusAccepted {
		t.Fatalf("start: %d %v", status, body)
	}
	runID = body["id"].(string)
	callID = plannertest.Recv(t, once.Started, "the non-idempotent tool to start")
	if status, body := apiCall(t, srv, "POST", "/v1/runs/"+runID+"/cancel", "acme", nil); status != http.StatusOK {
		t.Fatalf("cancel: %d %v", status, body)
	} else if got := callStatuses(body); got[callID] != string(events.StatusInterrupted) {
		t.Errorf("the cancel's answer shows the calls %v, want %s interrupted", got, callID)
	}
	plannertest.Recv(t, once.Stopped, "the non-idempotent tool to see its context end")
	b.awaitCallStatus(t, runID, callID, string(events.StatusInterrupted))
	if n := models["once"].Calls(); n != 1 {
		t.Fatalf("the model was asked %d times, want 1", n)
	}
}

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
	srv := httptest.NewServer(Handler(b.p, Auth{}))
	defer srv.Close()
	for _, tc := range []struct {
		model string
		limit int
		want  float64
		term  planner.Termination
	}{{"main", 2, 2, planner.TerminationMaxSteps}, {"answer", 2, 1, planner.TerminationCompleted}} {
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

// callStatuses returns the status of each call of a run as the API answered it.
func callStatuses(run map[string]any) map[string]string {
	out := map[string]string{}
	calls, _ := run["calls"].([]any)
	for _, c := range calls {
		if c, ok := c.(map[string]any); ok {
			id, _ := c["id"].(string)
			out[id], _ = c["status"].(string)
		}
	}
	return out
}
