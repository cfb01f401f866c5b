package runs

import (
	"encoding/json"
	"time"

	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// The wire types of the planner's HTTP API, as its JSON has them: every field of the
// schemas of internal/planner/plannerapi/openapi.yaml (a test holds them to it), with
// pkg/events' and pkg/tools' types where those are the wire types. Fields this package
// does not name are ignored on decode, so a newer planner that adds fields still works.

// StartRequest is the body of POST /v1/runs: Input (or Messages) and the run's options.
// Fields left zero are left out, so the planner's defaults apply.
type StartRequest struct {
	Input string `json:"input,omitempty"`
	// Messages is a conversation to continue, in the planner's message format
	// ({"role","content",...}); Input is a shorthand for one user message after it.
	Messages    []json.RawMessage `json:"messages,omitempty"`
	System      string            `json:"system,omitempty"`
	Model       string            `json:"model,omitempty"`
	Tools       []string          `json:"tools,omitempty"`
	ActiveTools []string          `json:"activeTools,omitempty"`
	// ToolChoice is auto (the default), required, none, or one tool's name.
	ToolChoice string            `json:"toolChoice,omitempty"`
	Limits     *Limits           `json:"limits,omitempty"`
	Pick       *bool             `json:"pick,omitempty"`
	Parallel   *bool             `json:"parallel,omitempty"`
	Metadata   map[string]string `json:"metadata,omitempty"`
	// StopWhen ends the run (stop_condition) when a call matches one of its conditions
	// (at most 8); StopHook is a NATS service asked before each step after the first
	// whether the run goes on.
	StopWhen []StopCondition `json:"stopWhen,omitempty"`
	StopHook *events.Hook    `json:"stopHook,omitempty"`
	// PolicyHook is a NATS service asked before each call of the run goes to the fleet:
	// it allows, denies or modifies the call.
	PolicyHook *events.Hook `json:"policyHook,omitempty"`
	// Pause makes the run pause after every step, or after steps that called the named
	// tools, until it is resumed ([Client.Resume]).
	Pause *PauseOptions `json:"pause,omitempty"`
	// Wait asks the planner to answer once the run is done or paused, or after
	// WaitTimeout (a duration such as "30s", at most 1h; default 5m) with the run as it
	// is then.
	Wait        bool   `json:"wait,omitempty"`
	WaitTimeout string `json:"waitTimeout,omitempty"`
}

// StopCondition matches a call that ends its run: a call of Tool (any tool when
// empty) whose output contains OutputContains or matches the regular expression
// OutputMatches (either, when set).
type StopCondition struct {
	Tool           string `json:"tool,omitempty"`
	OutputContains string `json:"outputContains,omitempty"`
	OutputMatches  string `json:"outputMatches,omitempty"`
}

// PauseOptions say when a run pauses by itself, before the model's next step.
type PauseOptions struct {
	AfterEveryStep bool     `json:"afterEveryStep,omitempty"`
	AfterTools     []string `json:"afterTools,omitempty"`
}

// ResumeRequest is the body of POST /v1/runs/{id}/resume, all of it optional. Indices
// name messages of the conversation as the model would be asked it now
// ([Client.ModelMessages]), all as it stands before the edit; messages are in the
// planner's message format.
type ResumeRequest struct {
	Replace []MessageReplacement `json:"replace,omitempty"`
	Drop    []int                `json:"drop,omitempty"`
	// Compact replaces messages From..To-1 by one message holding Summary.
	Compact *Compaction `json:"compact,omitempty"`
	// Input (one user message) and Messages are added after the edited conversation.
	Input    string            `json:"input,omitempty"`
	Messages []json.RawMessage `json:"messages,omitempty"`
	// Limits, if set, replaces the run's limits field by field.
	Limits *Limits `json:"limits,omitempty"`
	// Pause, if set, replaces the run's pause options (&PauseOptions{}: pause no more).
	Pause *PauseOptions `json:"pause,omitempty"`
}

// MessageReplacement replaces the message at Index.
type MessageReplacement struct {
	Index   int             `json:"index"`
	Message json.RawMessage `json:"message"`
}

// Compaction replaces messages From..To-1 with one message (Role user by default)
// whose text is Summary.
type Compaction struct {
	From    int    `json:"from"`
	To      int    `json:"to"`
	Summary string `json:"summary"`
	Role    string `json:"role,omitempty"`
}

// Pause says why and since when a run is paused: Reason after_step, after_tool (Tool)
// or requested (By, the caller who paused it, and Why, the reason it gave); Step is the
// step it goes on with.
type Pause struct {
	At     time.Time `json:"at"`
	Step   int       `json:"step"`
	Reason string    `json:"reason"`
	Tool   string    `json:"tool,omitempty"`
	By     string    `json:"by,omitempty"`
	Why    string    `json:"why,omitempty"`
}

// Limits bound a run (see the planner's documentation for the defaults).
type Limits struct {
	MaxSteps       int     `json:"maxSteps,omitempty"`
	Timeout        string  `json:"timeout,omitempty"` // a Go duration, e.g. "2m"
	TokenBudget    int     `json:"tokenBudget,omitempty"`
	CostBudget     float64 `json:"costBudget,omitempty"`
	ErrorThreshold int     `json:"errorThreshold,omitempty"`
	// LoopThreshold is how many times the same call may repeat before LoopAction: warn,
	// stop or inject (a warning to the model).
	LoopThreshold int    `json:"loopThreshold,omitempty"`
	LoopAction    string `json:"loopAction,omitempty"`
	MaxDepth      int    `json:"maxDepth,omitempty"`
	// ContextBudget bounds the tokens of the conversation the model is asked with.
	ContextBudget int `json:"contextBudget,omitempty"`
}

// Usage counts a model's tokens.
type Usage struct {
	InputTokens  int `json:"inputTokens"`
	OutputTokens int `json:"outputTokens"`
}

// Run statuses and the terminations a client most often tests for; Termination has
// more (max_steps, timeout, token_budget, error_threshold, loop_detected, model_error,
// tool_required, stop_condition, stop_hook, cost_budget, storage_error).
const (
	StatusRunning = "running"
	StatusPaused  = "paused"
	StatusDone    = "done"
	// StatusAwaitingApproval: a running run whose calls wait on a person only (its
	// ApprovalDeadline says until when).
	StatusAwaitingApproval = "awaiting_approval"

	TerminationCompleted = "completed"
	TerminationCanceled  = "canceled"
)

// Run is a run as GET /v1/runs/{id} answers it.
type Run struct {
	ID          string            `json:"id"`
	ParentID    string            `json:"parentId,omitempty"`
	Depth       int               `json:"depth"`
	Status      string            `json:"status"`
	Termination string            `json:"termination,omitempty"`
	Detail      string            `json:"detail,omitempty"`
	Answer      string            `json:"answer,omitempty"`
	Model       string            `json:"model"`
	Steps       int               `json:"steps"`
	Calls       []Call            `json:"calls"`
	Tokens      int               `json:"tokens"`
	Usage       Usage             `json:"usage"`
	Cost        float64           `json:"cost"`
	CostBudget  float64           `json:"costBudget,omitempty"`
	Warnings    []string          `json:"warnings,omitempty"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	Tenant      string            `json:"tenant,omitempty"`
	Role        string            `json:"role,omitempty"`
	CreatedAt   time.Time         `json:"createdAt"`
	FinishedAt  *time.Time        `json:"finishedAt,omitempty"`
	DurationMS  int64             `json:"durationMs"`
	// Offered is, per step, when the model was asked, how long it took, and the tools
	// it was offered (with the picker's scores when it chose them).
	Offered []StepTools `json:"offered,omitempty"`
	// The run's tree totals: it and its nested runs, which its budgets hold for.
	TreeSteps  int      `json:"treeSteps"`
	TreeTokens int      `json:"treeTokens"`
	TreeUsage  Usage    `json:"treeUsage"`
	TreeCost   float64  `json:"treeCost"`
	Tools      []string `json:"tools,omitempty"`
	Disabled   []string `json:"disabled,omitempty"`
	Canceled   *Cancel  `json:"canceled,omitempty"`
	Turn       int      `json:"turn,omitempty"`
	// PauseOn says when the run pauses by itself.
	PauseOn *PauseOptions `json:"pauseOn,omitempty"`
	// Paused, while Status is paused, says since when and why.
	Paused *Pause `json:"paused,omitempty"`
	// PauseRequested, while the run runs, is a pause asked for its next step boundary.
	PauseRequested *PauseRequest `json:"pauseRequested,omitempty"`
	// ForkedFrom, on a fork, names the run and step it was forked from.
	ForkedFrom *ForkPoint `json:"forkedFrom,omitempty"`
	Glance
}

// StepTools is one step of a run: the tools its model was offered, when it was asked
// and how long it took to answer (ModelMS is absent while it thinks, and under 1 ms).
type StepTools struct {
	Step    int       `json:"step"`
	Tools   []string  `json:"tools"`
	AskedAt time.Time `json:"askedAt,omitzero"`
	ModelMS int64     `json:"modelMs,omitempty"`
	// Picked are the picker's choices, when it chose the tools.
	Picked []Picked `json:"picked,omitempty"`
}

// Picked is a tool the picker chose for a step, with its score (0..1) and why.
type Picked struct {
	Name       string          `json:"name"`
	Score      float64         `json:"score"`
	Reason     string          `json:"reason,omitempty"`
	Provenance json.RawMessage `json:"provenance,omitempty"`
}

// PauseRequest is a pause asked for a running run's next step boundary: by whom, why
// and when.
type PauseRequest struct {
	By     string    `json:"by,omitempty"`
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at,omitzero"`
}

// Outcomes of a finished run (Glance.Outcome): how its calls went.
const (
	OutcomeClean      = "clean"
	OutcomeToolErrors = "tool_errors"
	OutcomeDenied     = "denied"
)

// Glance is what a run's view and its list item both show at a glance: until when it
// waits on a person, how its calls went, and who paused it, why and when.
type Glance struct {
	// ApprovalDeadline, while Status is awaiting_approval, is when its unanswered
	// approvals are denied.
	ApprovalDeadline *time.Time `json:"approvalDeadline,omitempty"`
	// Outcome, once the run is done: clean, tool_errors (a call ended in error or
	// timeout) or denied (an approval was denied or expired).
	Outcome    string `json:"outcome,omitempty"`
	ToolErrors int    `json:"toolErrors"`
	Denials    int    `json:"denials"`
	// PausedBy, PauseReason and PausedAt, while Status is paused: who asked (empty
	// when the run's own pause rule fired), why (the request's reason, or the rule:
	// afterEveryStep, afterTools: TOOL) and since when.
	PausedBy    string     `json:"pausedBy,omitempty"`
	PauseReason string     `json:"pauseReason,omitempty"`
	PausedAt    *time.Time `json:"pausedAt,omitempty"`
}

// Done reports whether the run has ended (its Termination says how).
func (r *Run) Done() bool { return r.Status == StatusDone }

// Awaiting returns the run's calls that wait for an approval.
func (r *Run) Awaiting() []Call {
	var out []Call
	for _, c := range r.Calls {
		if c.Status == CallAwaitingApproval {
			out = append(out, c)
		}
	}
	return out
}

// Cancel says who canceled a run, why and when.
type Cancel struct {
	By     string    `json:"by,omitempty"`
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at"`
}

// Call statuses before a result; a call with its result has the result's status (ok,
// error, invalid, denied, timeout, canceled, interrupted, no_such_tool, ...).
const (
	CallPending          = "pending"
	CallAwaitingApproval = "awaiting_approval"
)

// Call is one tool call of a run, with its timeline.
type Call struct {
	ID                string           `json:"id"`
	ModelCallID       string           `json:"modelCallId"`
	Name              string           `json:"name"`
	Arguments         json.RawMessage  `json:"arguments,omitempty"`
	Step              int              `json:"step"`
	Status            string           `json:"status"`
	Output            json.RawMessage  `json:"output,omitempty"`
	Error             *tools.Error     `json:"error,omitempty"`
	Attempts          int              `json:"attempts,omitempty"`
	Validated         bool             `json:"validated"`
	Executor          string           `json:"executor,omitempty"`
	NoSchemaMode      string           `json:"noSchemaMode,omitempty"`
	Approval          *events.Approval `json:"approval,omitempty"`
	ArgumentsOriginal json.RawMessage  `json:"argumentsOriginal,omitempty"`
	// Policy are the decisions of the policy hooks asked about the call.
	Policy []events.PolicyRecord `json:"policy,omitempty"`
	// Subs, on a call of a composite tool, are its sub-calls, depth first.
	Subs []SubCall `json:"subs,omitempty"`
	// ArgumentsRef is set instead of Arguments when they went by reference.
	ArgumentsRef *events.PayloadRef `json:"argumentsRef,omitempty"`
	// Nested is what a run_agent call's nested run used, charged to this run.
	Nested *NestedCharge `json:"nested,omitempty"`
	Local  bool          `json:"local,omitempty"`
	// The call's timeline: called, parked for approval, started by its executor (after
	// LimitWaitMS waiting for the tool's limits), each attempt, finished.
	CalledAt            time.Time            `json:"calledAt"`
	ApprovalRequestedAt *time.Time           `json:"approvalRequestedAt,omitempty"`
	StartedAt           *time.Time           `json:"startedAt,omitempty"`
	LimitWaitMS         int64                `json:"limitWaitMs,omitempty"`
	AttemptSpans        []events.AttemptSpan `json:"attemptSpans,omitempty"`
	FinishedAt          *time.Time           `json:"finishedAt,omitempty"`
	DurationMS          int64                `json:"durationMs,omitempty"`
	// ApprovalExpiresAt is when its approval request is denied unanswered;
	// ApprovalWaitMS how long it was parked for approval (not in DurationMS).
	ApprovalExpiresAt *time.Time `json:"approvalExpiresAt,omitempty"`
	ApprovalWaitMS    int64      `json:"approvalWaitMs,omitempty"`
}

// NestedCharge is what a nested run (a run_agent call's) used: Seq orders the charges.
type NestedCharge struct {
	Seq   int     `json:"seq"`
	Usage Usage   `json:"usage"`
	Cost  float64 `json:"cost,omitempty"`
	Steps int     `json:"steps,omitempty"`
}

// SubCall is a sub-call of a composite call of a run: its id is the composite call's,
// "-sub-" and its position from 1; it waits for an approval like a call, and is
// answered by its id.
type SubCall struct {
	ID                  string                `json:"id"`
	Name                string                `json:"name"`
	Validated           bool                  `json:"validated"`
	Status              string                `json:"status"`
	Policy              []events.PolicyRecord `json:"policy,omitempty"`
	Approval            *events.Approval      `json:"approval,omitempty"`
	ApprovalRequestedAt *time.Time            `json:"approvalRequestedAt,omitempty"`
	ApprovalExpiresAt   *time.Time            `json:"approvalExpiresAt,omitempty"`
	FinishedAt          *time.Time            `json:"finishedAt,omitempty"`
}

// FollowUp is the body of POST /v1/runs/{id}/messages: a message that continues the
// run (a run that ended is reopened; a running one sees it at its next step).
type FollowUp struct {
	Input    string            `json:"input,omitempty"`
	Messages []json.RawMessage `json:"messages,omitempty"`
	// ID is an idempotency key: a follow-up whose id the run has taken is not added
	// again.
	ID string `json:"id,omitempty"`
	// Tools changes the run's tools with the follow-up.
	Tools *ToolsChange `json:"tools,omitempty"`
	// Wait and WaitTimeout are as [StartRequest]'s: the answer comes once the run is
	// done again (or after WaitTimeout).
	Wait        bool   `json:"wait,omitempty"`
	WaitTimeout string `json:"waitTimeout,omitempty"`
}

// ToolsChange enables and disables tools of a run for its next steps
// ([Client.ChangeTools], [FollowUp]), with a Reminder to the model; ID makes a retried
// change count once.
type ToolsChange struct {
	Enable   []string `json:"enable,omitempty"`
	Disable  []string `json:"disable,omitempty"`
	Reminder string   `json:"reminder,omitempty"`
	ID       string   `json:"id,omitempty"`
}

// Message is one message of a run's conversation ([Client.Messages]): a user's text,
// the model's text and tool calls, or the tools' results.
type Message struct {
	// Role is user, assistant or tool.
	Role        string       `json:"role"`
	Text        string       `json:"text,omitempty"`
	ToolCalls   []ToolCall   `json:"toolCalls,omitempty"`
	ToolResults []ToolResult `json:"toolResults,omitempty"`
}

// ToolCall is a call the model asked for in a message.
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// ToolResult is a tool's result as the model is given it.
type ToolResult struct {
	CallID  string          `json:"callId"`
	Name    string          `json:"name"`
	Content json.RawMessage `json:"content"`
	IsError bool            `json:"isError,omitempty"`
}

// Views of a run's conversation ([Client.Messages]).
const (
	// ViewRun is the run's record of its conversation, with what resume edits replaced.
	ViewRun = "run"
	// ViewModel, for a paused run, is the conversation as its model will be asked it,
	// with the edits applied: the indices a [ResumeRequest] names.
	ViewModel = "model"
)

// Answer is an approval's answer (POST /v1/approvals/{callId}).
type Answer struct {
	// Decision is "approve" or "deny".
	Decision string `json:"decision"`
	Reason   string `json:"reason,omitempty"`
	// Arguments, on an approval, replace the call's (checked against the tool's schema).
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// By names the approver; default: the token's identity.
	By string `json:"by,omitempty"`
}

// RunFilter selects runs for [Client.ListRuns]; zero fields do not filter.
type RunFilter struct {
	Status      string // running, awaiting_approval, paused or done
	Termination string
	Outcome     string            // clean, tool_errors or denied
	Metadata    map[string]string // runs whose metadata has every key with its value
	Tool        string            // runs that called this tool
	Parent      string            // the nested runs of this run
	ForkedFrom  string            // the forks of this run
	Since       time.Time
	Until       time.Time
	Query       string // a case-insensitive substring of the input
	Limit       int    // 1 to 500; default 50
	Cursor      string // the previous page's Next
}

// RunPage is a page of runs, newest first; Next is the cursor of the next page, empty
// on the last.
type RunPage struct {
	Runs []RunSummary `json:"runs"`
	Next string       `json:"next,omitempty"`
}

// RunSummary is a run as the runs list shows it.
type RunSummary struct {
	ID               string     `json:"id"`
	Status           string     `json:"status"`
	Termination      string     `json:"termination,omitempty"`
	Detail           string     `json:"detail,omitempty"`
	Model            string     `json:"model"`
	Tenant           string     `json:"tenant,omitempty"`
	Role             string     `json:"role,omitempty"`
	ParentID         string     `json:"parentId,omitempty"`
	Depth            int        `json:"depth"`
	CreatedAt        time.Time  `json:"createdAt"`
	FinishedAt       *time.Time `json:"finishedAt,omitempty"`
	Steps            int        `json:"steps"`
	Calls            int        `json:"calls"`
	Tools            []string   `json:"tools,omitempty"`
	Input            string     `json:"input,omitempty"`
	Tokens           int        `json:"tokens"`
	Cost             float64    `json:"cost"`
	PendingApprovals int        `json:"pendingApprovals"`
	// DurationMS is how long it ran (until now while it runs, pauses left out).
	DurationMS int64             `json:"durationMs"`
	Metadata   map[string]string `json:"metadata,omitempty"`
	Glance
	ForkedFrom *ForkPoint `json:"forkedFrom,omitempty"`
}

// ApprovalFilter selects approvals for [Client.ListApprovals].
type ApprovalFilter struct {
	Status string // pending (the default), answered or all
	Limit  int
	Cursor string
}

// ApprovalPage is a page of approvals: pending first (oldest first), then answered
// (newest first).
type ApprovalPage struct {
	Approvals []Approval `json:"approvals"`
	Next      string     `json:"next,omitempty"`
}

// Approval is a call that asked for an approval, and its answer once it has one.
type Approval struct {
	CallID string `json:"callId"`
	RunID  string `json:"runId,omitempty"`
	Tool   string `json:"tool"`
	// ParentCallID, for a sub-call of a composite call, is the composite call's id.
	ParentCallID string             `json:"parentCallId,omitempty"`
	Arguments    json.RawMessage    `json:"arguments,omitempty"`
	ArgumentsRef *events.PayloadRef `json:"argumentsRef,omitempty"`
	Reason       string             `json:"reason,omitempty"`
	RequestedAt  time.Time          `json:"requestedAt"`
	ExpiresAt    *time.Time         `json:"expiresAt,omitempty"`
	Caller       events.Identity    `json:"caller"`
	AnswerableBy struct {
		Roles []string `json:"roles"`
	} `json:"answerableBy"`
	// Status is pending, approved, denied, expired or canceled.
	Status   string           `json:"status"`
	Decision *events.Approval `json:"approval,omitempty"`
	// AnsweredAt, By and ClaimedBy, once answered: when, who (the answerer's identity;
	// the canceler's for a cancel; empty for an expiry) and who the answer said.
	AnsweredAt *time.Time `json:"answeredAt,omitempty"`
	By         string     `json:"by,omitempty"`
	ClaimedBy  string     `json:"claimedBy,omitempty"`
}

// toolList is the answer of GET /v1/tools.
type toolList struct {
	Tools []Tool `json:"tools"`
}

// Tool is a tool of the catalog the caller may call, with how the fleet serves it now.
type Tool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	Parameters   json.RawMessage `json:"parameters,omitempty"`
	Roles        []string        `json:"roles,omitempty"`
	Tenants      []string        `json:"tenants,omitempty"`
	Safe         bool            `json:"safe"`
	ReadOnly     bool            `json:"readOnly,omitempty"`
	Capabilities []string        `json:"capabilities,omitempty"`
	NoSchemaMode string          `json:"noSchemaMode,omitempty"`
	Executors    int             `json:"executors"`
	ExecutorIDs  []string        `json:"executorIds,omitempty"`
	Waiting      uint64          `json:"waiting"`
	InFlight     uint64          `json:"inFlight"`
	Recent       struct {
		Window string `json:"window"`
		Calls  int    `json:"calls"`
		Errors int    `json:"errors"`
	} `json:"recent"`
}

// Event is one event of a run, as GET /v1/runs/{id}/events streams it.
type Event struct {
	// Seq is the event's sequence on the events stream: give it back to [Client.Follow]
	// to resume after it.
	Seq uint64
	// What is the event's kind: started, step_started, text_delta, tool_call_started,
	// model_answered, tool_called, tool_started, tool_progress, tool_result, tool_error,
	// approval_needed, approval_answered, loop_detected, paused, resumed, done.
	What string
	// Data is the event's data. Its Tool names the tool of an event about a call
	// ([Client.Follow] takes it from the detail where the planner puts it there).
	Data EventData
}

// EventData is a run event's data: the event contract's own type.
type EventData = events.RunEvent
