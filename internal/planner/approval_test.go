package planner

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/internal/testsupport/plannertest"
	"github.com/toolfleet/toolfleet/pkg/events"
)

const approvalScript = plannertest.ApprovalScript

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

// startApproval starts a run of approvalScript and waits until its call of delete_all
// waits for an approval.
func (b *testBundle) startApproval(t *testing.T) (*Run, *CallRecord) {
	t.Helper()
	run, err := b.p.Start(b.ctx, StartRequest{Input: "clean up", Tools: []string{"delete_all"}})
	if err != nil {
		t.Fatal(err)
	}
	return run, b.awaitApproval(t, run.ID)
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
			if err := b.p.Approve(b.ctx, c.ID, events.Identity{}, tt.answer); err != nil {
				t.Fatal(err)
			}
			done := b.wait(t, run.ID)
			got := done.Calls[0]
			if got.Status != tt.wantStatus || done.Answer != tt.wantAnswer || !strings.Contains(string(got.Output), tt.wantOutput) {
				t.Fatalf("call %s output %s, answer %q; want %s, %q, output containing %q",
					got.Status, got.Output, done.Answer, tt.wantStatus, tt.wantAnswer, tt.wantOutput)
			}
			// The call's timeline: called, parked, answered, (run), finished, in order;
			// and the step's model time.
			parked := got.ApprovalRequestedAt
			if parked == nil || got.Approval == nil || parked.Before(got.CalledAt) || got.Approval.At.Before(*parked) ||
				got.FinishedAt == nil || got.FinishedAt.Before(got.Approval.At) {
				t.Errorf("the call's timeline is out of order: called %s, parked %v, approval %+v, finished %v",
					got.CalledAt, parked, got.Approval, got.FinishedAt)
			}
			if ran := got.StartedAt != nil; ran != (tt.wantStatus == "ok") {
				t.Errorf("the call's startedAt is %v for a %s call", got.StartedAt, got.Status)
			}
			if len(done.Offered) == 0 || done.Offered[0].AskedAt.IsZero() || done.Offered[0].AskedAt.After(got.CalledAt) {
				t.Errorf("the first step's model time is not on the run: %+v", done.Offered)
			}
		})
	}
}

// storedResult reads the result the executor stored for a call of a run.
func (b *testBundle) storedResult(t *testing.T, runID, callID string) events.Result {
	t.Helper()
	return plannertest.StoredResult(t, b.ctx, b.js, b.cfg, runID, callID)
}

// An approval with modified arguments is audited: the call record shows the arguments
// that ran and keeps the model's, and both it and the result say who decided and when.
func TestApprovalModifiedIsAudited(t *testing.T) {
	t.Parallel()
	b := setup(t, map[string]string{"main": approvalScript})
	run, c := b.startApproval(t)
	before := time.Now().Add(-time.Second)
	modified := json.RawMessage(`{"where":"tmp"}`)
	if err := b.p.Approve(b.ctx, c.ID, events.Identity{}, events.ApprovalAnswer{Decision: events.DecisionApprove, By: "ann", Reason: "tmp only", Arguments: modified}); err != nil {
		t.Fatal(err)
	}
	done := b.wait(t, run.ID)
	got := done.Calls[0]
	if got.Status != "ok" || !strings.Contains(string(got.Output), "tmp") {
		t.Fatalf("call %s output %s", got.Status, got.Output)
	}
	check := func(where string, a *events.Approval) {
		t.Helper()
		if a == nil || a.Decision != events.DecisionApprove || a.By != "anonymous" || a.ClaimedBy != "ann" || a.Reason != "tmp only" || a.At.Before(before) ||
			string(a.ArgumentsOriginal) != `{"where":"staging"}` || string(a.ArgumentsApproved) != string(modified) {
			t.Errorf("%s: approval record %+v", where, a)
		}
	}
	check("call record", got.Approval)
	if string(got.Arguments) != string(modified) || string(got.ArgumentsOriginal) != `{"where":"staging"}` {
		t.Errorf("call record arguments %s (original %s), want what ran and the model's beside it", got.Arguments, got.ArgumentsOriginal)
	}
	check("result", b.storedResult(t, run.ID, c.ID).Approval)
	// Watchers were told: the run's approval_answered event carries the record.
	subject, err := events.RunEventSubject("", run.ID, "approval_answered")
	if err != nil {
		t.Fatal(err)
	}
	s, err := b.js.Stream(b.ctx, events.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	var raw *jetstream.RawStreamMsg
	natstest.Eventually(t, waitTimeout, "the approval_answered event", func() bool { // published asynchronously
		raw, err = s.GetLastMsgForSubject(b.ctx, subject)
		return err == nil
	})
	_, _, ev, err := events.DecodeRunEvent(events.StoredMsg(raw))
	if err != nil {
		t.Fatal(err)
	}
	var a events.Approval
	if err := json.Unmarshal(ev.Detail, &a); err != nil || ev.CallID != c.ID {
		t.Fatalf("approval_answered event %+v: %v", ev, err)
	}
	check("approval_answered event", &a)
}
