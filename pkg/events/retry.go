package events

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Backoff of [RetrySetup]: the first wait, and the longest.
const (
	setupFirstWait = 100 * time.Millisecond
	setupMaxWait   = 5 * time.Second
)

// RetrySetup runs setup (creating streams, buckets, consumers: what a part does before it
// serves) until it succeeds, fails for good, or ctx ends, waiting 100ms, 200ms, … up to
// 5s between tries. So a part started while its server is down, restarting or electing a
// leader comes up when the server does, instead of exiting. onRetry, when set, is told of
// every failure that will be retried and the wait before the next try (log it: a part
// waiting for its server should say so).
//
// A failure is final when the server answered that the request itself is wrong (a
// JetStream API error of the 4xx class other than a timeout: a stream that exists with
// another configuration, a subject overlap, a refused permission to create): retrying
// would not change it. ctx's end returns ctx's error.
func RetrySetup(ctx context.Context, setup func(context.Context) error, onRetry func(err error, wait time.Duration)) error {
	wait := setupFirstWait
	for {
		err := setup(ctx)
		if err == nil || !retryable(err) || ctx.Err() != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		if onRetry != nil {
			onRetry(err, wait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, setupMaxWait)
	}
}

// retryable reports whether a setup failure may pass: anything but the server saying
// the request is wrong.
func retryable(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.Code == 0 || apiErr.Code == 408 || apiErr.Code >= 500
	}
	return true
}
