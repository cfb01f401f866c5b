package plannerapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/internal/planner"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/internal/testsupport/plannertest"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/executor"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

func TestApprovalWithInvalidArgumentsIsRefused(t *testing.T) {
	b := setup(t, map[string]string{"main": approvalScript})
	srv := httptest.NewServer(Handler(b.p, Auth{}))
	defer srv.Close()
	run, c := b.startApproval(t)
	resp, err := http.Post(srv.URL+"/v1/approvals/"+c.ID, "application/json",
		strings.NewReader(`{"decision":"approve","arguments":{"where":42}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Fatalf("status %d, want 400 for modified arguments that break the schema", resp.StatusCode)
	}
	// The call still waits; a proper answer through the API ends it.
	resp, err = http.Post(srv.URL+"/v1/approvals/"+c.ID, "application/json", strings.NewReader(`{"decision":"deny","reason":"no"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 202 {
		t.Fatalf("status %d, want 202", resp.StatusCode)
	}
	if done := b.wait(t, run.ID); done.Calls[0].Status != "denied" {
		t.Fatalf("call %+v", done.Calls[0])
	}
	resp, err = http.Post(srv.URL+"/v1/approvals/"+c.ID, "application/json", strings.NewReader(`{"decision":"approve"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 409 {
		t.Fatalf("answering a finished call: status %d, want 409", resp.StatusCode)
	}
}

// The SSE stream replays a run's lifecycle from its start, in order, and ends with done.
func TestRunEventsStream(t *testing.T) {
	b := setup(t, map[string]string{"main": `
steps:
  - calls: [{name: add, arguments: {a: 1, b: 2}}, {name: fail}]
  - text: finished
`})
	srv := httptest.NewServer(Handler(b.p, Auth{}))
	defer srv.Close()
	run := b.run(t, planner.StartRequest{Input: "go"})
	resp, err := http.Get(srv.URL + "/v1/runs/" + run.ID + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	var kinds []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if k, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
			kinds = append(kinds, k)
		}
	}
	got := strings.Join(kinds, ",")
	for _, want := range []string{"started", "step_started", "model_answered", "tool_called", "tool_result", "tool_error", "done"} {
		if !strings.Contains(got, want) {
			t.Fatalf("events %s lack %s", got, want)
		}
	}
	if !strings.HasPrefix(got, "started,") || !strings.HasSuffix(got, ",done") {
		t.Fatalf("events %s: want started first and done last", got)
	}
}

// postAnswer posts an approval answer through the API and returns the status and the
// decision that stood, when the answer was refused with one.
func postAnswer(t *testing.T, url, callID, body string) (int, *events.Approval, string) {
	t.Helper()
	resp, err := http.Post(url+"/v1/approvals/"+callID, "application/json", strings.NewReader(body))
	if err != nil {
		t.Error(err)
		return 0, nil, ""
	}
	defer resp.Body.Close()
	var out struct{ Error *planner.APIError }
	_ = json.NewDecoder(resp.Body).Decode(&out)
	if out.Error == nil {
		return resp.StatusCode, nil, ""
	}
	return resp.StatusCode, out.Error.Approval, out.Error.Message
}

// Approve and deny sent at the same moment: the first recorded wins (202), the other is
// refused (409) with the decision that stood, and the tool ran or not accordingly.
func TestApprovalFirstAnswerWins(t *testing.T) {
	t.Parallel()
	b := setup(t, map[string]string{"main": approvalScript})
	srv := httptest.NewServer(Handler(b.p, Auth{}))
	defer srv.Close()
	run, c := b.startApproval(t)
	bodies := []string{`{"decision":"approve","by":"ann"}`, `{"decision":"deny","by":"bob","reason":"not today"}`}
	type answer struct {
		status int
		stood  *events.Approval
	}
	answers := make([]answer, len(bodies))
	var wg sync.WaitGroup
	for i, body := range bodies {
		wg.Go(func() {
			status, stood, _ := postAnswer(t, srv.URL, c.ID, body)
			answers[i] = answer{status, stood}
		})
	}
	wg.Wait()
	won, lost := 0, 1
	if answers[1].status == http.StatusAccepted {
		won, lost = 1, 0
	}
	if answers[won].status != http.StatusAccepted || answers[lost].status != http.StatusConflict {
		t.Fatalf("statuses %d and %d, want one 202 and one 409", answers[0].status, answers[1].status)
	}
	wantDecision, wantBy := events.DecisionApprove, "ann"
	if won == 1 {
		wantDecision, wantBy = events.DecisionDeny, "bob"
	}
	if s := answers[lost].stood; s == nil || s.Decision != wantDecision || s.ClaimedBy != wantBy || s.By != "anonymous" || s.At.IsZero() {
		t.Fatalf("409 body gives %+v, want the decision that stood: %s by %s", s, wantDecision, wantBy)
	}
	done := b.wait(t, run.ID)
	got := done.Calls[0]
	ran := got.Status == "ok" && strings.Contains(string(got.Output), "deleted")
	if ran != (wantDecision == events.DecisionApprove) || got.Approval == nil || got.Approval.Decision != wantDecision {
		t.Fatalf("%s won, but the call is %s (output %s, approval %+v)", wantDecision, got.Status, got.Output, got.Approval)
	}
	// A late answer after the result gets the decision that stood as well.
	if status, stood, _ := postAnswer(t, srv.URL, c.ID, bodies[lost]); status != http.StatusConflict || stood == nil || stood.Decision != wantDecision {
		t.Fatalf("late answer: %d %+v", status, stood)
	}
}

// A call that never asked for approval cannot be answered.
func TestApprovalOfCallThatDidNotAsk(t *testing.T) {
	t.Parallel()
	b := setup(t, map[string]string{"main": `
steps:
  - calls: [{name: hold, arguments: {}}]
  - text: done
`})
	// hold, a safe tool, runs until the test is over.
	release := make(chan struct{})
	startExecutor(t, b, tools.Definition{Type: "function", Name: "hold", Description: "Holds.", Safe: true,
		Parameters: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, json.RawMessage) (any, error) { <-release; return "held", nil })
	t.Cleanup(func() { close(release) }) // before the executor stops
	srv := httptest.NewServer(Handler(b.p, Auth{}))
	defer srv.Close()
	run, err := b.p.Start(b.ctx, planner.StartRequest{Input: "wait", Tools: []string{"hold"}})
	if err != nil {
		t.Fatal(err)
	}
	var c *planner.CallRecord
	natstest.Eventually(t, waitTimeout, "the slow call", func() bool {
		r, err := b.p.Get(b.ctx, run.ID)
		if err != nil || len(r.Calls) == 0 {
			return false
		}
		c = r.Calls[0]
		return true
	})
	status, _, msg := postAnswer(t, srv.URL, c.ID, `{"decision":"approve"}`)
	if status != http.StatusConflict || !strings.Contains(msg, "not awaiting approval") {
		t.Fatalf("answer to a call that did not ask: %d %q, want 409 saying so", status, msg)
	}
	if status, _, _ := postAnswer(t, srv.URL, c.ID+"x", `{"decision":"approve"}`); status != http.StatusNotFound {
		t.Fatalf("answer to an unknown call: %d, want 404", status)
	}
	if r, _ := b.p.Get(b.ctx, run.ID); r.Calls[0].Approval != nil {
		t.Fatalf("a refused answer was recorded: %+v", r.Calls[0].Approval)
	}
}

// An approval that never comes is recorded as expired, on the call and in the result.
func TestApprovalExpiredIsRecorded(t *testing.T) {
	t.Parallel()
	b := setup(t, map[string]string{"main": `
steps:
  - calls: [{name: risky, arguments: {}}]
  - when: {error: true, contains: denied}
    text: not allowed
  - text: done
`})
	var ran atomic.Bool
	startExecutor(t, b, tools.Definition{Type: "function", Name: "risky", Description: "Needs approval.",
		Parameters: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, json.RawMessage) (any, error) { ran.Store(true); return "ran", nil },
		executor.WithApprovalTimeout(300*time.Millisecond))

	run, err := b.p.Start(b.ctx, planner.StartRequest{Input: "go", Tools: []string{"risky"}})
	if err != nil {
		t.Fatal(err)
	}
	done := b.wait(t, run.ID)
	got := done.Calls[0]
	if got.Status != string(events.StatusDenied) || ran.Load() {
		t.Fatalf("call %s (ran %v), want denied without running", got.Status, ran.Load())
	}
	if a := got.Approval; a == nil || a.Decision != events.DecisionExpired || a.At.IsZero() || a.By != "" {
		t.Fatalf("call record approval %+v, want decision expired", a)
	}
	if a := plannertest.StoredResult(t, b.ctx, b.js, b.cfg, run.ID, got.ID).Approval; a == nil || a.Decision != events.DecisionExpired {
		t.Fatalf("result approval %+v, want decision expired", a)
	}
	srv := httptest.NewServer(Handler(b.p, Auth{}))
	defer srv.Close()
	if status, _, _ := postAnswer(t, srv.URL, got.ID, `{"decision":"approve"}`); status != http.StatusConflict {
		t.Fatalf("answer after expiry: %d, want 409", status)
	}
}

// A deny may carry "arguments": null (what a form or a typed client sends for none);
// arguments on a deny are refused, since only an approval replaces them.
func TestDenyWithNullArguments(t *testing.T) {
	b := setup(t, map[string]string{"main": approvalScript})
	api := httptest.NewServer(Handler(b.p, Auth{}))
	defer api.Close()
	run, c := b.startApproval(t)
	status, body := apiCall(t, api, "POST", "/v1/approvals/"+c.ID, "", map[string]any{"decision": "deny", "arguments": map[string]any{"where": "x"}})
	if status != http.StatusBadRequest || !strings.Contains(fmt.Sprint(body), "a deny takes none") {
		t.Fatalf("deny with arguments: %d %v; want 400", status, body)
	}
	status, body = apiCall(t, api, "POST", "/v1/approvals/"+c.ID, "", map[string]any{"decision": "deny", "reason": "no", "arguments": nil})
	if status != http.StatusAccepted {
		t.Fatalf("deny with null arguments: %d %v; want 202", status, body)
	}
	done := b.wait(t, run.ID)
	if done.Calls[0].Status != string(events.StatusDenied) || done.Answer != "not allowed" {
		t.Fatalf("after the deny: call %+v, answer %q", done.Calls[0], done.Answer)
	}
}
