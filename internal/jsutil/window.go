package jsutil

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// PublishAsync publishes msg asynchronously on js, as js.PublishMsgAsync does, but
// when js's window of outstanding publishes is full (jetstream.WithPublishAsyncMaxPending:
// the server acknowledges more slowly than the part publishes) it waits for room until
// ctx ends, instead of failing with [jetstream.ErrTooManyStalledMsgs] after nats.go's
// stall wait (200ms). So a part slows down to its server's pace rather than failing the
// work whose write it was. ctx's end returns ctx's error, wrapped with the stall.
func PublishAsync(ctx context.Context, js jetstream.JetStream, msg *nats.Msg) (jetstream.PubAckFuture, error) {
	return publishAsync(ctx, js, msg, nil)
}

// publishAsync is PublishAsync telling stalled, when set, that msg found the window
// full (it is then called again, with nil, once msg got room or gave up).
func publishAsync(ctx context.Context, js jetstream.JetStream, msg *nats.Msg, stalled func(error)) (jetstream.PubAckFuture, error) {
	f, err := js.PublishMsgAsync(msg)
	if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
		return f, err
	}
	if stalled != nil {
		stalled(err)
		defer stalled(nil)
	}
	// Each try waits (nats.go's stall wait) for a slot to free and takes it at once: the
	// loop only looks at ctx between those waits.
	for {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w (waiting for room to publish on %s: %w)", ctx.Err(), msg.Subject, err)
		}
		f, err = js.PublishMsgAsync(msg)
		if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
			return f, err
		}
	}
}

// Settle waits for the outcome of f, an asynchronous publish, until ctx ends. A failure
// that may pass ([MayPass]: no PubAck in time from a server that is slow or died, a
// stream electing its leader, another write of a replicated stream in progress) is not
// the end: the message is published again, synchronously, with [RetryWrite] (each try
// bounded by tryTimeout) until it is stored, refused, or ctx ends. The message must be
// one that a second publish cannot double: a Nats-Msg-Id, an expected last subject
// sequence, or a subject of its own. A refusal is returned as the server gave it
// ([IsAlreadyAnswered] for a record that is there already).
func Settle(ctx context.Context, js jetstream.JetStream, f jetstream.PubAckFuture, tryTimeout time.Duration) error {
	select {
	case <-f.Ok():
		return nil
	case err := <-f.Err():
		if !MayPass(err) {
			return err
		}
	case <-ctx.Done():
		return ctx.Err()
	}
	msg := f.Msg()
	return RetryWrite(ctx, tryTimeout, func(ctx context.Context) error {
		_, err := PublishSettled(ctx, js, msg)
		return err
	})
}

// Window is the window of asynchronous publishes of one JetStream context (its
// WithPublishAsyncMaxPending), through which a part publishes with [PublishAsync]'s
// waits, and which tells how long publishes have waited for room: a part that admits
// new work refuses it while the window stays full ([Window.Full]), rather than adding
// writes its server cannot take. It is safe for concurrent use.
type Window struct {
	js jetstream.JetStream
	// waited, when set, is told of each publish that found the window full, once it
	// got room or gave up, with how long it waited.
	waited func(time.Duration)

	mu      sync.Mutex
	waiting int       // publishes waiting for room now
	since   time.Time // when the window filled, while some publish waits
}

// NewWindow returns the window of js. waited, when not nil, is told how long each
// publish that found the window full waited for room (metrics).
func NewWindow(js jetstream.JetStream, waited func(time.Duration)) *Window {
	return &Window{js: js, waited: waited}
}

// Publish publishes msg as [PublishAsync] does, counting the waits.
func (w *Window) Publish(ctx context.Context, msg *nats.Msg) (jetstream.PubAckFuture, error) {
	var start time.Time
	return publishAsync(ctx, w.js, msg, func(stall error) {
		now := time.Now()
		w.mu.Lock()
		if stall != nil {
			start = now.Add(-stallWait) // the stall wait nats.go spent before saying so
			if w.waiting == 0 {
				w.since = start
			}
			w.waiting++
		} else {
			w.waiting--
		}
		w.mu.Unlock()
		if stall == nil && w.waited != nil {
			w.waited(now.Sub(start))
		}
	})
}

// stallWait is nats.go's wait for room before a publish fails with
// ErrTooManyStalledMsgs (jetstream's defaultAsyncStallWait).
const stallWait = 200 * time.Millisecond

// Full returns how long publishes have been waiting for room in the window without a
// break: since the first of them found it full, as long as one still waits; 0 when
// none waits.
func (w *Window) Full() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.waiting == 0 {
		return 0
	}
	return time.Since(w.since)
}
