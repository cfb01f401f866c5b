package events

import (
	"encoding/json"
	"time"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// SpecVersion is the CloudEvents version every toolfleet event declares.
const SpecVersion = "1.0"

// ContentType is the data content type of every toolfleet event: the body is JSON.
const ContentType = "application/json"

// Event types. The type of an event must agree with the subject it travels on; see
// [TypeForSubject].
const (
	TypeCall            = "io.toolfleet.tool.call"
	TypeResult          = "io.toolfleet.tool.result"
	TypeApprovalRequest = "io.toolfleet.approval.requested"
	TypeApprovalAnswer  = "io.toolfleet.approval.answered"
	TypeDeadLetter      = "io.toolfleet.call.deadlettered"
	TypeCancel          = "io.toolfleet.tool.cancel"
	typeRunPrefix       = "io.toolfleet.run."
)

// RunType returns the type of a run lifecycle event, io.toolfleet.run.<what>, e.g.
// RunType("step"). what must be a valid event token (see [ValidateToken]).
func RunType(what string) string { return typeRunPrefix + what }

// Status is the outcome of a call as its result reports it.
type Status string

// Statuses of a result.
const (
	StatusOK          Status = "ok"
	StatusError       Status = "error"        // the tool (or the fleet) failed; see Error.Code
	StatusInvalid     Status = "invalid"      // the call or its arguments were refused before running
	StatusDenied      Status = "denied"       // an approval was refused or expired
	StatusTimeout     Status = "timeout"      // the last attempt ran past its deadline
	StatusNoSuchTool  Status = "no_such_tool" // no executor serves the tool
	StatusInterrupted Status = "interrupted"  // a non-idempotent call was cut off and not run again
	StatusForbidden   Status = "forbidden"    // the caller's role or tenant may not call the tool
	StatusCanceled    Status = "canceled"     // a cancel stopped the call, or answered it before it ran
)

// StatusOf maps a failure to the status a result reports; nil is [StatusOK].
func StatusOf(err *tools.Error) Status {
	if err == nil {
		return StatusOK
	}
	switch err.Code {
	case tools.CodeInvalidInput, tools.CodeInputTooLarge, tools.CodeInvalidEvent:
		return StatusInvalid
	case tools.CodeDenied:
		return StatusDenied
	case tools.CodeTimeout:
		return StatusTimeout
	case tools.CodeNoSuchTool:
		return StatusNoSuchTool
	case tools.CodeInterrupted:
		return StatusInterrupted
	case tools.CodeForbidden:
		return StatusForbidden
	case tools.CodeCanceled:
		return StatusCanceled
	}
	return StatusError
}

// Call is the data of a tool call event (type [TypeCall], subject [CallSubject]). The
// call id and run id are the event's id and runid attributes, not data fields.
type Call struct {
	// Tool is the tool's name; it must equal the last token of the subject.
	Tool string `json:"tool"`
	// Arguments are kept exactly as received: a JSON object, or a JSON string holding one
	// (some providers send arguments as a string).
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// ArgumentsRef, instead of Arguments, points at arguments stored by reference (see
	// [PayloadRef]): a call whose arguments are larger than the claim-check size carries
	// them so. The two are exclusive, and the payload must be the caller's tenant's; the
	// executor reads it and validates it like inline arguments.
	ArgumentsRef *PayloadRef `json:"arguments_ref,omitempty"`
	// Metadata is caller-supplied context (user, role, trace notes); tools see it through
	// tools.CallInfo.
	Metadata map[string]string `json:"metadata,omitempty"`
	// Context is the run context of a call made by a planner run for a tool whose
	// definition asks for it (tools.Definition.RunContext); ContextRef, instead, points at
	// it stored as a payload of the caller's tenant when it is larger than the
	// claim-check size. Executors give it only to a tool that asked (tools.CallInfo.Run).
	Context    *tools.RunContext `json:"context,omitempty"`
	ContextRef *PayloadRef       `json:"context_ref,omitempty"`
}

// Result is the data of a tool result event (type [TypeResult], subject [ResultSubject]).
type Result struct {
	Status Status `json:"status"`
	// Output is what the caller (or model) sees: the tool's output on success; on failure
	// the error output the tool's callbacks made of it, if any. An output larger than the
	// claim-check threshold is not here but stored by reference: OutputRef.
	Output json.RawMessage `json:"output,omitempty"`
	// OutputRef points at the output when it was stored by reference (see
	// [PayloadRef]). pkg/client and the planner do so for their callers.
	OutputRef *PayloadRef `json:"output_ref,omitempty"`
	// Error is set whenever Status is not ok.
	Error *tools.Error `json:"error,omitempty"`
	// DurationMS is the wall time from the first attempt's start to the result.
	DurationMS int64 `json:"duration_ms"`
	// Attempts counts the runs of the tool for this call (0 when it never ran).
	Attempts int `json:"attempts"`
	// Executor identifies the replica that produced the result.
	Executor string `json:"executor"`
	// Validated is false when the arguments were not checked against a schema.
	Validated bool `json:"validated"`
	// NoSchemaMode is the tool's noSchemaMode when Validated is false (the tool has no
	// schema): "read-only", "human-approval" or "full". Empty for a validated call.
	NoSchemaMode tools.NoSchemaMode `json:"no_schema_mode,omitempty"`
	// OutputUTF8Repaired is true when the tool's output held bytes that are not UTF-8;
	// they were replaced by U+FFFD so that every JSON reader can read the result.
	OutputUTF8Repaired bool   `json:"output_utf8_repaired,omitempty"`
	Tool               string `json:"tool"`
	CallID             string `json:"call_id"`
	RunID              string `json:"run_id"`
	// Caller is the identity the call was made with (its subject's); zero for an
	// anonymous call. The result is published on the tenant's result subject.
	Caller     Identity  `json:"caller,omitzero"`
	StartedAt  time.Time `json:"started_at,omitzero"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
	// LimitWaitMS is how long the call waited at its executor, not running, for its
	// tool's limits (rate limit, tenant cap) before it started or was refused
	// rate_limited; 0 for a call that did not wait. The time a call spent in the stream
	// before an executor took it shows between its publication and StartedAt.
	LimitWaitMS int64 `json:"limit_wait_ms,omitempty"`
	// AttemptSpans is, for a call the executor ran more than once, when each attempt ran
	// and how each but the last failed (its error code); nil for a call run once, whose
	// one attempt is StartedAt to FinishedAt.
	AttemptSpans []AttemptSpan `json:"attempt_spans,omitempty"`
	// Approval records the decision on a call that waited for approval; nil for a call
	// that never did.
	Approval *Approval `json:"approval,omitempty"`
	// Policy records the decision of the tool's policy hook on the call (see
	// [PolicyRequest]), when its tools-file entry names one; nil otherwise.
	Policy *PolicyRecord `json:"policy,omitempty"`
}

// AttemptSpan is one attempt of a call: when it ran, and the error code it failed with
// (empty for the attempt that succeeded).
type AttemptSpan struct {
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt time.Time  `json:"finished_at"`
	Code       tools.Code `json:"code,omitempty"`
}

// Approval is the record of the decision on a call that waited for approval: who
// decided, when and why, and, when the approver modified the arguments, the call's
// original arguments beside the approved ones that ran. A call whose approval expired
// is recorded with [DecisionExpired] and no approver.
type Approval struct {
	Decision Decision `json:"decision"`
	// By is who answered: the answerer's identity as the answer's subject (or the API
	// caller's token) names it, tenant/role or "anonymous" ([Identity.Describe]).
	By string `json:"by,omitempty"`
	// ClaimedBy is what the answer's own by said: the answerer's note of who it is,
	// unchecked, kept for the record beside By.
	ClaimedBy string    `json:"claimed_by,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	At        time.Time `json:"at"`
	// ArgumentsOriginal and ArgumentsApproved are set only when an approval replaced
	// the call's arguments. Original arguments that went by reference are not copied:
	// ArgumentsOriginalRef points at them.
	ArgumentsOriginal    json.RawMessage `json:"arguments_original,omitempty"`
	ArgumentsOriginalRef *PayloadRef     `json:"arguments_original_ref,omitempty"`
	ArgumentsApproved    json.RawMessage `json:"arguments_approved,omitempty"`
}

// ApprovalRequest is the data of an approval-requested event: a call of an unsafe tool is
// parked until an [ApprovalAnswer] arrives on [ApprovalAnsweredSubject] or ExpiresAt
// passes (then it is denied).
type ApprovalRequest struct {
	Tool      string          `json:"tool"`
	CallID    string          `json:"call_id"`
	RunID     string          `json:"run_id"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// ArgumentsRef is set instead of Arguments when the call's arguments went by
	// reference: read them from the payloads stream ([PayloadRef]).
	ArgumentsRef *PayloadRef       `json:"arguments_ref,omitempty"`
	Metadata     map[string]string `json:"metadata,omitempty"`
	// Reason says why approval is needed (unsafe tool, unvalidated arguments).
	Reason    string    `json:"reason"`
	Validated bool      `json:"validated"`
	ExpiresAt time.Time `json:"expires_at"`
	// AnswerSubject is where the call's own caller publishes its answer
	// ([ApprovalAnsweredSubject] with the call's identity); another role of the tenant
	// answers on the same subject with its own role as the last token, and is heard only
	// if it may call the tool itself.
	AnswerSubject string `json:"answer_subject"`
	// Caller is the identity the call was made with; the request and its answer are on
	// subjects of its tenant.
	Caller Identity `json:"caller,omitzero"`
}

// Decision is an approver's verdict.
type Decision string

// Decisions an approver can give.
const (
	DecisionApprove Decision = "approve"
	DecisionDeny    Decision = "deny"
	// DecisionExpired is recorded (in [Approval]) for a call whose approval did not
	// arrive before it expired; the call is denied. No approver can send it.
	DecisionExpired Decision = "expired"
)

// ApprovalAnswer is the data of an approval-answered event, published on
// [ApprovalAnsweredSubject] (see [NewApprovalAnswer]). The subject names the call; the
// event id is [ApprovalAnswerID] of the call, so that JetStream keeps only the first
// answer to a call within its duplicate window (a replay, or a second and different
// answer, is dropped); it differs from the call id, which the approval request uses as
// its deduplication id in the same stream. Executors also carry out only the first
// answer they see for a parked call.
type ApprovalAnswer struct {
	Decision Decision `json:"decision"`
	// Reason is shown to the caller when the call is denied.
	Reason string `json:"reason,omitempty"`
	// Arguments, when set on an approval, replace the call's arguments; they are
	// validated again before the tool runs.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// By is the answerer's own note of who it is, unchecked: it is recorded as
	// [Approval].ClaimedBy, beside the answerer the subject names ([Approval].By).
	By string `json:"by,omitempty"`
}

// DeadLetter is the data of a call-dead-lettered event (subject [DeadLetterSubject]): a
// message the fleet could not process, with the reason and what was received. It is
// built by [NewDeadLetter], which bounds it so that it can always be stored: the body is
// kept up to a budget (BodyTruncated says when it was cut) and always described by its
// size and SHA-256, and long headers are cut likewise.
type DeadLetter struct {
	Reason     string       `json:"reason"`
	Error      *tools.Error `json:"error,omitempty"`
	Tool       string       `json:"tool,omitempty"`
	CallID     string       `json:"call_id,omitempty"`
	RunID      string       `json:"run_id,omitempty"`
	Subject    string       `json:"subject"`
	Deliveries uint64       `json:"deliveries,omitempty"`
	// Sequence is the message's sequence in the calls stream, when it came from there.
	Sequence uint64 `json:"sequence,omitempty"`
	// Headers and Body are the original message (Body base64-encoded in JSON), within
	// the budget.
	Headers map[string][]string `json:"headers,omitempty"`
	Body    []byte              `json:"body,omitempty"`
	// BodySize and BodySHA256 (hex) describe the whole original body.
	BodySize         int    `json:"body_size"`
	BodySHA256       string `json:"body_sha256"`
	BodyTruncated    bool   `json:"body_truncated,omitempty"`
	HeadersTruncated bool   `json:"headers_truncated,omitempty"`
}

// RunEvent is the data of a run lifecycle event (type [RunType]): free-form for the
// planner, with the common fields named.
type RunEvent struct {
	RunID string `json:"run_id"`
	// Tenant is the run's tenant (empty for an anonymous caller's run): the event is on
	// the tenant's subject ([RunEventSubject]).
	Tenant string `json:"tenant,omitempty"`
	// Step is the run's step the event belongs to (0 is the first step, and is sent).
	Step   int    `json:"step"`
	Tool   string `json:"tool,omitempty"`
	CallID string `json:"call_id,omitempty"`
	// At is when the event happened: the CloudEvent's time, repeated in the data so that
	// a reader of the data alone (SSE) has it. [NewRunEvent] sets it.
	At     time.Time       `json:"at,omitzero"`
	Detail json.RawMessage `json:"detail,omitempty"`
	// Executor and Attempt are set on the events an executor publishes about a call it
	// runs (tool_started, tool_progress): the replica, and the attempt (1 for the first).
	Executor string `json:"executor,omitempty"`
	Attempt  int    `json:"attempt,omitempty"`
	// Seq numbers an attempt's tool_progress events, from 1.
	Seq int `json:"seq,omitempty"`
}

// RunActRefused is the word of the run event an executor publishes when it refuses an
// act on a call of the run ([MayAct]): an approval answer or a cancel from an actor that
// may not act on the call. Its Detail is a [RefusedAct]; the call is left as it was.
const RunActRefused = "act_refused"

// Acts an executor judges, as [RefusedAct].Act names them.
const (
	ActApprovalAnswer = "approval_answer"
	ActCancel         = "cancel"
)

// RefusedAct is the detail of a [RunActRefused] run event: who tried what on whose call,
// and why it was refused (the [Refusal]'s message).
type RefusedAct struct {
	Act     string   `json:"act"`
	Actor   Identity `json:"actor"`
	Owner   Identity `json:"owner"`
	Message string   `json:"message"`
}
