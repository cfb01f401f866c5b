package runrec

import (
	"time"

	"github.com/toolfleet/toolfleet/pkg/events"
)

// What every view of a run shows at a glance — whether it waits on a person, how it
// ended, how long it took, why it is paused — is computed here, once, from facts of
// the run's record, so that the run's view (GET /v1/runs/{id}), the lists (the
// planner's run index), their filters and counts cannot disagree. None of it is
// stored: Status keeps the meaning the loop gives it.

// StatusAwaitingApproval is the status a running run is shown with while its progress
// waits on a person: calls of its current step are parked for approval, and nothing
// else of it is in flight. It is never stored (the run's Status stays running).
const StatusAwaitingApproval Status = "awaiting_approval"

// Waiting gathers what a running run's current calls wait on: add each call of the
// current step with Call, each of its sub-calls with Sub, then ask Shown.
type Waiting struct {
	// parked: calls and sub-calls parked for approval; nested: calls in flight whose
	// nested runs wait on a person; busy: calls in flight that wait on neither.
	parked, nested, busy int
	// lastBusy: the last call added is in flight and has no parked sub-call yet.
	lastBusy bool
	expires  *time.Time
}

// Call adds a call of the current step: its status, and when its approval request
// expires (nil: unknown, or none).
func (w *Waiting) Call(status string, expires *time.Time) {
	w.lastBusy = false
	switch status {
	case string(CallAwaitingApproval):
		w.park(expires)
	case string(CallPending):
		w.busy++
		w.lastBusy = true
	}
}

// Sub adds a sub-call of the call added last: a composite call waiting on a parked
// sub-call waits on a person, not on the fleet.
func (w *Waiting) Sub(status string, expires *time.Time) {
	if status != string(CallAwaitingApproval) {
		return
	}
	w.park(expires)
	w.lastOnPerson()
}

// Nested adds what the call added last, id in status, waits on when it started a nested
// run: one that nested says waits on a person only makes the run wait on that person
// too, until its deadline. The nested run's approvals are its own, not counted by
// Parked. A nil nested, or a call not in flight, adds nothing.
func (w *Waiting) Nested(id, status string, nested NestedWait) {
	if nested == nil || status != string(CallPending) {
		return
	}
	waits, deadline := nested(id)
	if !waits {
		return
	}
	w.nested++
	w.until(deadline)
	w.lastOnPerson()
}

// lastOnPerson counts the call added last, in flight, as waiting on a person rather
// than on the fleet.
func (w *Waiting) lastOnPerson() {
	if w.lastBusy {
		w.busy--
		w.lastBusy = false
	}
}

func (w *Waiting) park(expires *time.Time) {
	w.parked++
	w.until(expires)
}

// until keeps the first of the waits' deadlines.
func (w *Waiting) until(d *time.Time) {
	if d != nil && (w.expires == nil || d.Before(*w.expires)) {
		w.expires = d
	}
}

// Parked counts the calls and sub-calls added that are parked for approval.
func (w *Waiting) Parked() int { return w.parked }

// Shown is the status a run stored with status and deadline is shown with, given its
// current calls (w): StatusAwaitingApproval for a running run whose calls wait on a
// person only (their approvals, or their nested runs'), with the approval deadline,
// when its unanswered approvals are denied (the run's deadline or the first of the
// requests' own expiries, whichever comes first); otherwise status, and no deadline.
func (w *Waiting) Shown(status Status, deadline time.Time) (Status, *time.Time) {
	if status != StatusRunning || w.parked+w.nested == 0 || w.busy > 0 {
		return status, nil
	}
	d := deadline
	if w.expires != nil && (d.IsZero() || w.expires.Before(d)) {
		d = *w.expires
	}
	if d.IsZero() {
		return StatusAwaitingApproval, nil
	}
	d = d.UTC()
	return StatusAwaitingApproval, &d
}

// NestedWait reports whether the nested run started by the call callID (a run_agent
// call in flight) waits on a person only, and until when (nil: no deadline known). A
// call that started no nested run does not.
type NestedWait func(callID string) (waiting bool, deadline *time.Time)

// Waiting returns what r's current calls wait on, their nested runs left out.
func (r *Run) Waiting() Waiting { return r.WaitingOn(nil) }

// WaitingOn returns what r's current calls wait on, nested runs as nested says (nil:
// left out).
func (r *Run) WaitingOn(nested NestedWait) Waiting {
	var w Waiting
	for _, c := range r.Calls {
		if c.Step != r.Step {
			continue
		}
		w.Call(c.Status, c.ApprovalExpiresAt)
		for _, s := range c.Subs {
			w.Sub(s.Status, s.ApprovalExpiresAt)
		}
		w.Nested(c.ID, c.Status, nested)
	}
	return w
}

// Outcome says at a glance how a finished run's calls went.
type Outcome string

// Outcomes.
const (
	// OutcomeClean: no call failed and no approval was refused.
	OutcomeClean Outcome = "clean"
	// OutcomeToolErrors: a call sent to the fleet (or a nested run) ended in error or
	// timeout; it wins over OutcomeDenied.
	OutcomeToolErrors Outcome = "tool_errors"
	// OutcomeDenied: an approval was denied, or expired unanswered.
	OutcomeDenied Outcome = "denied"
)

// Outcomes lists every outcome, for checking a filter.
var Outcomes = []Outcome{OutcomeClean, OutcomeToolErrors, OutcomeDenied}

// OutcomeOf is the outcome of a run in status with its counts of tool errors and
// denials: empty while the run is not done.
func OutcomeOf(status Status, toolErrors, denials int) Outcome {
	switch {
	case status != StatusDone:
		return ""
	case toolErrors > 0:
		return OutcomeToolErrors
	case denials > 0:
		return OutcomeDenied
	}
	return OutcomeClean
}

// IsToolError reports whether a call's result status counts as a tool error.
func IsToolError(status string) bool {
	return status == string(events.StatusError) || status == string(events.StatusTimeout)
}

// IsDenial reports whether an approval decision refused the call.
func IsDenial(a *events.Approval) bool {
	return a != nil && (a.Decision == events.DecisionDeny || a.Decision == events.DecisionExpired)
}

// DurationMS is how long a run created at created has run by now (or until finished),
// without the time it spent paused: pausedMS before its current pause, and, while
// paused (pausedAt set), none since.
func DurationMS(created time.Time, finished, pausedAt *time.Time, pausedMS int64, now time.Time) int64 {
	end := now
	switch {
	case finished != nil:
		end = *finished
	case pausedAt != nil:
		end = *pausedAt
	}
	return max(0, end.Sub(created).Milliseconds()-pausedMS)
}

// PauseFace is who paused a paused run, why and since when, as views show it.
type PauseFace struct {
	// PausedBy is the identity that asked for the pause (Identity.Describe()); empty
	// for a pause the run's own rule made.
	PausedBy string `json:"pausedBy,omitempty"`
	// PauseReason is the reason the pause request gave (else "requested"), or the rule
	// that fired: "afterEveryStep", or "afterTools: <tool>".
	PauseReason string     `json:"pauseReason,omitempty"`
	PausedAt    *time.Time `json:"pausedAt,omitempty"`
}

// Face returns what views show of the pause p (nil: not paused).
func (p *RunPause) Face() PauseFace {
	if p == nil {
		return PauseFace{}
	}
	at := p.At
	f := PauseFace{PausedBy: p.By, PausedAt: &at}
	switch p.Reason {
	case "after_step":
		f.PauseReason = "afterEveryStep"
	case "after_tool":
		f.PauseReason = "afterTools: " + p.Tool
	default:
		f.PauseReason = p.Why
		if f.PauseReason == "" {
			f.PauseReason = p.Reason
		}
	}
	return f
}
