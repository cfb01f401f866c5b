package events

import (
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// timeFormat is how time attributes are written; it is what the CloudEvents SDK writes,
// so both encoders produce the same headers.
const timeFormat = time.RFC3339Nano

// Encode writes e as a NATS message on subject in binary content mode: ce-* headers, the
// data as body, and Nats-Msg-Id = the event id ([MsgID]: qualified by the subject's
// tenant, when it has one). It writes the headers directly, which is
// several times cheaper than the CloudEvents SDK's encoder (eventstest.EncodeSDK); the
// tests prove both produce the same message.
func Encode(subject string, e Event) (*nats.Msg, error) {
	if err := checkOutgoing(subject, e); err != nil {
		return nil, err
	}
	// One backing array for every header value: a value is a one-element slice of it,
	// capped so that an Add by a later writer cannot overwrite its neighbour.
	vals := make([]string, 0, 11)
	h := make(nats.Header, 11)
	set := func(k, v string) {
		vals = append(vals, v)
		n := len(vals)
		h[k] = vals[n-1 : n : n]
	}
	set(HeaderSpecVersion, SpecVersion)
	set(HeaderID, e.ID)
	set(HeaderType, e.Type)
	set(HeaderSource, e.Source)
	set(HeaderDataContentType, ContentType)
	if e.Subject != "" {
		set(HeaderSubject, e.Subject)
	}
	if !e.Time.IsZero() {
		set(HeaderTime, e.Time.UTC().Format(timeFormat))
	}
	if e.RunID != "" {
		set(HeaderRunID, e.RunID)
	}
	if e.Attempt > 0 {
		set(HeaderAttempt, strconv.Itoa(e.Attempt))
	}
	if !e.Deadline.IsZero() {
		set(HeaderDeadline, e.Deadline.UTC().Format(timeFormat))
	}
	if e.TraceParent != "" {
		set(HeaderTraceParent, e.TraceParent)
	}
	if e.TraceState != "" {
		set(HeaderTraceState, e.TraceState)
	}
	set(HeaderMsgID, MsgID(SubjectTenant(subject), e.ID))
	return &nats.Msg{Subject: subject, Header: h, Data: e.Data}, nil
}

// checkOutgoing refuses to publish what Decode would refuse, so a bad event fails at its
// author rather than at its reader.
func checkOutgoing(subject string, e Event) error {
	if err := ValidateEventID("event id", e.ID); err != nil {
		return err
	}
	if e.Type == "" || e.Source == "" {
		return tools.Errorf(tools.CodeInvalidEvent, "event %s: type and source are required", e.ID)
	}
	if want, ok := TypeForSubject(subject); ok && want != e.Type {
		return tools.Errorf(tools.CodeInvalidEvent,
			"event %s: type %q cannot be published on subject %s (want %q)", e.ID, e.Type, subject, want)
	}
	if e.RunID != "" {
		if err := ValidateEventID("run id", e.RunID); err != nil {
			return err
		}
	}
	if len(e.Data) == 0 {
		return tools.Errorf(tools.CodeInvalidEvent, "event %s: data is required", e.ID)
	}
	return nil
}

// SetTrace sets the trace context attributes (ce-traceparent, ce-tracestate) of an
// encoded event, replacing what it had; empty values leave them out. The constructors
// stay free of tracing, and a part that traces adds its span's context this way.
func SetTrace(m *nats.Msg, traceParent, traceState string) {
	if m.Header == nil {
		m.Header = nats.Header{}
	}
	for k, v := range map[string]string{HeaderTraceParent: traceParent, HeaderTraceState: traceState} {
		if v == "" {
			delete(m.Header, k)
		} else {
			m.Header[k] = []string{v}
		}
	}
}
