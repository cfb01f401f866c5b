package runrec

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"time"

	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/pick"
)

// Status is where a run is in its life.
type Status string

const (
	// StatusRunning: the planner is asking the model or waiting for tool results.
	StatusRunning Status = "running"
	// StatusDone: the run ended; Termination says why.
	StatusDone Status = "done"
	// StatusPaused: the run waits at a step boundary for a resume (the planner's
	// pause.go).
	StatusPaused Status = "paused"
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
	// could not pay for the shortest answer of its next model call (package budget).
	TerminationTokenBudget Termination = "token_budget"
	// TerminationCostBudget: what the run's tree had left of Limits.CostBudget could
	// not pay for the shortest answer of its next model call (package budget), or the
	// calls of its step would have taken its cost over; a step's calls that would are
	// not run.
	TerminationCostBudget Termination = "cost_budget"
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
	// TerminationStopCondition: a call matched one of the run's stopWhen conditions; the
	// run's answer is that call's output, Detail says which condition.
	TerminationStopCondition Termination = "stop_condition"
	// TerminationStopHook: the run's stop hook answered stop (Detail: its reason), or
	// could not be asked and the hook's onError is stop.
	TerminationStopHook Termination = "stop_hook"
)

// Run is a run: its control state, and the conversation and calls it accumulated.
//
// Where it lives: the control state — the fields below but Messages, Warnings, the
// Offered and RetriedSteps of earlier steps, and the earlier steps' Calls — is one entry
// of the runs KV bucket, changed only by compare-and-set on its revision, so any planner
// replica can continue any run. Its size does not grow with the run's length (see
// [Run.Control]). What a run accumulates is written once, in the run log (on the
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
	// ForkedFrom is set on a fork: the run and step it was forked from (fork.go).
	ForkedFrom *ForkPoint `json:"forkedFrom,omitempty"`

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
	Controls

	// InputPreview is the first inputPreviewRunes characters of the run's input text (its
	// last user message), written once at the start: what run lists show and search
	// (runindex.go) without reading the run log.
	InputPreview string `json:"inputPreview,omitempty"`
	// CallCount counts the calls the model made in the run, and Called names the tools
	// they called (distinct, in the order of their first call, at most maxCalledTools):
	// run lists show them, and the control state keeps only the current step's calls.
	CallCount int      `json:"callCount,omitempty"`
	Called    []string `json:"called,omitempty"`
	// ToolErrors counts the run's calls whose result was an error or a timeout
	// (IsToolError), Denials its approvals denied or expired (IsDenial), over all its
	// turns: what OutcomeOf tells at a glance.
	ToolErrors int `json:"toolErrors,omitempty"`
	Denials    int `json:"denials,omitempty"`
	// Settled, in the control state, are the calls of the step before Calls' that
	// asked for an approval, as they ended (no arguments, no outputs): a result that
	// completes a step is stored with the next step's calls, and the lists (the run
	// index) learn from Settled how each approval ended.
	Settled []*CallRecord `json:"settled,omitempty"`
	// PausedMS is how long the run was paused before its current pause: its duration
	// leaves it out (DurationMS).
	PausedMS int64 `json:"pausedMs,omitempty"`

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
	// charged to this run while they run (package budget): the run's tree totals (GET
	// /v1/runs/{id}'s treeUsage, treeCost, treeSteps) are its own plus Nested, and its
	// budgets are checked against them. TreeSeq counts the changes of its tree totals,
	// so that its parent keeps the latest of its charges; NestedTurn is Nested's steps
	// when the current turn began, for MaxSteps.
	Nested     Totals     `json:"nested,omitzero"`
	TreeSeq    int        `json:"treeSeq,omitempty"`
	NestedTurn NestedTurn `json:"NestedTurn,omitzero"`
	// Reserved holds, from the run's budgets, the answers of model calls under way in
	// its nested runs: the most each can cost, until it is charged (package budget).
	Reserved []Reservation `json:"reserved,omitempty"`
	// StopWhen and StopHook are the run's custom stop conditions (stop.go); StopMatch
	// is the condition a call of the current step matched, until the step completes.
	StopWhen  []StopCondition `json:"stopWhen,omitempty"`
	StopHook  *events.Hook    `json:"stopHook,omitempty"`
	StopMatch *StopMatch      `json:"StopMatch,omitempty"`
	// PolicyHook is asked before each call of the run is published (policy.go).
	PolicyHook *events.Hook `json:"policyHook,omitempty"`
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
	Loop LoopWindow `json:"loop,omitzero"`
	// Offered records, per step, the tools the model was offered: the only tools it may
	// call at that step. Under toolChoice "none" it may call none, under a named tool
	// only that one. The control state keeps the current step's only.
	Offered []StepTools `json:"offered,omitempty"`
	// RetriedSteps lists the steps whose model answer had no tool call under toolChoice
	// "required", so the model was asked again. The control state keeps the last only.
	RetriedSteps []int `json:"retriedSteps,omitempty"`

	// Lease, while set, says which replica takes the current step itself, and until
	// when; another takes it over when it runs out (see local.go).
	Lease *StepLease `json:"lease,omitempty"`

	// TraceParent and TraceState are the W3C trace context of the run's span, when
	// tracing is on: its model calls and tool calls join the run's trace.
	TraceParent string `json:"traceparent,omitempty"`
	TraceState  string `json:"tracestate,omitempty"`

	CreatedAt  time.Time  `json:"createdAt"`
	Deadline   time.Time  `json:"deadline"`
	FinishedAt *time.Time `json:"finishedAt,omitempty"`
}

// LoopWindow is what loop detection needs of the calls made so far: the key of the last
// one and the length of the run of identical calls it ends.
type LoopWindow struct {
	Key   string `json:"key,omitempty"`
	Count int    `json:"count,omitempty"`
}

// Control returns the part of r the runs bucket stores: r without the conversation,
// the warnings, the earlier steps' tool sets and retries, and without the calls'
// arguments (in the step record) and outputs (in the results stream, or in the step
// record for calls the planner answered itself). Its size is bounded by the run's
// request and one step's calls, never by the run's length. r is not modified.
func (r *Run) Control() *Run {
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

// Caller is the identity the run acts with.
func (r *Run) Caller() events.Identity { return events.Identity{Tenant: r.Tenant, Role: r.Role} }

// OfferedAt returns the tool set recorded for step, or nil for a step taken before tool
// sets were recorded.
func (r *Run) OfferedAt(step int) *StepTools {
	for i := len(r.Offered) - 1; i >= 0; i-- {
		if r.Offered[i].Step == step {
			return &r.Offered[i]
		}
	}
	return nil
}

// StepCalls returns the calls of the current step.
func (r *Run) StepCalls() []*CallRecord {
	var out []*CallRecord
	for _, c := range r.Calls {
		if c.Step == r.Step {
			out = append(out, c)
		}
	}
	return out
}

// Call returns the call with the fleet id, or nil.
func (r *Run) Call(id string) *CallRecord {
	for _, c := range r.Calls {
		if c.ID == id {
			return c
		}
	}
	return nil
}

// Finish ends the run.
func (r *Run) Finish(t Termination, detail string, now time.Time) {
	r.Status, r.Termination, r.Detail, r.FinishedAt = StatusDone, t, detail, &now
}

// Within returns ctx bounded by timeout from now and by the run's deadline, whichever
// comes first.
func (r *Run) Within(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	d := time.Now().Add(timeout)
	if !r.Deadline.IsZero() && r.Deadline.Before(d) {
		d = r.Deadline
	}
	return context.WithDeadline(ctx, d)
}

// Controls is what callers change on a run while it lasts (the planner's control.go,
// messages.go, availability.go): part of the control state, embedded in [Run] (its JSON
// fields are the run's). Its size is bounded: messages are in the run log, counted here.
type Controls struct {
	// Canceled says who canceled the run, when and why (Termination canceled).
	Canceled *RunCancel `json:"canceled,omitempty"`
	// Sequential (parallel: false in the request) runs a step's calls one after another,
	// in the model's order: each is published when the one before has its result.
	Sequential bool `json:"sequential,omitempty"`
	// Disabled lists the tools disabled for the run's next steps (POST
	// /v1/runs/{id}/tools): not offered, and refused (not_allowed) when called.
	Disabled []string `json:"disabled,omitempty"`
	// Injected counts the message records added to the run after its start (follow-ups
	// and reminders, toolfleet.runlog.<run>.msg.<k>); Seen is how many of them the model
	// call of the last applied step saw (each step record keeps its own Seen).
	Injected int `json:"injected,omitempty"`
	Seen     int `json:"seen,omitempty"`
	// Actors are the callers other than the owner who acted on the run (a follow-up, a
	// tools change): from then on the run is offered and allowed only the tools that its
	// owner and every actor may call (auth.go).
	Actors []events.Identity `json:"actors,omitempty"`
	// Turn counts continuations (0: the run as started); TurnStart is the step at which
	// the current one began: MaxSteps counts from it.
	Turn      int `json:"turn,omitempty"`
	TurnStart int `json:"turnStart,omitempty"`
	// PauseRequested is a pause asked for the run's next step boundary (pause.go).
	PauseRequested *PauseRequest `json:"pauseRequested,omitempty"`
}

// RunCancel records a run's cancellation.
type RunCancel struct {
	By     string    `json:"by,omitempty"`
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at"`
}

// ToolsChange enables and disables tools of a run for its next steps: the body of POST
// /v1/runs/{id}/tools, and the "tools" of a follow-up.
type ToolsChange struct {
	// Enable makes tools available again; a tool outside a run's explicit tool set is
	// added to it (when the caller may call it).
	Enable []string `json:"enable,omitempty"`
	// Disable takes tools away: they are not offered, and a call of one is refused with
	// not_allowed.
	Disable []string `json:"disable,omitempty"`
	// Reminder, if set, is a message the model sees at its next step (a user message,
	// kept in the conversation).
	Reminder string `json:"reminder,omitempty"`
	// ID is the client's id of the change (an idempotency key, for a change with a
	// reminder: a repeat adds the reminder once).
	ID string `json:"id,omitempty"`
}

// Empty reports whether c enables and disables nothing.
func (c *ToolsChange) Empty() bool {
	return c == nil || len(c.Enable) == 0 && len(c.Disable) == 0
}

// Add counts the call with key next in the window and returns how many calls at the end
// of the run's calls, counting this one, are the same call. The window keeps a hash of
// the last key only, so its size does not grow with the run or with the arguments.
func (w *LoopWindow) Add(next string) int {
	sum := sha256.Sum256([]byte(next))
	h := hex.EncodeToString(sum[:16])
	if w.Key == h {
		w.Count++
	} else {
		w.Key, w.Count = h, 1
	}
	return w.Count
}

// StepLease says that replica Owner takes step Step of the run itself until Until.
type StepLease struct {
	Owner string    `json:"owner"`
	Step  int       `json:"step"`
	Until time.Time `json:"until"`
}

// Live reports whether the lease holds step at now.
func (l *StepLease) Live(step int, now time.Time) bool {
	return l != nil && l.Step == step && now.Before(l.Until)
}

// StopCondition ends a run when a call of the run matches it, once the call's step has
// all its results (like a final tool): the run's answer is the matching call's output.
// A condition with only Tool matches a successful call of that tool; OutputContains and
// OutputMatches also require the output to contain a substring or match an RE2
// regular expression (linear in the output's size), and without Tool match a
// successful call of any tool. The output is matched as text when it is a JSON
// string, as its JSON text otherwise, and only its first 64 KiB (the planner's stop.go).
type StopCondition struct {
	Tool           string `json:"tool,omitempty"`
	OutputContains string `json:"outputContains,omitempty"`
	OutputMatches  string `json:"outputMatches,omitempty"`
}

// StopMatch records the condition a call matched, until its step completes.
type StopMatch struct {
	CallID string `json:"callId"`
	Detail string `json:"detail"`
}

// StepsTaken is how many steps of r the model answered: the recorded ones, and the
// answer that completed the run, which has no record. A step a stop condition ended
// before its model call (max_steps, timeout, token_budget, …) does not count.
func (r *Run) StepsTaken() int {
	if r.AnswerUnrecorded() {
		return r.Step + 1
	}
	return r.Recorded
}

// AnswerUnrecorded reports whether r ended with the model's answer at its step, which
// has no record in the run log (see runstore's assembly of a run).
func (r *Run) AnswerUnrecorded() bool {
	return r.Status == StatusDone && r.Termination == TerminationCompleted && r.Recorded <= r.Step
}

// CountCall counts a call made by the model (CallCount).
func (r *Run) CountCall() { r.CallCount++ }

// NoteCalled adds tool to Called: a call of it went out (to the fleet, or as a nested
// run); a call the planner refused does not.
func (r *Run) NoteCalled(tool string) {
	if !slices.Contains(r.Called, tool) && len(r.Called) < maxCalledTools {
		r.Called = append(r.Called, tool)
	}
}

// InputPreview is the start of the input text of a run whose input is msgs: its last
// user message's.
func InputPreview(msgs []provider.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == provider.RoleUser && msgs[i].Text != "" {
			return firstRunes(msgs[i].Text, inputPreviewRunes)
		}
	}
	return ""
}

// firstRunes returns the first n characters of s.
func firstRunes(s string, n int) string {
	i := 0
	for pos := range s {
		if i == n {
			return s[:pos]
		}
		i++
	}
	return s
}

const (
	// inputPreviewRunes is how much of a run's input InputPreview keeps (and lists' q
	// searches).
	inputPreviewRunes = 200
	// maxCalledTools bounds Run.Called.
	maxCalledTools = 64
)
