package events

import (
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Cancel is the data of a cancel event (type [TypeCancel], subject [CancelSubject]): stop
// a call, or answer it without running it if it has not started. Its subject names the
// sender (tenant and role), and executors act on a cancel only from a sender [MayAct]
// allows: the call's owner's role, or an operator role of its tenant. It is stored in the
// events stream, so a cancel published before the call is delivered (still in the calls
// stream, or parked for approval) is found when it is; executors serving the tool also
// hear it at once and cancel the call's context if it is running, and look it up again
// while they hold the call, so one whose message they missed still stops it. The call's
// result says what happened: canceled (the call stopped, or never ran), its normal result
// (it had already finished: the first stored result wins), or interrupted (a
// non-idempotent tool was cut mid-run, its side effect possibly half done).
type Cancel struct {
	Tool   string `json:"tool"`
	CallID string `json:"call_id"`
	RunID  string `json:"run_id,omitempty"`
	// Reason is shown in the call's result (e.g. "run canceled by the user").
	Reason string `json:"reason,omitempty"`
	// By is the sender's own note of who it is, unchecked: the result names the sender
	// of the cancel's subject ([Identity.Describe]), never this.
	By string `json:"by,omitempty"`
}

// CancelID is the event id (and Nats-Msg-Id) of every cancel of callID by sender:
// cancel-<call token>, followed by -<role> for a sender with an identity. Deterministic,
// so that repeated cancels of a call by one sender are one stored message within the
// duplicate window; distinct per role, so that a cancel from a role the executors refuse
// cannot keep a role they accept from canceling; distinct from the call id and
// [ApprovalAnswerID].
func CancelID(callID string, sender Identity) string {
	if sender.Role == "" {
		return "cancel-" + IDToken(callID)
	}
	return "cancel-" + IDToken(callID) + "-" + sender.Role
}

// NewCancel encodes sender's cancel of callID, a call of tool, on
// [CancelSubject](sender, tool, callID), with event id [CancelID](callID, sender) and
// extension runid c.RunID when set. c.Tool and c.CallID are set from tool and callID. A
// cancel is acted on only when sender may act on the call ([MayAct]).
func NewCancel(source string, sender Identity, tool, callID string, c Cancel) (*nats.Msg, error) {
	subj, err := CancelSubject(sender, tool, callID)
	if err != nil {
		return nil, err
	}
	if err := ValidateEventID("call id", callID); err != nil {
		return nil, err
	}
	c.Tool, c.CallID = tool, callID
	e := Event{ID: CancelID(callID, sender), Type: TypeCancel, Source: source, Time: time.Now(), RunID: c.RunID}
	if err := e.SetData(c); err != nil {
		return nil, err
	}
	return Encode(subj, e)
}

// DecodeCancel decodes a cancel. The subject is the authority on which call it stops and
// who sent it ([ParseCancelSubject]); a cancel whose data names another tool or call than
// its subject is refused (invalid_event), and so is one on a subject of another shape.
func DecodeCancel(msg Message, maxBytes int) (Event, Cancel, error) {
	e, c, err := decodeAs[Cancel](msg, maxBytes)
	if err != nil {
		return e, c, err
	}
	tool, callToken, _, ok := ParseCancelSubject(msg.Subject())
	if !ok {
		return e, c, tools.Errorf(tools.CodeInvalidEvent, "cancel %s: %s", e.ID, NotCancelSubject(msg.Subject()))
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

// NotCancelSubject says why subject, which [ParseCancelSubject] refuses, is not a
// cancel's: for the shape before roles (a tenant but no role), that its sender is
// unknown.
func NotCancelSubject(subject string) string {
	if rest, ok := strings.CutPrefix(subject, cancelPrefix); ok && strings.Count(rest, ".") == 2 {
		return fmt.Sprintf("subject %q names a tenant but no role (the cancel subject before roles): its sender is unknown, so it is not acted on; publish on toolfleet.event.cancel.<tool>.<call>.<tenant>.<role>", subject)
	}
	return fmt.Sprintf("subject %q is not a cancel subject: use toolfleet.event.cancel.<tool>.<call>, followed by .<tenant>.<role> for a sender with an identity", subject)
}
