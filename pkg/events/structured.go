package events

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"mime"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// StructuredContentType is the media type of a structured-mode event in the JSON event
// format.
const StructuredContentType = "application/cloudevents+json"

// Structured mode. A publisher that cannot set ce-* headers may send the whole event as
// the body in the JSON event format; toolfleet reads it like a binary-mode event.
// toolfleet always answers in binary mode: every reader of the results stream (the
// planner, the Go client, `nats stream get`) then reads one format, and the headers a
// result needs anyway (Nats-Msg-Id for deduplication) are NATS headers.

// isStructured reports whether msg carries a structured-mode event: its content type
// says so, or it has none of the binary mode's ce-specversion, ce-id and ce-type headers
// and its body names a specversion (the binding's first version had no headers at all).
func isStructured(h nats.Header, data []byte) bool {
	if ct := contentTypeHeader(h); ct != "" {
		mt, _, _ := mime.ParseMediaType(ct)
		return strings.HasPrefix(mt, "application/cloudevents")
	}
	return h.Get(HeaderSpecVersion) == "" && h.Get(HeaderID) == "" && h.Get(HeaderType) == "" &&
		bytes.Contains(data, []byte(`"specversion"`))
}

// contentTypeHeader returns the message's Content-Type header, whatever its case.
func contentTypeHeader(h nats.Header) string {
	for k, v := range h {
		if len(v) > 0 && strings.EqualFold(k, "content-type") {
			return v[0]
		}
	}
	return ""
}

// decodeStructured reads a JSON-format event from a message's body.
func decodeStructured(subject string, header nats.Header, body []byte, maxBytes int) (Event, error) {
	var e Event
	if ct := contentTypeHeader(header); ct != "" {
		if mt, _, _ := mime.ParseMediaType(ct); mt != StructuredContentType {
			return e, tools.Errorf(tools.CodeInvalidEvent,
				"event on %s: content type %q is not supported (structured mode: %s; batches are not)", subject, ct, StructuredContentType)
		}
	}
	var env map[string]json.RawMessage
	if err := json.Unmarshal(body, &env); err != nil {
		if len(body) > maxBytes {
			return e, tools.Errorf(tools.CodeInputTooLarge,
				"event on %s: body of %d bytes exceeds the limit of %d bytes", subject, len(body), maxBytes)
		}
		return e, notJSON("on "+subject, body)
	}
	str := func(name string) (string, error) {
		raw, ok := env[name]
		if !ok || string(raw) == "null" {
			return "", nil
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", tools.Errorf(tools.CodeInvalidEvent, "structured event: %s is not a string", name)
		}
		return s, nil
	}
	var errs [10]error
	var sv, tm, attempt, deadline, dct string
	sv, errs[0] = str("specversion")
	e.ID, errs[1] = str("id")
	e.Type, errs[2] = str("type")
	e.Source, errs[3] = str("source")
	e.Subject, errs[4] = str("subject")
	tm, errs[5] = str("time")
	e.RunID, errs[6] = str(ExtRunID)
	e.TraceParent, errs[7] = str(ExtTraceParent)
	deadline, errs[8] = str(ExtDeadline)
	e.TraceState, errs[9] = str(ExtTraceState)
	if e.ID == "" {
		e.ID = header.Get(HeaderMsgID) // its publisher may still be found by its dedup id
	}
	for _, err := range errs {
		if err != nil {
			return e, err
		}
	}
	if e.ID == "" {
		return e, missing("id")
	}
	if dct, _ = str("datacontenttype"); dct == "" {
		dct = ContentType
	}
	if raw, ok := env[ExtAttempt]; ok { // an integer, or a string holding one
		attempt = strings.Trim(string(raw), `"`)
	}
	if len(body) > maxBytes {
		return e, tools.Errorf(tools.CodeInputTooLarge,
			"event on %s: body of %d bytes exceeds the limit of %d bytes", subject, len(body), maxBytes)
	}
	if err := checkAttributes(&e, sv, tm, attempt, deadline); err != nil {
		return e, err
	}
	if err := checkIncoming(subject, header.Get(HeaderMsgID), dct, &e); err != nil {
		return e, err
	}
	data, hasData := env["data"]
	if b64, ok := env["data_base64"]; ok {
		var s string
		if err := json.Unmarshal(b64, &s); err != nil {
			return e, tools.Errorf(tools.CodeInvalidEvent, "event %s: data_base64 is not a string", e.ID)
		}
		raw, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return e, tools.Errorf(tools.CodeInvalidEvent, "event %s: data_base64 is not base64: %v", e.ID, err)
		}
		if !json.Valid(raw) {
			return e, notJSON(e.ID, raw)
		}
		data, hasData = raw, true
	}
	if !hasData {
		return e, tools.Errorf(tools.CodeInvalidEvent, "event %s: the structured event has no data (want JSON data)", e.ID)
	}
	e.Data = data
	return e, nil
}
