package events

import (
	"encoding/json"
	"time"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Header names of the binary content mode over NATS: every CloudEvents attribute is a
// ce-<name> header (lower case; NATS headers are case-sensitive), the data is the body.
const (
	HeaderSpecVersion     = "ce-specversion"
	HeaderID              = "ce-id"
	HeaderType            = "ce-type"
	HeaderSource          = "ce-source"
	HeaderSubject         = "ce-subject"
	HeaderTime            = "ce-time"
	HeaderDataContentType = "ce-datacontenttype"
	HeaderRunID           = "ce-runid"
	HeaderAttempt         = "ce-attempt"
	HeaderDeadline        = "ce-deadline"
	HeaderTraceParent     = "ce-traceparent"
	HeaderTraceState      = "ce-tracestate"
	// HeaderMsgID is JetStream's deduplication header; it always equals the event id.
	HeaderMsgID = "Nats-Msg-Id"
)

// Extension attribute names.
const (
	ExtRunID       = "runid"
	ExtAttempt     = "attempt"
	ExtDeadline    = "deadline"
	ExtTraceParent = "traceparent"
	ExtTraceState  = "tracestate"
)

// Event is a toolfleet CloudEvent: the attributes toolfleet uses and the JSON data. It is
// what [Encode] writes and [Decode] reads; the typed payloads ([Call], [Result], ...) are
// its Data.
type Event struct {
	// ID is the event id; for calls, results, approvals and dead letters it is the call
	// id, and it is also sent as Nats-Msg-Id so JetStream drops re-publications.
	ID     string
	Type   string
	Source string
	// Subject is the optional CloudEvents subject attribute (not the NATS subject).
	Subject string
	// Time is when the event happened; zero leaves the attribute out.
	Time time.Time
	// RunID (extension runid) groups the calls of one agent run.
	RunID string
	// Attempt (extension attempt) is the attempt number a result or call refers to; 0
	// leaves it out.
	Attempt int
	// Deadline (extension deadline, RFC 3339) is when the caller stops waiting; zero
	// leaves it out.
	Deadline time.Time
	// TraceParent and TraceState (extensions traceparent and tracestate, the CloudEvents
	// distributed-tracing extension) are the W3C trace context, passed through: a call's
	// goes on to its execution and its result.
	TraceParent string
	TraceState  string
	// Data is the JSON body.
	Data json.RawMessage
}

// SetData marshals v as the event's data (without HTML escaping, see
// [tools.MarshalJSON]).
func (e *Event) SetData(v any) error {
	b, err := tools.MarshalJSON(v)
	return e.setData(b, err)
}

// setData sets the event's data to b, the encoding of a value, or refuses err.
func (e *Event) setData(b []byte, err error) error {
	if err != nil {
		return tools.Wrap(tools.CodeInternal, err, "encode event data: "+err.Error())
	}
	e.Data = b
	return nil
}

// DataAs unmarshals the event's data into v; a body that does not fit v is an
// invalid_event error naming the event.
func (e Event) DataAs(v any) error {
	if err := json.Unmarshal(e.Data, v); err != nil {
		return tools.Wrap(tools.CodeInvalidEvent, err,
			"event "+e.ID+" of type "+e.Type+": data does not match the type: "+err.Error())
	}
	return nil
}
