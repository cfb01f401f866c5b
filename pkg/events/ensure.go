package events

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Ensure creates or updates every stream and bucket of cfg. It is idempotent and safe
// to run from many parts starting at once: a create that loses a race to an identical
// create is retried as an update.
func Ensure(ctx context.Context, js jetstream.JetStream, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	for _, sc := range cfg.Streams() {
		err := retryRace(ctx, func() error {
			_, err := js.CreateOrUpdateStream(ctx, sc)
			return err
		})
		if err != nil {
			return fmt.Errorf("ensure stream %s: %w", sc.Name, err)
		}
	}
	for _, kc := range cfg.Buckets() {
		err := retryRace(ctx, func() error {
			_, err := js.CreateOrUpdateKeyValue(ctx, kc)
			return err
		})
		if err != nil {
			return fmt.Errorf("ensure bucket %s: %w", kc.Bucket, err)
		}
	}
	return nil
}

// retryRace retries f when it failed because another client created the same thing in
// between our update and our create.
func retryRace(ctx context.Context, f func() error) error {
	var err error
	for i := range 10 {
		err = f()
		if err == nil || !isRace(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(i+1) * 10 * time.Millisecond):
		}
	}
	return err
}

func isRace(err error) bool {
	return errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) ||
		errors.Is(err, jetstream.ErrBucketExists) ||
		errors.Is(err, jetstream.ErrConsumerExists) ||
		errors.Is(err, jetstream.ErrStreamNotFound)
}

// EnsurePlanner creates or updates what only planners use, the plan stream and the runs
// bucket, on top of [Ensure]; it returns the runs bucket. Other parts neither need nor
// may create them.
func EnsurePlanner(ctx context.Context, js jetstream.JetStream, cfg Config) (jetstream.KeyValue, error) {
	if err := Ensure(ctx, js, cfg); err != nil {
		return nil, err
	}
	sc := cfg.PlanStream()
	if err := retryRace(ctx, func() error { _, err := js.CreateOrUpdateStream(ctx, sc); return err }); err != nil {
		return nil, fmt.Errorf("ensure stream %s: %w", sc.Name, err)
	}
	var kv jetstream.KeyValue
	kc := cfg.RunsBucket()
	err := retryRace(ctx, func() error {
		var err error
		kv, err = js.CreateOrUpdateKeyValue(ctx, kc)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("ensure bucket %s: %w", kc.Bucket, err)
	}
	return kv, nil
}
