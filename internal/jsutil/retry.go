package jsutil

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/tick"
)

// Backoff of [RetrySetup]: the first wait, and the longest; and how long one try may
// take.
const (
	setupFirstWait = 100 * time.Millisecond
	setupMaxWait   = 5 * time.Second
)

// setupTryTimeout bounds one try of [RetrySetup] (10s): a request that a server lost (its
// node died, a leader is being elected) fails the try after this long, and the next try
// starts, instead of one try using up the caller's whole context. A variable for tests.
var setupTryTimeout = 10 * time.Second

// RetrySetup runs setup (creating streams, buckets, consumers: what a part does before it
// serves) until it succeeds, fails for good, or ctx ends, waiting 100ms, 200ms, … up to
// 5s between tries. Each try runs under its own context, ctx bounded by
// 10s, so a request lost in a cluster that is forming, or whose leader died,
// costs one try, not the part's start. So a part started while its server is down,
// restarting or electing a leader, or with a cluster whose nodes are still joining, comes
// up when the server does, instead of exiting. onRetry, when set, is told of every
// failure that will be retried and the wait before the next try (log it: a part waiting
// for its server should say so).
//
// A failure is final only when retrying cannot change it: the server answered that the
// request itself is wrong (a JetStream API error of the 4xx class, such as a stream that
// exists with another configuration, a subject overlap, a refused permission), or the
// connection was closed for good. Timeouts, no responders, a JetStream that is not ready
// and a cluster not ready yet (no suitable peers for an R3 stream, a membership change in
// progress, no leader) are retried. ctx's end returns ctx's error.
func RetrySetup(ctx context.Context, setup func(context.Context) error, onRetry func(err error, wait time.Duration)) error {
	b := tick.Backoff{First: setupFirstWait, Max: setupMaxWait}
	for {
		tryCtx, cancel := context.WithTimeout(ctx, setupTryTimeout)
		err := setup(tryCtx)
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err == nil || !retryable(err) {
			return err
		}
		wait := b.Next()
		if onRetry != nil {
			onRetry(err, wait)
		}
		if !tick.Sleep(ctx, wait) {
			return ctx.Err()
		}
	}
}

// writeWindow is how long [RetryWrite] goes on when its context has no deadline.
const writeWindow = 30 * time.Second

// RetryWrite runs write until it succeeds or fails in a way no retry changes ([MayPass]
// is false), or ctx ends (after writeWindow when ctx has no deadline), waiting 100ms,
// 200ms, … up to 1s between tries. Each try runs under its own context bounded by
// tryTimeout: a write sent to a server that died is never answered, and is tried again
// after this instead of using up ctx. So a write rides out a server restarting and a
// stream electing its leader. It returns the last try's error; a write whose answer was
// lost may have been stored, so write must tell its own earlier try apart (the same
// Nats-Msg-Id, a value it recognizes).
func RetryWrite(ctx context.Context, tryTimeout time.Duration, write func(context.Context) error) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, writeWindow)
		defer cancel()
	}
	b := tick.Backoff{First: 100 * time.Millisecond, Max: time.Second}
	for {
		tctx, cancel := context.WithTimeout(ctx, tryTimeout)
		err := write(tctx)
		cancel()
		if err == nil || !MayPass(err) || !b.Sleep(ctx) {
			return err
		}
	}
}

// JetStream API error codes of a cluster that is not ready yet, although their class
// says the request is wrong (400): they pass once the nodes have joined and agree.
const (
	errCodeNoPeers            = 10005 // no suitable peers for placement: the nodes are still joining
	errCodePeerNotMember      = 10040
	errCodeServerNotMember    = 10044
	errCodeMemberChangeInPlay = 10202
	// errCodeReplicasNotSupported is a 500 that no retry changes: R3 asked of a server
	// that runs without a cluster.
	errCodeReplicasNotSupported = 10074
)

// retryable reports whether a setup failure may pass: anything but the server saying
// the request is wrong, or a connection closed for good.
func retryable(err error) bool {
	if errors.Is(err, nats.ErrConnectionClosed) {
		return false
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case errCodeNoPeers, errCodePeerNotMember, errCodeServerNotMember, errCodeMemberChangeInPlay:
			return true
		case errCodeReplicasNotSupported:
			return false
		}
		// 404: a stream or bucket not (yet) known to the node that answered.
		return apiErr.Code == 0 || apiErr.Code == 404 || apiErr.Code == 408 || apiErr.Code == 429 || apiErr.Code >= 500
	}
	return true
}
