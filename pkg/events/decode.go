package events

import (
	"encoding/json"
	"mime"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Decode reads a binary-mode CloudEvent from msg and checks it against the contract:
// spec version 1.0, id, type and source present, the type agreeing with msg.Subject, a
// JSON body of at most maxBytes (0 means [DefaultConfig]'s MaxMsgSize), well-formed
// extensions, and Nats-Msg-Id (when set) equal to the id. Every refusal is an
// *tools.Error with code invalid_event whose message says what is wrong; the event
// decoded so far is returned alongside, so a caller can still address an answer to its
// id and run.
func Decode(msg *nats.Msg, maxBytes int) (Event, error) {
	return decode(msg, maxBytes, true)
}

// decode is Decode; checkJSON false leaves the JSON check of the body to a caller that
// unmarshals it anyway (one scan of the body instead of two).
func decode(msg *nats.Msg, maxBytes int, checkJSON bool) (Event, error) {
	if maxBytes <= 0 {
		maxBytes = int(DefaultConfig().MaxMsgSize)
	}
	if n := len(msg.Data); n > maxBytes {
		e, _ := attributes(msg.Header)
		return e, tools.Errorf(tools.CodeInputTooLarge,
			"event on %s: body of %d bytes exceeds the limit of %d bytes", msg.Subject, n, maxBytes)
	}
	e, err := attributes(msg.Header)
	if err != nil {
		return e, err
	}
	if err := checkIncoming(msg.Subject, msg.Header, &e); err != nil {
		return e, err
	}
	if err := checkBody(msg.Data, &e, checkJSON); err != nil {
		return e, err
	}
	e.Data = msg.Data
	return e, nil
}

// attributes reads the ce-* headers, checking presence and syntax.
func attributes(h nats.Header) (Event, error) {
	var e Event
	if len(h) == 0 {
		return e, tools.Errorf(tools.CodeInvalidEvent,
			"not a CloudEvent: the message has no headers (binary mode needs ce-specversion, ce-id, ce-type, ce-source)")
	}
	e.ID = h.Get(HeaderID)
	e.Type = h.Get(HeaderType)
	e.Source = h.Get(HeaderSource)
	e.Subject = h.Get(HeaderSubject)
	e.RunID = h.Get(HeaderRunID)
	e.TraceParent = h.Get(HeaderTraceParent)
	if e.ID != "" && ValidateID("event id", e.ID) != nil {
		bad := e.ID
		e.ID = "" // unusable as a subject token; keep it out of answers
		return e, ValidateID("event id", bad)
	}
	if e.RunID != "" {
		if err := ValidateID("run id", e.RunID); err != nil {
			e.RunID = ""
			return e, err
		}
	}
	sv := h.Get(HeaderSpecVersion)
	switch {
	case sv == "":
		return e, missing(HeaderSpecVersion)
	case sv != SpecVersion:
		return e, tools.Errorf(tools.CodeInvalidEvent, "unsupported CloudEvents version %q in %s (want %q)", sv, HeaderSpecVersion, SpecVersion)
	case e.ID == "":
		return e, missing(HeaderID)
	case e.Type == "":
		return e, missing(HeaderType)
	case e.Source == "":
		return e, missing(HeaderSource)
	}
	if v := h.Get(HeaderTime); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return e, tools.Errorf(tools.CodeInvalidEvent, "%s %q is not an RFC 3339 time", HeaderTime, v)
		}
		e.Time = t
	}
	if v := h.Get(HeaderAttempt); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return e, tools.Errorf(tools.CodeInvalidEvent, "%s %q is not a positive integer", HeaderAttempt, v)
		}
		e.Attempt = n
	}
	if v := h.Get(HeaderDeadline); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return e, tools.Errorf(tools.CodeInvalidEvent, "%s %q is not an RFC 3339 time", HeaderDeadline, v)
		}
		e.Deadline = t
	}
	return e, nil
}

func missing(header string) error {
	return tools.Errorf(tools.CodeInvalidEvent, "not a CloudEvent: header %s is missing", header)
}

// checkIncoming checks what ties the event to its message: type vs subject, content
// type, deduplication id.
func checkIncoming(subject string, h nats.Header, e *Event) error {
	if want, ok := TypeForSubject(subject); ok && want != e.Type {
		return tools.Errorf(tools.CodeInvalidEvent,
			"event %s has type %q but subject %s carries %q events", e.ID, e.Type, subject, want)
	}
	if ct := h.Get(HeaderDataContentType); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != ContentType {
			return tools.Errorf(tools.CodeInvalidEvent,
				"event %s: data content type %q is not supported (want %s)", e.ID, ct, ContentType)
		}
	}
	if id := h.Get(HeaderMsgID); id != "" && id != e.ID {
		return tools.Errorf(tools.CodeInvalidEvent,
			"event %s: %s %q differs from the event id (they must be equal for deduplication)", e.ID, HeaderMsgID, id)
	}
	return nil
}

func checkBody(body []byte, e *Event, checkJSON bool) error {
	if len(body) == 0 {
		return tools.Errorf(tools.CodeInvalidEvent, "event %s: the body is empty (want JSON data)", e.ID)
	}
	if checkJSON && !json.Valid(body) {
		return tools.Errorf(tools.CodeInvalidEvent, "event %s: the body is not valid JSON", e.ID)
	}
	return nil
}

// notJSON is the refusal of a body that does not parse.
func notJSON(e Event) error {
	return tools.Errorf(tools.CodeInvalidEvent, "event %s: the body is not valid JSON", e.ID)
}
