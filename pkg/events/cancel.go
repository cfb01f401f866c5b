package events

import (
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Cancel is the data of a cancel event (type [TypeCancel], subject [CancelSubject]): stop
// a call, or answer it without running it if it has not started. It is stored in the
// events stream, so a cancel published before the call is delivered (still in the calls
// stream, or parked for approval) is found when it is; executors serving the tool also
// hear it at once and cancel the call's context if it is running. The call's result says
// what happened: canceled (the call stopped, or never ran), its normal result (it had
// already finished: the first stored result wins), or interrupted (a non-idempotent tool
// was cut mid-run, its side effect possibly half done).
type Cancel struct {
	Tool   string `json:"tool"`
	CallID string `json:"call_id"`
	RunID  string `json:"run_id,omitempty"`
	// Reason is shown in the call's result (e.g. "run canceled by the user").
	Reason string `json:"reason,omitempty"`
	// By names who canceled, for the record.
	By string `json:"by,omitempty"`
}

// CancelID is the event id (and Nats-Msg-Id) of every cancel of callID: deterministic,
// so that repeated cancels of a call are one stored message within the duplicate window,
// and distinct from the call id and [ApprovalAnswerID].
func CancelID(callID string) string { return "cancel-" + IDToken(callID) }

// NewCancel encodes a cancel of callID, a call of tool made by a caller of tenant (empty
// for an anonymous one), on [CancelSubject](tenant, tool, callID), with event id
// [CancelID](callID) and extension runid c.RunID when set. c.Tool and c.CallID are set
// from tool and callID.
func NewCancel(source, tenant, tool, callID string, c Cancel) (*nats.Msg, error) {
	subj, err := CancelSubject(tenant, tool, callID)
	if err != nil {
		return nil, err
	}
	if err := ValidateEventID("call id", callID); err != nil {
		return nil, err
	}
	c.Tool, c.CallID = tool, callID
	e := Event{ID: CancelID(callID), Type: TypeCancel, Source: source, Time: time.Now(), RunID: c.RunID}
	if err := e.SetData(c); err != nil {
		return nil, err
	}
	return Encode(subj, e)
}

// DecodeCancel decodes a cancel. The subject is the authority on which call it stops
// ([ParseCancelSubject]); a cancel whose data names another tool or call than its
// subject is refused (invalid_event).
func DecodeCancel(msg Message, maxBytes int) (Event, Cancel, error) {
	e, c, err := decodeAs[Cancel](msg, maxBytes)
	if err != nil {
		return e, c, err
	}
	tool, callToken, _, ok := ParseCancelSubject(msg.Subject())
	if !ok {
		return e, c, tools.Errorf(tools.CodeInvalidEvent, "cancel %s: subject %q is not a cancel subject", e.ID, msg.Subject())
	}
	if c.Tool == "" {
		c.Tool = tool
	}
	if c.Tool != tool || (c.CallID != "" && IDToken(c.CallID) != callToken) {
		return e, c, tools.Errorf(tools.CodeInvalidEvent, "cancel %s names tool %q and call %q but was published on %s",
			e.ID, c.Tool, c.CallID, msg.Subject())
	}
	return e, c, nil
}
