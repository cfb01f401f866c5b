package events

import (
	"encoding/json"
	"mime"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Decode reads a CloudEvent from msg and checks it against the contract: spec version
// 1.0, id, type and source present, the type agreeing with the message's subject, a JSON body of at
// most maxBytes (0 means [DefaultConfig]'s MaxMsgSize), well-formed extensions, and
// Nats-Msg-Id (when set) equal to the id. Both content modes of the NATS binding are
// read: binary (ce-* headers, the data as body; what toolfleet writes) and structured (a
// JSON event format body, announced by a Content-Type of application/cloudevents+json,
// or a header-less body with a specversion member as the binding's first version sent).
//
// Every refusal is an *tools.Error with code invalid_event (input_too_large for an
// oversized body) whose message says what is wrong. The event decoded so far is returned
// alongside, so a caller can still address an answer to it: its ID is the ce-id as
// received — or, when the message has none, its Nats-Msg-Id — even when the id itself is
// what was refused (answer it at [IDToken], with [ReplyID]).
func Decode(msg Message, maxBytes int) (Event, error) {
	return decode(msg, maxBytes, true)
}

// decode is Decode; checkJSON false leaves the JSON check of the body to a caller that
// unmarshals it anyway (one scan of the body instead of two).
func decode(msg Message, maxBytes int, checkJSON bool) (Event, error) {
	if maxBytes <= 0 {
		maxBytes = int(DefaultConfig().MaxMsgSize)
	}
	subject, h, data := msg.Subject(), msg.Headers(), msg.Data()
	if isStructured(h, data) {
		return decodeStructured(subject, h, data, maxBytes)
	}
	if n := len(data); n > maxBytes {
		e, _ := attributes(h) // what of them can be read; the size is the error to report
		return e, tools.Errorf(tools.CodeInputTooLarge,
			"event on %s: body of %d bytes exceeds the limit of %d bytes", subject, n, maxBytes)
	}
	e, err := attributes(h)
	if err != nil {
		return e, err
	}
	if err := checkIncoming(subject, h.Get(HeaderMsgID), h.Get(HeaderDataContentType), &e); err != nil {
		return e, err
	}
	if err := checkBody(data, &e, checkJSON); err != nil {
		return e, err
	}
	e.Data = data
	return e, nil
}

// attributes reads the ce-* headers, checking presence and syntax.
func attributes(h nats.Header) (Event, error) {
	var e Event
	if len(h) == 0 {
		return e, tools.Errorf(tools.CodeInvalidEvent,
			"not a CloudEvent: the message has no headers (binary mode needs ce-specversion, ce-id, ce-type, ce-source; structured mode a JSON event with specversion)")
	}
	e.ID = h.Get(HeaderID)
	e.Type = h.Get(HeaderType)
	e.Source = h.Get(HeaderSource)
	e.Subject = h.Get(HeaderSubject)
	e.RunID = h.Get(HeaderRunID)
	e.TraceParent = h.Get(HeaderTraceParent)
	e.TraceState = h.Get(HeaderTraceState)
	if e.ID == "" {
		// Not a valid event, but its publisher may still be found by its dedup id.
		e.ID = h.Get(HeaderMsgID)
		return e, missing(HeaderID)
	}
	return e, checkAttributes(&e, h.Get(HeaderSpecVersion), h.Get(HeaderTime), h.Get(HeaderAttempt), h.Get(HeaderDeadline))
}

// checkAttributes checks the attributes both modes share and parses the typed ones.
func checkAttributes(e *Event, specVersion, tm, attempt, deadline string) error {
	if err := ValidateEventID("event id", e.ID); err != nil {
		return err
	}
	if e.RunID != "" {
		if err := ValidateEventID("run id", e.RunID); err != nil {
			return err
		}
	}
	if !isTraceValue(e.TraceParent) || !isTraceValue(e.TraceState) {
		return tools.Errorf(tools.CodeInvalidEvent, "traceparent %q or tracestate %q is not a W3C trace context value (printable ASCII, at most 512 bytes)",
			e.TraceParent, e.TraceState)
	}
	switch {
	case specVersion == "":
		return missing(HeaderSpecVersion)
	case specVersion != SpecVersion:
		return tools.Errorf(tools.CodeInvalidEvent, "unsupported CloudEvents version %q (want %q)", specVersion, SpecVersion)
	case e.Type == "":
		return missing(HeaderType)
	case e.Source == "":
		return missing(HeaderSource)
	}
	if tm != "" {
		t, err := time.Parse(time.RFC3339Nano, tm)
		if err != nil {
			return tools.Errorf(tools.CodeInvalidEvent, "time %q is not an RFC 3339 time", tm)
		}
		e.Time = t
	}
	if attempt != "" {
		n, err := strconv.Atoi(attempt)
		if err != nil || n < 1 {
			return tools.Errorf(tools.CodeInvalidEvent, "attempt %q is not a positive integer", attempt)
		}
		e.Attempt = n
	}
	if deadline != "" {
		t, err := time.Parse(time.RFC3339Nano, deadline)
		if err != nil {
			return tools.Errorf(tools.CodeInvalidEvent, "deadline %q is not an RFC 3339 time", deadline)
		}
		e.Deadline = t
	}
	return nil
}

func missing(attr string) error {
	return tools.Errorf(tools.CodeInvalidEvent, "not a CloudEvent: %s is missing", attr)
}

// checkIncoming checks what ties the event to its message: type vs subject, content
// type, deduplication id.
func checkIncoming(subject, msgID, contentType string, e *Event) error {
	if want, ok := TypeForSubject(subject); ok && want != e.Type {
		return tools.Errorf(tools.CodeInvalidEvent,
			"event %s has type %q but subject %s carries %q events", e.ID, e.Type, subject, want)
	}
	if contentType != "" && contentType != ContentType { // as written by toolfleet: nothing to parse
		if mt, _, err := mime.ParseMediaType(contentType); err != nil || mt != ContentType {
			return tools.Errorf(tools.CodeInvalidEvent,
				"event %s: data content type %q is not supported (want %s)", e.ID, contentType, ContentType)
		}
	}
	if msgID != "" && msgID != e.ID && msgID != MsgID(SubjectTenant(subject), e.ID) {
		return tools.Errorf(tools.CodeInvalidEvent,
			"event %s: %s %q differs from the event id (they must be equal for deduplication, or id@tenant on a tenant's subject)", e.ID, HeaderMsgID, msgID)
	}
	return nil
}

func checkBody(body []byte, e *Event, checkJSON bool) error {
	if len(body) == 0 {
		return tools.Errorf(tools.CodeInvalidEvent, "event %s: the body is empty (want JSON data)", e.ID)
	}
	if checkJSON && !json.Valid(body) {
		return notJSON(e.ID, body)
	}
	return nil
}

// notJSON is the refusal of a body that does not parse; one nested beyond what any JSON
// decoder reads says so rather than calling valid JSON invalid.
func notJSON(id string, body []byte) error {
	if depth := tools.JSONDepth(body); depth > tools.MaxDepth {
		return tools.Errorf(tools.CodeInvalidEvent, "event %s: the body is nested too deeply (%d levels; the limit is %d)", id, depth, tools.MaxDepth)
	}
	return tools.Errorf(tools.CodeInvalidEvent, "event %s: the body is not valid JSON", id)
}

// isTraceValue reports whether v may be a traceparent or tracestate: printable ASCII of
// at most 512 bytes. Trace context is passed on into the headers of other events, so
// nothing else may pass.
func isTraceValue(v string) bool {
	if len(v) > 512 {
		return false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return false
		}
	}
	return true
}
