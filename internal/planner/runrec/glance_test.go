package runrec

import (
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/pkg/events"
)

// A running run is shown awaiting_approval only while every call of its current step
// that is not done waits on a person (a composite call counts by its parked sub-call, a
// run_agent call by its nested run), until the first of its deadline and the requests'
// expiries.
func TestWaitingShown(t *testing.T) {
	at := time.Date(2026, 12, 7, 1, 0, 0, 0, time.UTC)
	deadline, soon, later := at.Add(time.Hour), at.Add(time.Minute), at.Add(2*time.Hour)
	parked := func(expires *time.Time) *CallRecord {
		return &CallRecord{Step: 1, Status: string(CallAwaitingApproval), ApprovalExpiresAt: expires}
	}
	done := &CallRecord{Step: 1, Status: "ok"}
	busy := &CallRecord{Step: 1, Status: string(CallPending)}
	composite := &CallRecord{Step: 1, Status: string(CallPending), Subs: []*SubCall{{Status: "ok"}, {Status: string(CallAwaitingApproval), ApprovalExpiresAt: &soon}}}
	// agent's nested run waits on a person until soon; other's does not wait.
	agent, other := &CallRecord{ID: "agent", Step: 1, Status: string(CallPending)}, &CallRecord{ID: "other", Step: 1, Status: string(CallPending)}
	nested := func(call string) (bool, *time.Time) { return call == "agent", &soon }
	for _, tt := range []struct {
		name   string
		status Status
		calls  []*CallRecord
		want   Status
		until  *time.Time
	}{
		{"parked, expiry after the deadline", StatusRunning, []*CallRecord{parked(&later), done}, StatusAwaitingApproval, &deadline},
		{"parked, expiry first", StatusRunning, []*CallRecord{parked(&later), parked(&soon)}, StatusAwaitingApproval, &soon},
		{"another call in flight", StatusRunning, []*CallRecord{parked(&soon), busy}, StatusRunning, nil},
		{"a composite's parked sub-call", StatusRunning, []*CallRecord{composite}, StatusAwaitingApproval, &soon},
		{"a nested run waiting", StatusRunning, []*CallRecord{agent, done}, StatusAwaitingApproval, &soon},
		{"a nested run waiting, another running", StatusRunning, []*CallRecord{agent, other}, StatusRunning, nil},
		{"asking the model", StatusRunning, []*CallRecord{done}, StatusRunning, nil},
		{"an earlier step's call", StatusRunning, []*CallRecord{{Step: 0, Status: string(CallAwaitingApproval)}}, StatusRunning, nil},
		{"paused", StatusPaused, []*CallRecord{parked(&soon)}, StatusPaused, nil},
	} {
		r := &Run{Status: tt.status, Step: 1, Deadline: deadline, Calls: tt.calls}
		v := r.ViewWith(at, nested)
		if v.Status != tt.want || (v.ApprovalDeadline == nil) != (tt.until == nil) || tt.until != nil && !v.ApprovalDeadline.Equal(*tt.until) {
			t.Errorf("%s: %s until %v, want %s until %v", tt.name, v.Status, v.ApprovalDeadline, tt.want, tt.until)
		}
	}
}

// A run's duration leaves out the time it was paused, and does not count on while it
// is paused; a call's leaves out its time parked for approval.
func TestDurations(t *testing.T) {
	at := time.Date(2026, 12, 7, 1, 0, 0, 0, time.UTC)
	pausedAt := at.Add(10 * time.Second)
	r := &Run{Status: StatusPaused, CreatedAt: at, PausedMS: 3000, Paused: &RunPause{At: pausedAt, Reason: "requested", By: "acme/ops", Why: "look"}}
	v := r.ViewAt(at.Add(time.Hour))
	if v.DurationMS != 7000 || v.PausedBy != "acme/ops" || v.PauseReason != "look" || v.PausedAt == nil || !v.PausedAt.Equal(pausedAt) {
		t.Errorf("paused run: %dms, %+v", v.DurationMS, v.PauseFace)
	}
	if f := (&RunPause{Reason: "after_tool", Tool: "deploy"}).Face(); f.PauseReason != "afterTools: deploy" || f.PausedBy != "" {
		t.Errorf("after_tool: %+v", f)
	}
	requested, answered := at.Add(time.Second), at.Add(5*time.Second)
	c := &CallRecord{CalledAt: at, ApprovalRequestedAt: &requested, Approval: &events.Approval{Decision: events.DecisionApprove, At: answered}}
	c.Finish(at.Add(6 * time.Second))
	if c.ApprovalWaitMS != 4000 || c.DurationMS != 2000 {
		t.Errorf("call parked 4s of 6s: wait %dms, duration %dms", c.ApprovalWaitMS, c.DurationMS)
	}
	if o := OutcomeOf(StatusDone, 1, 1); o != OutcomeToolErrors {
		t.Errorf("outcome with errors and denials: %s", o)
	}
}
