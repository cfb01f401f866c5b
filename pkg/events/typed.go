package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// CallEvent is a decoded tool call: its attributes and its data.
type CallEvent struct {
	Event
	Call Call
	// Caller is the identity the call's subject names (see [Identity]); zero for an
	// anonymous call.
	Caller Identity
}

// RunIDOrSelf returns the run id, or the call id for a call published without one (such
// a call is its own run, and its result goes to toolfleet.result.<call>.<call>).
func (c CallEvent) RunIDOrSelf() string {
	if c.RunID != "" {
		return c.RunID
	}
	return c.ID
}

// CallOptions are the attributes of a call event that are not its data.
type CallOptions struct {
	// Source names the caller (e.g. "/toolfleet/planner"). Required.
	Source string
	// ID is the call id and the event id: any CloudEvents id (see [ValidateEventID]).
	// Required; publishing the same id again is deduplicated.
	ID string
	// RunID groups the calls of one run; empty makes the call its own run.
	RunID string
	// Deadline, when set, is when the caller stops waiting; executors give up on the call
	// then.
	Deadline time.Time
	// TraceParent and TraceState are the W3C trace context, passed on to the tool's
	// execution and its result.
	TraceParent, TraceState string
	// Time is when the call was made; zero means now.
	Time time.Time
	// Caller is the identity the call is made with; the zero Identity is anonymous. It
	// becomes part of the subject ([CallSubject]), where NATS permissions guard it.
	Caller Identity
}

// NewCall encodes a call of c.Tool as a message on [CallSubject](o.Caller, c.Tool), with
// the attributes of o. c carries Arguments or ArgumentsRef, not both.
func NewCall(o CallOptions, c Call) (*nats.Msg, error) {
	subj, err := CallSubject(o.Caller, c.Tool)
	if err != nil {
		return nil, err
	}
	e := Event{ID: o.ID, Type: TypeCall, Source: o.Source, Time: o.Time, RunID: o.RunID,
		Deadline: o.Deadline, TraceParent: o.TraceParent, TraceState: o.TraceState}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	if c.ArgumentsRef != nil { // refused here as DecodeCall would refuse it
		if len(c.Arguments) > 0 {
			return nil, tools.Errorf(tools.CodeInvalidEvent, "call %s: arguments and arguments_ref are exclusive", o.ID)
		}
		if err := c.ArgumentsRef.Check(); err != nil {
			return nil, err
		}
	}
	if err := e.setData(marshalCall(&c)); err != nil {
		return nil, err
	}
	return Encode(subj, e)
}

// DecodeCall decodes a call message. The tool in the data must agree with the subject;
// when the data leaves it out, the subject's tool is taken. Missing arguments read as
// {}. A call carrying arguments_ref must carry no arguments, and its reference must be
// well formed ([PayloadRef.Check]); its Arguments stay nil, to be read from the payload. On error the returned CallEvent holds what could be read (id, run id, tool), so
// the caller can still be answered.
func DecodeCall(msg Message, maxBytes int) (CallEvent, error) {
	var ce CallEvent
	subject := msg.Subject()
	var ok bool
	ce.Call.Tool, ce.Caller, ok = ParseCallSubject(subject)
	e, err := decode(msg, maxBytes, false)
	ce.Event = e
	if err != nil {
		return ce, err
	}
	if !ok {
		return ce, tools.Errorf(tools.CodeInvalidEvent, "call %s: subject %q does not name a valid tool", e.ID, subject)
	}
	subjTool := ce.Call.Tool
	if decodeCallData(e.Data, &ce.Call) {
		return checkCall(ce, subjTool, subject)
	}
	if err := unmarshalCall(e.Data, &ce.Call); err != nil {
		ce.Call.Tool = subjTool
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			return ce, notJSON(e.ID, e.Data)
		}
		return ce, tools.Wrap(tools.CodeInvalidEvent, err, "call "+e.ID+": data does not match the call type: "+err.Error())
	}
	return checkCall(ce, subjTool, subject)
}

// unmarshalCall is json.Unmarshal(data, c) through a copy of *c: handing c itself to
// encoding/json would make every caller's CallEvent escape to the heap, not only the
// callers that get here.
func unmarshalCall(data []byte, c *Call) error {
	v := *c
	err := json.Unmarshal(data, &v)
	*c = v
	return err
}

// checkCall checks a call whose data decoded: its tool agrees with its subject's
// (subjTool), and its arguments are inline or by reference, not both.
func checkCall(ce CallEvent, subjTool, subject string) (CallEvent, error) {
	switch ce.Call.Tool {
	case "":
		ce.Call.Tool = subjTool
	case subjTool:
	default:
		bad := ce.Call.Tool
		ce.Call.Tool = subjTool
		return ce, tools.Errorf(tools.CodeInvalidEvent, "call %s names tool %q but was published on %s", ce.ID, bad, subject)
	}
	if ref := ce.Call.ContextRef; ref != nil {
		if ce.Call.Context != nil {
			return ce, tools.Errorf(tools.CodeInvalidEvent, "call %s has both context and context_ref: send one of them", ce.ID)
		}
		if err := ref.Check(); err != nil {
			return ce, tools.Errorf(tools.CodeInvalidEvent, "call %s: context_ref: %s", ce.ID, tools.AsError(err, tools.CodeInvalidEvent).Message)
		}
	}
	noArgs := len(bytes.TrimSpace(ce.Call.Arguments)) == 0 || bytes.Equal(bytes.TrimSpace(ce.Call.Arguments), []byte("null"))
	if ref := ce.Call.ArgumentsRef; ref != nil {
		if !noArgs {
			return ce, tools.Errorf(tools.CodeInvalidEvent, "call %s has both arguments and arguments_ref: send one of them", ce.ID)
		}
		if err := ref.Check(); err != nil {
			return ce, tools.Errorf(tools.CodeInvalidEvent, "call %s: arguments_ref: %s", ce.ID, tools.AsError(err, tools.CodeInvalidEvent).Message)
		}
		ce.Call.Arguments = nil // read from the payload by whoever runs the call
		return ce, nil
	}
	if noArgs {
		ce.Call.Arguments = []byte("{}")
	}
	return ce, nil
}

// NewResult encodes r as a result message on [ResultSubject](r.Caller.Tenant, r.RunID, r.CallID), with
// event id = call id so a re-published result is deduplicated. The ids must be valid
// event ids: pass a caller's ids through [ReplyID].
//
// The message also says that no message may precede it on its subject
// (Nats-Expected-Last-Subject-Sequence: 0), so JetStream stores one result per call for
// as long as the results stream keeps it, not only within the duplicate window: a
// second result is refused with JetStream error code 10071 (wrong last sequence): the
// call is answered already, by this result's twin.
func NewResult(source string, r Result, attempt int) (*nats.Msg, error) {
	subj, err := ResultSubject(r.Caller.Tenant, r.RunID, r.CallID)
	if err != nil {
		return nil, err
	}
	e := Event{ID: r.CallID, Type: TypeResult, Source: source, Time: time.Now(), RunID: r.RunID, Attempt: attempt}
	if err := e.setData(marshalResult(&r)); err != nil {
		return nil, err
	}
	m, err := Encode(subj, e)
	if err != nil {
		return nil, err
	}
	m.Header[HeaderExpectedLastSubjectSeq] = []string{"0"}
	return m, nil
}

// HeaderExpectedLastSubjectSeq is JetStream's optimistic-concurrency header: the message
// is stored only if the last message on its subject has this sequence (0: none).
const HeaderExpectedLastSubjectSeq = "Nats-Expected-Last-Subject-Sequence"

// Answer returns the result that answers c, addressed to its caller (tool, identity, and
// the caller's ids through [ReplyID]); the caller of Answer fills in the outcome.
func (c CallEvent) Answer() Result {
	return Result{Tool: c.Call.Tool, CallID: ReplyID(c.ID), RunID: ReplyID(c.RunIDOrSelf()), Caller: c.Caller}
}

// DecodeResult decodes a result message.
func DecodeResult(msg Message) (Event, Result, error) {
	return decodeAs[Result](msg, 0)
}

// decodeAs decodes msg and its data as a T.
func decodeAs[T any](msg Message, maxBytes int) (Event, T, error) {
	var v T
	e, err := Decode(msg, maxBytes)
	if err != nil {
		return e, v, err
	}
	err = e.DataAs(&v)
	return e, v, err
}

// NewApprovalAnswer encodes answerer's answer to the approval of callID (a call of tool;
// answerer is of the call's tenant, or zero for a call of an anonymous caller) on
// [ApprovalAnsweredSubject], with event id [ApprovalAnswerID](callID, answerer): the
// first answer of an answerer to a call wins, later ones within the duplicate window are
// dropped by JetStream, and executors carry out only the first answer they accept.
func NewApprovalAnswer(source string, answerer Identity, tool, callID string, a ApprovalAnswer) (*nats.Msg, error) {
	subj, err := ApprovalAnsweredSubject(answerer, tool, callID)
	if err != nil {
		return nil, err
	}
	if a.Decision != DecisionApprove && a.Decision != DecisionDeny {
		return nil, tools.Errorf(tools.CodeInvalidEvent, "approval answer for call %s: decision %q is neither %q nor %q",
			callID, a.Decision, DecisionApprove, DecisionDeny)
	}
	e := Event{ID: ApprovalAnswerID(callID, answerer), Type: TypeApprovalAnswer, Source: source, Time: time.Now()}
	if err := e.SetData(a); err != nil {
		return nil, err
	}
	return Encode(subj, e)
}

// ApprovalAnswerID is the event id (and Nats-Msg-Id) of every answer of answerer to the
// approval of callID: approval-<call token>, followed by -<role> for an answerer with an
// identity. Deterministic, so that one answerer's answers deduplicate; distinct per role,
// so that an answer from a role the executors refuse cannot keep a role they accept from
// answering; distinct from the call id that the approval request uses.
func ApprovalAnswerID(callID string, answerer Identity) string {
	if answerer.Role == "" {
		return "approval-" + IDToken(callID)
	}
	return "approval-" + IDToken(callID) + "-" + answerer.Role
}

// DecodeApprovalAnswer decodes an approval answer; an answer whose decision is neither
// approve nor deny is refused (invalid_event).
func DecodeApprovalAnswer(msg Message, maxBytes int) (Event, ApprovalAnswer, error) {
	e, a, err := decodeAs[ApprovalAnswer](msg, maxBytes)
	if err == nil && a.Decision != DecisionApprove && a.Decision != DecisionDeny {
		_, call, _, _ := ParseApprovalAnswerSubject(msg.Subject())
		err = tools.Errorf(tools.CodeInvalidEvent, "approval answer for call %s: decision %q is neither %q nor %q",
			call, a.Decision, DecisionApprove, DecisionDeny)
	}
	return e, a, err
}

// NewApprovalRequest encodes r as an approval request on
// [ApprovalRequestedSubject](r.Caller.Tenant, r.Tool, r.CallID), with event id r.CallID (a re-published
// request is deduplicated) and extension runid r.RunID; both ids must be valid event ids
// (pass a caller's ids through [ReplyID]). An empty r.AnswerSubject is set to
// [ApprovalAnsweredSubject]. traceParent, when set, is the call's trace context.
func NewApprovalRequest(source string, r ApprovalRequest, traceParent string) (*nats.Msg, error) {
	subj, err := ApprovalRequestedSubject(r.Caller.Tenant, r.Tool, r.CallID)
	if err != nil {
		return nil, err
	}
	if r.AnswerSubject == "" {
		if r.AnswerSubject, err = ApprovalAnsweredSubject(r.Caller, r.Tool, r.CallID); err != nil {
			return nil, err
		}
	}
	e := Event{ID: r.CallID, Type: TypeApprovalRequest, Source: source, Time: time.Now(), RunID: r.RunID,
		TraceParent: traceParent}
	if err := e.SetData(r); err != nil {
		return nil, err
	}
	return Encode(subj, e)
}

// DecodeApprovalRequest decodes an approval request.
func DecodeApprovalRequest(msg Message) (Event, ApprovalRequest, error) {
	return decodeAs[ApprovalRequest](msg, 0)
}
