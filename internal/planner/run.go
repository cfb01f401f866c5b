package planner

import (
	"context"
	"encoding/json"
	"time"

	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/pick"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Status is where a run is in its life.
type Status string

const (
	// StatusRunning: the planner is asking the model or waiting for tool results.
	StatusRunning Status = "running"
	// StatusDone: the run ended; Termination says why.
	StatusDone Status = "done"
	// StatusPaused (pause.go): the run waits at a step boundary for a resume.
)

// Termination says why a run ended. Every stop condition has its own.
type Termination string

const (
	// TerminationCompleted: the model answered without tool calls.
	TerminationCompleted Termination = "completed"
	// TerminationFinalTool: a tool marked final succeeded.
	TerminationFinalTool Termination = "final_tool"
	// TerminationMaxSteps: the run used its steps.
	TerminationMaxSteps Termination = "max_steps"
	// TerminationTimeout: the run's wall-clock time ran out.
	TerminationTimeout Termination = "timeout"
	// TerminationTokenBudget: the run's tree used its token budget, or what it had left
	// could not pay for the shortest answer of its next model call (reserve.go).
	TerminationTokenBudget Termination = "token_budget"
	// TerminationErrorThreshold: too many tool calls failed.
	TerminationErrorThreshold Termination = "error_threshold"
	// TerminationLoopDetected: the model repeated the same call, with loopAction stop.
	TerminationLoopDetected Termination = "loop_detected"
	// TerminationModelError: the model could not be reached or gave an unusable answer.
	TerminationModelError Termination = "model_error"
	// TerminationCanceled: someone canceled the run.
	TerminationCanceled Termination = "canceled"
	// TerminationToolRequired: toolChoice is required, and the model answered without a
	// tool call twice in a row (the first time it was asked again).
	TerminationToolRequired Termination = "tool_required"
	// TerminationStorageError: a part of the run's state could not be stored in a way no
	// retry fixes (e.g. a model answer larger than the server's max payload); Detail
	// says which and why. The run ends at once instead of waiting for its time limit.
	TerminationStorageError Termination = "storage_error"
)

// Run is a run: its control state, and the conversation and calls it accumulated.
//
// Where it lives: the control state — the fields below but Messages, Warnings, the
// Offered and RetriedSteps of earlier steps, and the earlier steps' Calls — is one entry
// of the runs KV bucket, changed only by compare-and-set on its revision, so any planner
// replica can continue any run. Its size does not grow with the run's length (see
// [Run.control]). What a run accumulates is written once, in the run log (on the
// bucket's stream, the journal: events.StreamJournal): the input messages, and one record per step with the model's
// message, the calls it made and how the previous step's calls ended; tool outputs stay
// in the results stream where the executors stored them, referenced by call id.
// [Planner.Get] and [Planner.Wait] return the run assembled from those parts.
//
// Usage, Cost and its steps are what the run used itself; Nested what its nested runs
// used (theirs included). [Run.Own] and [Run.Tree] sum them; GET /v1/runs/{id} shows
// both (usage, tokens, cost, steps; treeUsage, treeTokens, treeCost, treeSteps), and a
// run's budgets hold for its tree (see the package doc).
type Run struct {
	ID string `json:"id"`
	// ParentID and ParentCallID are set on a nested run: its answer becomes the result of
	// that call of the parent run.
	ParentID     string `json:"parentId,omitempty"`
	ParentCallID string `json:"parentCallId,omitempty"`
	Depth        int    `json:"depth"`

	Status      Status      `json:"status"`
	Termination Termination `json:"termination,omitempty"`
	// Detail says more about the termination, e.g. which tool looped.
	Detail string `json:"detail,omitempty"`
	// Answer is the model's final text, or the output of the final tool that ended the
	// run (AnswerCall; the control state holds only the call id).
	Answer     string `json:"answer,omitempty"`
	AnswerCall string `json:"answerCall,omitempty"`

	Model      string              `json:"model"`
	System     string              `json:"system,omitempty"`
	Tools      []string            `json:"tools"`
	ToolChoice provider.ToolChoice `json:"toolChoice"`
	Limits     Limits              `json:"limits"`
	Pick       bool                `json:"pick,omitempty"`
	Metadata   map[string]string   `json:"metadata,omitempty"`
	// Tenant and Role are the identity of the caller who started the run (its API
	// token's): its calls are published with it, executors enforce tools' roles and
	// tenants with it, and only that tenant sees the run.
	Tenant string `json:"tenant,omitempty"`
	Role   string `json:"role,omitempty"`
	// What callers changed while the run lasts: cancel, follow-ups, tools (control.go).
	runControls

	// InputPreview is the first inputPreviewRunes characters of the run's input text (its
	// last user message), written once at the start: what run lists show and search
	// (runindex.go) without reading the run log.
	InputPreview string `json:"inputPreview,omitempty"`
	// CallCount counts the calls the model made in the run, and Called names the tools
	// they called (distinct, in the order of their first call, at most maxCalledTools):
	// run lists show them, and the control state keeps only the current step's calls.
	CallCount int      `json:"callCount,omitempty"`
	Called    []string `json:"called,omitempty"`

	// Messages is the conversation (assembled from the run log; not in the control state).
	Messages []provider.Message `json:"messages,omitempty"`
	// Step counts model turns taken; the current step's calls are those with Step == Step.
	// A planner that resumes a step whose calls are recorded publishes the unanswered ones
	// again: JetStream drops the repeats by id.
	Step int `json:"step"`
	// Recorded is how many step records of the run log belong to the run: records
	// 0..Recorded-1 (a record written by a replica whose compare-and-set lost is not).
	Recorded int `json:"recorded"`
	// Calls: in the control state, the calls of the last step that made calls, without
	// their arguments and outputs; assembled, every call of the run.
	Calls  []*CallRecord  `json:"calls"`
	Usage  provider.Usage `json:"usage"`
	Errors int            `json:"errors"`
	// Cost is what the run has cost so far: its model's tokens at the price table's
	// price, and the price of every call sent to the fleet (charged when it is sent).
	Cost float64 `json:"cost,omitempty"`
	// StepUsage is the last model answer's usage.
	StepUsage provider.Usage `json:"stepUsage,omitzero"`
	// Nested is what the run's nested runs used, their own nested runs included, as
	// charged to this run while they run (budget.go): the run's tree totals (GET
	// /v1/runs/{id}'s treeUsage, treeCost, treeSteps) are its own plus Nested, and its
	// budgets are checked against them. TreeSeq counts the changes of its tree totals,
	// so that its parent keeps the latest of its charges; NestedTurn is Nested's steps
	// when the current turn began, for MaxSteps.
	Nested     Totals     `json:"nested,omitzero"`
	TreeSeq    int        `json:"treeSeq,omitempty"`
	NestedTurn nestedTurn `json:"nestedTurn,omitzero"`
	// Reserved holds, from the run's budgets, the answers of model calls under way in
	// its nested runs: the most each can cost, until it is charged (reserve.go).
	Reserved []Reservation `json:"reserved,omitempty"`
	// StopWhen and StopHook are the run's custom stop conditions (stop.go); StopMatch
	// is the condition a call of the current step matched, until the step completes.
	StopWhen  []StopCondition `json:"stopWhen,omitempty"`
	StopHook  *StopHook       `json:"stopHook,omitempty"`
	StopMatch *stopMatch      `json:"stopMatch,omitempty"`
	// PolicyHook is asked before each call of the run is published (policy.go).
	PolicyHook *PolicyHook `json:"policyHook,omitempty"`
	// PauseOn says when the run pauses by itself; Paused, while its status is paused,
	// since when and why (pause.go).
	PauseOn *PauseOptions `json:"pauseOn,omitempty"`
	Paused  *RunPause     `json:"paused,omitempty"`
	// Repaired lists tools whose one free repair (an invalid call answered with the
	// validator's messages, not counted as an error) is used.
	Repaired []string `json:"repaired,omitempty"`
	// Warnings are kept in the step records; the control state holds none.
	Warnings []string `json:"warnings,omitempty"`
	// Loop is the loop detector's window: the last call's key (a hash of tool and
	// canonical arguments) and how many calls in a row had it.
	Loop loopWindow `json:"loop,omitzero"`
	// Offered records, per step, the tools the model was offered: the only tools it may
	// call at that step. Under toolChoice "none" it may call none, under a named tool
	// only that one. The control state keeps the current step's only.
	Offered []StepTools `json:"offered,omitempty"`
	// RetriedSteps lists the steps whose model answer had no tool call under toolChoice
	// "required", so the model was asked again. The control state keeps the last only.
	RetriedSteps []int `json:"retriedSteps,omitempty"`

	// Lease, while set, says which replica takes the current step itself, and until
	// when; another takes it over when it runs out (see local.go).
	Lease *stepLease `json:"lease,omitempty"`

	// TraceParent and TraceState are the W3C trace context of the run's span, when
	// tracing is on: its model calls and tool calls join the run's trace.
	TraceParent string `json:"traceparent,omitempty"`
	TraceState  string `json:"tracestate,omitempty"`

	CreatedAt  time.Time  `json:"createdAt"`
	Deadline   time.Time  `json:"deadline"`
	FinishedAt *time.Time `json:"finishedAt,omitempty"`
}

// loopWindow is what loop detection needs of the calls made so far: the key of the last
// one and the length of the run of identical calls it ends.
type loopWindow struct {
	Key   string `json:"key,omitempty"`
	Count int    `json:"count,omitempty"`
}

// control returns the part of r the runs bucket stores: r without the conversation,
// the warnings, the earlier steps' tool sets and retries, and without the calls'
// arguments (in the step record) and outputs (in the results stream, or in the step
// record for calls the planner answered itself). Its size is bounded by the run's
// request and one step's calls, never by the run's length. r is not modified.
func (r *Run) control() *Run {
	c := *r
	c.Messages, c.Warnings = nil, nil
	if r.AnswerCall != "" {
		c.Answer = ""
	}
	if len(c.Offered) > 0 {
		c.Offered = c.Offered[len(c.Offered)-1:]
	}
	if len(c.RetriedSteps) > 0 {
		c.RetriedSteps = c.RetriedSteps[len(c.RetriedSteps)-1:]
	}
	c.Calls = make([]*CallRecord, len(r.Calls))
	for i, call := range r.Calls {
		cc := *call
		cc.Output = nil
		if cc.ArgumentsOriginal == nil { // arguments an approval modified are kept
			cc.Arguments = nil
		}
		c.Calls[i] = &cc
	}
	return &c
}

// StepTools is the tool set of one step, as the model was offered it.
type StepTools struct {
	Step  int      `json:"step"`
	Tools []string `json:"tools"`
	// Picked is what the picker returned when it chose the tools (scores, reasons,
	// provenance), best first; absent when the picker was not asked or failed.
	Picked []pick.Result `json:"picked,omitempty"`
	// AskedAt is when the model was asked for the step, ModelMS how long it took to
	// answer (the step's model time on a run's timeline); zero for a step recorded
	// before they were.
	AskedAt time.Time `json:"askedAt,omitzero"`
	ModelMS int64     `json:"modelMs,omitempty"`
}

// caller is the identity the run acts with.
func (r *Run) caller() events.Identity { return events.Identity{Tenant: r.Tenant, Role: r.Role} }

// offered returns the tool set recorded for step, or nil for a step taken before tool
// sets were recorded.
func (r *Run) offered(step int) *StepTools {
	for i := len(r.Offered) - 1; i >= 0; i-- {
		if r.Offered[i].Step == step {
			return &r.Offered[i]
		}
	}
	return nil
}

// CallStatus is a tool call's state in a run.
type CallStatus string

const (
	// CallPending: published, no result yet.
	CallPending CallStatus = "pending"
	// CallAwaitingApproval: the executor asked for an approval.
	CallAwaitingApproval CallStatus = "awaiting_approval"
)

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
	CalledAt            time.Time            `json:"calledAt"`
	ApprovalRequestedAt *time.Time           `json:"approvalRequestedAt,omitempty"`
	StartedAt           *time.Time           `json:"startedAt,omitempty"`
	LimitWaitMS         int64                `json:"limitWaitMs,omitempty"`
	AttemptSpans        []events.AttemptSpan `json:"attemptSpans,omitempty"`
	FinishedAt          *time.Time           `json:"finishedAt,omitempty"`
	DurationMS          int64                `json:"durationMs,omitempty"`
}

// Done reports whether the call has its result.
func (c *CallRecord) Done() bool {
	return c.Status != string(CallPending) && c.Status != string(CallAwaitingApproval)
}

// Failed reports whether the call ended in an error of any kind.
func (c *CallRecord) Failed() bool { return c.Done() && c.Status != "ok" }

// stepCalls returns the calls of the current step.
func (r *Run) stepCalls() []*CallRecord {
	var out []*CallRecord
	for _, c := range r.Calls {
		if c.Step == r.Step {
			out = append(out, c)
		}
	}
	return out
}

// call returns the call with the fleet id, or nil.
func (r *Run) call(id string) *CallRecord {
	for _, c := range r.Calls {
		if c.ID == id {
			return c
		}
	}
	return nil
}

// finish ends the run.
func (r *Run) finish(t Termination, detail string, now time.Time) {
	r.Status, r.Termination, r.Detail, r.FinishedAt = StatusDone, t, detail, &now
}

// within returns ctx bounded by timeout from now and by the run's deadline, whichever
// comes first.
func (r *Run) within(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	d := time.Now().Add(timeout)
	if !r.Deadline.IsZero() && r.Deadline.Before(d) {
		d = r.Deadline
	}
	return context.WithDeadline(ctx, d)
}
