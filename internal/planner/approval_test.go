package planner

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/toolfleet/toolfleet/internal/natstest"
	"github.com/toolfleet/toolfleet/pkg/events"
)

const approvalScript = `
steps:
  - calls: [{name: delete_all, arguments: {where: staging}}]
  - when: {error: true, contains: denied}
    text: not allowed
  - text: deleted
`

// awaitApproval waits until the run's first call waits for an approval and returns it.
func (b *testBundle) awaitApproval(t *testing.T, runID string) *CallRecord {
	t.Helper()
	var c *CallRecord
	natstest.Eventually(t, waitTimeout, "an approval request", func() bool {
		run, err := b.p.Get(b.ctx, runID)
		if err != nil || len(run.Calls) == 0 {
			return false
		}
		c = run.Calls[0]
		return c.Status == string(CallAwaitingApproval)
	})
	return c
}

func TestApprovals(t *testing.T) {
	tests := []struct {
		name       string
		answer     events.ApprovalAnswer
		wantStatus string
		wantAnswer string
		wantOutput string
	}{
		{"approve", events.ApprovalAnswer{Decision: events.DecisionApprove, By: "ann"}, "ok", "deleted", "staging"},
		{"deny", events.ApprovalAnswer{Decision: events.DecisionDeny, Reason: "not today"}, "denied", "not allowed", "not today"},
		{"modify", events.ApprovalAnswer{Decision: events.DecisionApprove, Arguments: json.RawMessage(`{"where":"tmp"}`)}, "ok", "deleted", "tmp"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := setup(t, map[string]string{"main": approvalScript})
			run, err := b.p.Start(b.ctx, StartRequest{Input: "clean up", Tools: []string{"delete_all"}})
			if err != nil {
				t.Fatal(err)
			}
			c := b.awaitApproval(t, run.ID)
			if err := b.p.Approve(b.ctx, c.ID, tt.answer); err != nil {
				t.Fatal(err)
			}
			done := b.wait(t, run.ID)
			got := done.Calls[0]
			if got.Status != tt.wantStatus || done.Answer != tt.wantAnswer || !strings.Contains(string(got.Output), tt.wantOutput) {
				t.Fatalf("call %s output %s, answer %q; want %s, %q, output containing %q",
					got.Status, got.Output, done.Answer, tt.wantStatus, tt.wantAnswer, tt.wantOutput)
			}
		})
	}
}

func TestApprovalWithInvalidArgumentsIsRefused(t *testing.T) {
	b := setup(t, map[string]string{"main": approvalScript})
	srv := httptest.NewServer(b.p.Handler(""))
	defer srv.Close()
	run, err := b.p.Start(b.ctx, StartRequest{Input: "clean up", Tools: []string{"delete_all"}})
	if err != nil {
		t.Fatal(err)
	}
	c := b.awaitApproval(t, run.ID)
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
	srv := httptest.NewServer(b.p.Handler(""))
	defer srv.Close()
	run := b.run(t, StartRequest{Input: "go"})
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
	for _, want := range []string{"started", "step", "tool_called", "tool_result", "tool_error", "done"} {
		if !strings.Contains(got, want) {
			t.Fatalf("events %s lack %s", got, want)
		}
	}
	if !strings.HasPrefix(got, "started,") || !strings.HasSuffix(got, ",done") {
		t.Fatalf("events %s: want started first and done last", got)
	}
}
