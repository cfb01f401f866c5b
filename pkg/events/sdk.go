package events

import (
	"bytes"
	"context"
	"strconv"

	cejs "github.com/cloudevents/sdk-go/protocol/nats_jetstream/v2"
	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/types"
	"github.com/nats-io/nats.go"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// EncodeSDK writes e exactly as [Encode] does, but through the CloudEvents SDK's NATS
// binding. It is the reference the lean encoder is tested against, and what a user of
// the SDK would write.
func EncodeSDK(ctx context.Context, subject string, e Event) (*nats.Msg, error) {
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
	h.Set(HeaderMsgID, e.ID)
	return &nats.Msg{Subject: subject, Header: h, Data: body.Bytes()}, nil
}

// ToSDK converts e to a CloudEvents SDK event.
func ToSDK(e Event) event.Event {
	ce := event.New(SpecVersion)
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
		ce.SetExtension(ExtRunID, e.RunID)
	}
	if e.Attempt > 0 {
		ce.SetExtension(ExtAttempt, strconv.Itoa(e.Attempt))
	}
	if !e.Deadline.IsZero() {
		ce.SetExtension(ExtDeadline, e.Deadline.UTC().Format(timeFormat))
	}
	if e.TraceParent != "" {
		ce.SetExtension(ExtTraceParent, e.TraceParent)
	}
	ce.SetDataContentType(ContentType)
	ce.DataEncoded = e.Data
	return ce
}

// DecodeSDK reads msg with the CloudEvents SDK's NATS binding and applies the same
// contract checks as [Decode]. It is the reference the lean decoder is tested against.
func DecodeSDK(ctx context.Context, msg *nats.Msg, maxBytes int) (event.Event, error) {
	if maxBytes <= 0 {
		maxBytes = int(DefaultConfig().MaxMsgSize)
	}
	if n := len(msg.Data); n > maxBytes {
		return event.Event{}, tools.Errorf(tools.CodeInputTooLarge,
			"event on %s: body of %d bytes exceeds the limit of %d bytes", msg.Subject, n, maxBytes)
	}
	m := cejs.NewMessage(msg)
	if m.ReadEncoding() == binding.EncodingUnknown {
		return event.Event{}, missing(HeaderSpecVersion)
	}
	ce, err := binding.ToEvent(ctx, m)
	if err != nil {
		return event.Event{}, tools.Wrap(tools.CodeInvalidEvent, err, "not a CloudEvent: "+err.Error())
	}
	if err := ce.Validate(); err != nil {
		return *ce, tools.Wrap(tools.CodeInvalidEvent, err, "not a valid CloudEvent: "+err.Error())
	}
	e := Event{ID: ce.ID(), Type: ce.Type(), Source: ce.Source()}
	if err := checkIncoming(msg.Subject, msg.Header.Get(HeaderMsgID), ce.DataContentType(), &e); err != nil {
		return *ce, err
	}
	if err := checkBody(ce.Data(), &e, true); err != nil {
		return *ce, err
	}
	return *ce, nil
}

// FromSDK converts an SDK event to an Event, reading the toolfleet extensions.
func FromSDK(ce event.Event) (Event, error) {
	h := nats.Header{}
	h.Set(HeaderSpecVersion, ce.SpecVersion())
	h.Set(HeaderID, ce.ID())
	h.Set(HeaderType, ce.Type())
	h.Set(HeaderSource, ce.Source())
	if s := ce.Subject(); s != "" {
		h.Set(HeaderSubject, s)
	}
	if t := ce.Time(); !t.IsZero() {
		h.Set(HeaderTime, t.UTC().Format(timeFormat))
	}
	for name, v := range ce.Extensions() {
		s, err := types.Format(v)
		if err != nil {
			return Event{}, tools.Errorf(tools.CodeInvalidEvent, "extension %s: %v", name, err)
		}
		h.Set("ce-"+name, s)
	}
	e, err := attributes(h)
	if err != nil {
		return e, err
	}
	e.Data = ce.Data()
	return e, nil
}
