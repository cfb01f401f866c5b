// Package eventstest holds the CloudEvents SDK's reference codec for toolfleet events,
// for tests only: [EncodeSDK] and [DecodeSDK] write and read a toolfleet event through
// the SDK's NATS binding, and the tests of package events prove the lean codec
// ([events.Encode], [events.Decode]) equal to them. No toolfleet program imports this
// package, so no binary links the SDK.
package eventstest

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"mime"
	"strconv"
	"time"

	cejs "github.com/cloudevents/sdk-go/protocol/nats_jetstream/v2"
	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/types"
	"github.com/nats-io/nats.go"

	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// timeFormat is how the SDK writes time attributes.
const timeFormat = time.RFC3339Nano

// EncodeSDK writes e exactly as [events.Encode] does, but through the CloudEvents SDK's
// NATS binding. It is the reference the lean encoder is tested against, and what a user
// of the SDK would write.
func EncodeSDK(ctx context.Context, subject string, e events.Event) (*nats.Msg, error) {
	if err := checkOutgoing(subject, e); err != nil {
		return nil, err
	}
	ce := ToSDK(e)
	if err := ce.Validate(); err != nil {
		return nil, tools.Wrap(tools.CodeInvalidEvent, err, "event "+e.ID+": "+err.Error())
	}
	var body bytes.Buffer
	h, err := cejs.WriteMsg(ctx, binding.ToMessage(&ce), &body)
	if err != nil {
		return nil, tools.Wrap(tools.CodeInternal, err, "encode event "+e.ID+": "+err.Error())
	}
	h.Set(events.HeaderMsgID, e.ID)
	return &nats.Msg{Subject: subject, Header: h, Data: body.Bytes()}, nil
}

// ToSDK converts e to a CloudEvents SDK event.
func ToSDK(e events.Event) event.Event {
	ce := event.New(events.SpecVersion)
	ce.SetID(e.ID)
	ce.SetType(e.Type)
	ce.SetSource(e.Source)
	if e.Subject != "" {
		ce.SetSubject(e.Subject)
	}
	if !e.Time.IsZero() {
		ce.SetTime(e.Time.UTC())
	}
	// Extensions are set as strings: that is how they travel in headers.
	if e.RunID != "" {
		ce.SetExtension(events.ExtRunID, e.RunID)
	}
	if e.Attempt > 0 {
		ce.SetExtension(events.ExtAttempt, strconv.Itoa(e.Attempt))
	}
	if !e.Deadline.IsZero() {
		ce.SetExtension(events.ExtDeadline, e.Deadline.UTC().Format(timeFormat))
	}
	if e.TraceParent != "" {
		ce.SetExtension(events.ExtTraceParent, e.TraceParent)
	}
	if e.TraceState != "" {
		ce.SetExtension(events.ExtTraceState, e.TraceState)
	}
	ce.SetDataContentType(events.ContentType)
	ce.DataEncoded = e.Data
	return ce
}

// DecodeSDK reads msg with the CloudEvents SDK's NATS binding and applies the same
// contract checks as [events.Decode]. It is the reference the lean decoder is tested
// against.
func DecodeSDK(ctx context.Context, msg *nats.Msg, maxBytes int) (event.Event, error) {
	if maxBytes <= 0 {
		maxBytes = int(events.DefaultConfig().MaxMsgSize)
	}
	if n := len(msg.Data); n > maxBytes {
		return event.Event{}, tools.Errorf(tools.CodeInputTooLarge,
			"event on %s: body of %d bytes exceeds the limit of %d bytes", msg.Subject, n, maxBytes)
	}
	m := cejs.NewMessage(msg)
	if m.ReadEncoding() == binding.EncodingUnknown {
		return event.Event{}, tools.Errorf(tools.CodeInvalidEvent, "not a CloudEvent: %s is missing", events.HeaderSpecVersion)
	}
	ce, err := binding.ToEvent(ctx, m)
	if err != nil {
		return event.Event{}, tools.Wrap(tools.CodeInvalidEvent, err, "not a CloudEvent: "+err.Error())
	}
	if err := ce.Validate(); err != nil {
		return *ce, tools.Wrap(tools.CodeInvalidEvent, err, "not a valid CloudEvent: "+err.Error())
	}
	if err := checkIncoming(msg.Subject, msg.Header.Get(events.HeaderMsgID), ce); err != nil {
		return *ce, err
	}
	return *ce, nil
}

// checkOutgoing refuses what [events.Encode] refuses.
func checkOutgoing(subject string, e events.Event) error {
	if err := events.ValidateEventID("event id", e.ID); err != nil {
		return err
	}
	if e.Type == "" || e.Source == "" {
		return tools.Errorf(tools.CodeInvalidEvent, "event %s: type and source are required", e.ID)
	}
	if want, ok := events.TypeForSubject(subject); ok && want != e.Type {
		return tools.Errorf(tools.CodeInvalidEvent, "event %s: type %q cannot be published on subject %s", e.ID, e.Type, subject)
	}
	if e.RunID != "" {
		if err := events.ValidateEventID("run id", e.RunID); err != nil {
			return err
		}
	}
	if len(e.Data) == 0 {
		return tools.Errorf(tools.CodeInvalidEvent, "event %s: data is required", e.ID)
	}
	return nil
}

// checkIncoming makes the contract's checks of what ties an event to its message (type
// vs subject, content type, deduplication id) and of its data (present, JSON).
func checkIncoming(subject, msgID string, ce *event.Event) error {
	if want, ok := events.TypeForSubject(subject); ok && want != ce.Type() {
		return tools.Errorf(tools.CodeInvalidEvent, "event %s has type %q but subject %s carries %q events", ce.ID(), ce.Type(), subject, want)
	}
	if ct := ce.DataContentType(); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != events.ContentType {
			return tools.Errorf(tools.CodeInvalidEvent, "event %s: data content type %q is not supported", ce.ID(), ct)
		}
	}
	if msgID != "" && msgID != ce.ID() {
		return tools.Errorf(tools.CodeInvalidEvent, "event %s: %s %q differs from the event id", ce.ID(), events.HeaderMsgID, msgID)
	}
	if len(ce.Data()) == 0 {
		return tools.Errorf(tools.CodeInvalidEvent, "event %s: the body is empty (want JSON data)", ce.ID())
	}
	if !json.Valid(ce.Data()) {
		return tools.Errorf(tools.CodeInvalidEvent, "event %s: the body is not valid JSON", ce.ID())
	}
	return nil
}

// FromSDK converts an SDK event to an [events.Event], reading the toolfleet extensions
// as [events.Decode] reads them.
func FromSDK(ce event.Event) (events.Event, error) {
	h := nats.Header{}
	h.Set(events.HeaderSpecVersion, ce.SpecVersion())
	h.Set(events.HeaderID, ce.ID())
	h.Set(events.HeaderType, ce.Type())
	h.Set(events.HeaderSource, ce.Source())
	if s := ce.Subject(); s != "" {
		h.Set(events.HeaderSubject, s)
	}
	if t := ce.Time(); !t.IsZero() {
		h.Set(events.HeaderTime, t.UTC().Format(timeFormat))
	}
	for name, v := range ce.Extensions() {
		s, err := types.Format(v)
		if err != nil {
			return events.Event{}, tools.Errorf(tools.CodeInvalidEvent, "extension %s: %v", name, err)
		}
		h.Set("ce-"+name, s)
	}
	return events.Decode(events.CoreMsg(&nats.Msg{Header: h, Data: ce.Data()}), math.MaxInt32)
}
