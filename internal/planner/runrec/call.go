package runrec

import (
	"encoding/json"
	"time"

	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// CallStatus is a tool call's state in a run.
type CallStatus string

const (
	// CallPending: published, no result yet.
	CallPending CallStatus = "pending"
	// CallAwaitingApproval: the executor asked for an approval.
	CallAwaitingApproval CallStatus = "awaiting_approval"
)

// AgentToolName is the planner's own tool, run_agent, whose call starts a nested run:
// the call on which the nested run's totals are charged to its parent
// (CallRecord.Nested).
const AgentToolName = "run_agent"

// CallRecord is one tool call of a run, with its timeline. Its Status is CallPending,
// CallAwaitingApproval, or a result status from pkg/events once answered.
type CallRecord struct {
	ID string `json:"id"`
	// ModelCallID is the id the model gave the call; results are fed back under it.
	ModelCallID string          `json:"modelCallId"`
	Name        string          `json:"name"`
	Arguments   json.RawMessage `json:"arguments,omitempty"`
	Step        int             `json:"step"`
	Status      string          `json:"status"`
	Output      json.RawMessage `json:"output,omitempty"`
	Error       *tools.Error    `json:"error,omitempty"`
	Attempts    int             `json:"attempts,omitempty"`
	Validated   bool            `json:"validated"`
	Executor    string          `json:"executor,omitempty"`
	// NoSchemaMode is the tool's noSchemaMode when Validated is false (the tool has no
	// schema); empty for a validated call.
	NoSchemaMode tools.NoSchemaMode `json:"noSchemaMode,omitempty"`
	// Approval records the decision on a call that asked for approval: who, when, why.
	// An approval that modified the arguments replaced Arguments (they are what ran);
	// ArgumentsOriginal keeps the model's.
	Approval          *events.Approval `json:"approval,omitempty"`
	ArgumentsOriginal json.RawMessage  `json:"argumentsOriginal,omitempty"`
	// Policy records the decisions of the policy hooks asked about the call, in order:
	// the run's (by the planner), then its tool's (by the executor, from the result). A
	// hook that modified the arguments replaced Arguments too; ArgumentsOriginal keeps
	// the model's.
	Policy []events.PolicyRecord `json:"policy,omitempty"`
	// Subs, on a call of a composite tool, are its sub-calls, depth first (a sub-call of
	// a composite sub-tool follows it): each checked like a call of the model before the
	// call went out, and followed as the fleet answers it (composite.go).
	Subs []*SubCall `json:"subs,omitempty"`

	// ArgumentsRef is set when the arguments were larger than the claim-check size: they
	// are stored once as a payload, and the call went to the fleet by this reference.
	ArgumentsRef *events.PayloadRef `json:"argumentsRef,omitempty"`

	// Nested, on a run_agent call, is the tree totals of the nested run it started (what
	// that run and its own nested runs used) as last charged to this run.
	Nested *NestedCharge `json:"nested,omitempty"`

	// Local marks a call answered by the planner itself (invalid input, unknown tool,
	// loop warning, nested run), never published to the fleet.
	Local bool `json:"local,omitempty"`
	// The call's timeline: CalledAt, when it was published (or answered by the planner);
	// ApprovalRequestedAt, when its executor parked it for approval (Approval.At says
	// when that ended); StartedAt, when the executor's first attempt began (absent for a
	// call that never ran), so StartedAt - CalledAt is its time in the queue, less
	// LimitWaitMS (waiting at the executor for its tool's limits) and the time parked;
	// AttemptSpans, each attempt of a call run more than once; FinishedAt, its result.
	CalledAt            time.Time  `json:"calledAt"`
	ApprovalRequestedAt *time.Time `json:"approvalRequestedAt,omitempty"`
	// ApprovalExpiresAt is when its approval request is denied unanswered (the
	// executor's expiry); ApprovalWaitMS how long it was parked, which DurationMS
	// (FinishedAt - CalledAt) leaves out.
	ApprovalExpiresAt *time.Time           `json:"approvalExpiresAt,omitempty"`
	ApprovalWaitMS    int64                `json:"approvalWaitMs,omitempty"`
	StartedAt         *time.Time           `json:"startedAt,omitempty"`
	LimitWaitMS       int64                `json:"limitWaitMs,omitempty"`
	AttemptSpans      []events.AttemptSpan `json:"attemptSpans,omitempty"`
	FinishedAt        *time.Time           `json:"finishedAt,omitempty"`
	DurationMS        int64                `json:"durationMs,omitempty"`
}

// Done reports whether the call has its result.
func (c *CallRecord) Done() bool {
	return c.Status != string(CallPending) && c.Status != string(CallAwaitingApproval)
}

// Finish sets when the call ended and its duration: from its call to its result, less
// the time it was parked for approval (ApprovalWaitMS: until its answer, or until it
// ended unanswered).
func (c *CallRecord) Finish(finished time.Time) {
	c.FinishedAt = &finished
	if c.ApprovalRequestedAt != nil {
		end := finished
		if c.Approval != nil && !c.Approval.At.IsZero() && c.Approval.At.Before(finished) {
			end = c.Approval.At
		}
		c.ApprovalWaitMS = max(0, end.Sub(*c.ApprovalRequestedAt).Milliseconds())
	}
	c.DurationMS = max(0, finished.Sub(c.CalledAt).Milliseconds()-c.ApprovalWaitMS)
}

// Failed reports whether the call ended in an error of any kind.
func (c *CallRecord) Failed() bool { return c.Done() && c.Status != "ok" }

// AnswerLocal gives c a result decided by the planner.
func (c *CallRecord) AnswerLocal(status string, err *tools.Error, now time.Time) {
	c.Status, c.Error, c.Local, c.FinishedAt = status, err, true, &now
	c.Output = err.ForModel()
	c.DurationMS = now.Sub(c.CalledAt).Milliseconds()
}

// SubCall is a sub-call of a composite call of a run (CallRecord.Subs).
type SubCall struct {
	// ID is the sub-call's call id: its composite call's, then "-sub-" and its position
	// from 1 (events.SubCallID), as a tools file's composite publishes it.
	ID        string `json:"id"`
	Name      string `json:"name"`
	Validated bool   `json:"validated"`
	// Status is pending, awaiting_approval, or the status of its result (or, for a
	// sub-call its composite call ended without, what that end says of it).
	Status string `json:"status"`
	// Policy records the decisions of the run's policy hook about the sub-call.
	Policy []events.PolicyRecord `json:"policy,omitempty"`
	// Approval is the answer to its approval request; ApprovalRequestedAt when its
	// executor asked.
	Approval            *events.Approval `json:"approval,omitempty"`
	ApprovalRequestedAt *time.Time       `json:"approvalRequestedAt,omitempty"`
	ApprovalExpiresAt   *time.Time       `json:"approvalExpiresAt,omitempty"`
	FinishedAt          *time.Time       `json:"finishedAt,omitempty"`
}

// Done reports whether the sub-call has ended.
func (s *SubCall) Done() bool {
	return s.Status != string(CallPending) && s.Status != string(CallAwaitingApproval)
}
