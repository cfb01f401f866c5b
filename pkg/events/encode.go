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
// data as body, and Nats-Msg-Id = the event id. It writes the headers directly, which is
// several times cheaper than [EncodeSDK]; the tests prove both produce the same message.
func Encode(subject string, e Event) (*nats.Msg, error) {
	if err := checkOutgoing(subject, e); err != nil {
		return nil, err
	}
	h := make(nats.Header, 12)
	h[HeaderSpecVersion] = []string{SpecVersion}
	h[HeaderID] = []string{e.ID}
	h[HeaderType] = []string{e.Type}
	h[HeaderSource] = []string{e.Source}
	h[HeaderDataContentType] = []string{ContentType}
	if e.Subject != "" {
		h[HeaderSubject] = []string{e.Subject}
	}
	if !e.Time.IsZero() {
		h[HeaderTime] = []string{e.Time.UTC().Format(timeFormat)}
	}
	if e.RunID != "" {
		h[HeaderRunID] = []string{e.RunID}
	}
	if e.Attempt > 0 {
		h[HeaderAttempt] = []string{strconv.Itoa(e.Attempt)}
	}
	if !e.Deadline.IsZero() {
		h[HeaderDeadline] = []string{e.Deadline.UTC().Format(timeFormat)}
	}
	if e.TraceParent != "" {
		h[HeaderTraceParent] = []string{e.TraceParent}
	}
	h[HeaderMsgID] = []string{e.ID}
	return &nats.Msg{Subject: subject, Header: h, Data: e.Data}, nil
}

// checkOutgoing refuses to publish what Decode would refuse, so a bad event fails at its
// author rather than at its reader.
func checkOutgoing(subject string, e Event) error {
	if err := ValidateID("event id", e.ID); err != nil {
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
		if err := ValidateID("run id", e.RunID); err != nil {
			return err
		}
	}
	if len(e.Data) == 0 {
		return tools.Errorf(tools.CodeInvalidEvent, "event %s: data is required", e.ID)
	}
	return nil
}
