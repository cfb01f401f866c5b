package events

import (
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"unicode/utf8"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Ids. CloudEvents allows any non-empty string as an event id (a UUID, a URN such as
// urn:uuid:…, a path), and toolfleet accepts any: the caller's id is the call id, and its
// result carries it back. Only the NATS subjects and KV keys that name a call need a
// restricted alphabet, so ids reach them through [IDToken]:
//
//   - an id of 1 to 128 letters, digits, '_' or '-' (the providers' tool call ids, UUIDs,
//     NUIDs, ULIDs) is its own token;
//   - any other id becomes "=" followed by the unpadded base64url SHA-256 of its bytes
//     (44 characters), e.g. IDToken("urn:uuid:1") = "=…". '=' never appears in the first
//     kind, so the two kinds never collide; a token of the second form maps to itself.
//
// A result is published on toolfleet.result.<IDToken(run)>.<IDToken(call)>; its ce-id,
// Nats-Msg-Id and call_id are the original id ([ReplyID]).

// MaxIDBytes bounds an event id, a run id and any other id attribute. Longer ids are not
// refused silently: the event is answered invalid_event at the id's token.
const MaxIDBytes = 1024

// tokenLen is the length of a hashed token: '=' and 43 base64url characters.
const tokenLen = 1 + 43

// IDToken maps any id to the subject token that stands for it in subjects and keys (see
// the rules above). It is deterministic and total; callers refuse empty ids first.
func IDToken(id string) string {
	if isIDToken(id, 128) || isHashedToken(id) {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return "=" + base64.RawURLEncoding.EncodeToString(sum[:])
}

// isHashedToken reports whether s already has the form IDToken gives a hashed id.
func isHashedToken(s string) bool {
	return len(s) == tokenLen && s[0] == '=' && isIDToken(s[1:], 43)
}

// isToken reports whether s may stand in a subject as an id token.
func isToken(s string) bool { return isIDToken(s, 128) || isHashedToken(s) }

// ValidateEventID returns an *tools.Error (invalid_event) unless id is a CloudEvents
// string that toolfleet can carry back in headers and JSON: 1 to [MaxIDBytes] bytes of
// valid UTF-8 without control characters. what names the attribute ("event id", "run
// id").
func ValidateEventID(what, id string) error {
	if isIDToken(id, 128) { // the usual id: no need to look at runes
		return nil
	}
	switch {
	case id == "":
		return tools.Errorf(tools.CodeInvalidEvent, "%s is empty", what)
	case len(id) > MaxIDBytes:
		return tools.Errorf(tools.CodeInvalidEvent, "%s is %d bytes; the limit is %d bytes", what, len(id), MaxIDBytes)
	case !utf8.ValidString(id):
		return tools.Errorf(tools.CodeInvalidEvent, "%s %q is not valid UTF-8", what, id)
	}
	for _, r := range id {
		if r < 0x20 || (r >= 0x7f && r <= 0x9f) {
			return tools.Errorf(tools.CodeInvalidEvent, "%s %q contains a control character", what, id)
		}
	}
	return nil
}

// ReplyID is the id an answer carries for a caller's id: the id itself when it is a valid
// CloudEvents id ([ValidateEventID]), its [IDToken] otherwise (an id that is too long,
// not UTF-8 or holds control characters cannot be written back faithfully; it is still
// answered, at the subject its token names).
func ReplyID(id string) string {
	if id == "" || ValidateEventID("id", id) == nil {
		return id
	}
	return IDToken(id)
}

// SubCallID is the call id of the i-th (from 0) sub-call of the composite call callID:
// callID followed by "-sub-" and i+1. A tools file's composite publishes its sub-calls
// under it, so a composite retried or redelivered finds the results of the sub-calls
// that ran; the planner checks and follows a run's sub-calls by it.
func SubCallID(callID string, i int) string {
	return callID + "-sub-" + strconv.Itoa(i+1)
}

// The metadata keys a composite's sub-call carries besides its composite call's: the
// composite tool and its call id. A tools file's composite sets them on each sub-call
// it publishes (a tool's policy hook sees them there); the planner sets them on the
// policy requests about a run's sub-calls.
const (
	MetaCompositeTool = "toolfleet.composite"
	MetaCompositeCall = "toolfleet.composite_call"
)
