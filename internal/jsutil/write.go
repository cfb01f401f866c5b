package jsutil

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/tick"
)

// IsAlreadyAnswered reports whether err is JetStream refusing a result because its call
// already has one stored (see [events.NewResult]): the call is answered, by this
// result's twin. It is true of any write refused by
// [events.HeaderExpectedLastSubjectSeq] because its subject holds a message (error code
// 10071).
func IsAlreadyAnswered(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}

// IsWriteInProgress reports whether err is a replicated stream refusing a write because
// another write it conflicts with is still being stored, and may yet fail: one on the
// same subject, when the write has [events.HeaderExpectedLastSubjectSeq] (error code 10164,
// "wrong last sequence" without a sequence), or one with the same Nats-Msg-Id (10158,
// "duplicate message id is in process"). Nothing is decided: try again shortly
// ([PublishSettled]) and get the answer a single server gives at once — stored, a
// duplicate, or [IsAlreadyAnswered]. A single server never answers these.
func IsWriteInProgress(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) &&
		(apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant || apiErr.ErrorCode == errCodeDuplicateInProcess)
}

// MayPass reports whether a failed write may succeed if tried again: anything but the
// server refusing it (a JetStream API error of the 4xx class other than a timeout, a
// duplicate still in process or too many requests: the subject holds a message already,
// a message too large) or a message or connection that can never be sent. No answer,
// no responders (a stream electing its leader, a server restarting) and a write a
// replicated stream cannot decide yet ([IsWriteInProgress]) may pass.
func MayPass(err error) bool {
	if errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, nats.ErrMaxPayload) || errors.Is(err, nats.ErrBadSubject) {
		return false
	}
	if IsWriteInProgress(err) {
		return true
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		c := apiErr.Code
		return c < 400 || c >= 500 || c == 408 || c == 409 || c == 429
	}
	return true
}

// errCodeDuplicateInProcess is JetStream's error code for a message whose Nats-Msg-Id is
// that of one a replicated stream is still storing.
const errCodeDuplicateInProcess = 10158

// PublishSettled publishes msg and waits for its PubAck, as js.PublishMsg does; while a
// replicated stream is still storing a write msg conflicts with ([IsWriteInProgress]),
// it tries again, a little later each time, until that write is decided or ctx ends. So
// the answer is the one a single server gives: stored, a duplicate (the PubAck says so),
// or refused.
func PublishSettled(ctx context.Context, js jetstream.JetStream, msg *nats.Msg) (*jetstream.PubAck, error) {
	b := tick.Backoff{First: time.Millisecond, Max: 100 * time.Millisecond}
	for {
		ack, err := js.PublishMsg(ctx, msg)
		if !IsWriteInProgress(err) {
			return ack, err
		}
		if !b.Sleep(ctx) {
			return nil, fmt.Errorf("%w (another write conflicting with %s was being stored: %w)", ctx.Err(), msg.Subject, err)
		}
	}
}
