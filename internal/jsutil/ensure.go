package jsutil

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/tick"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// Ensure creates or updates every stream and bucket of cfg ([events.Config.Streams],
// [events.Config.Buckets]). It is idempotent and safe
// to run from many parts starting at once: a create that loses a race to an identical
// create is retried as an update.
func Ensure(ctx context.Context, js jetstream.JetStream, cfg events.Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	for _, sc := range cfg.Streams() {
		if err := ensureStream(ctx, js, sc); err != nil {
			return err
		}
	}
	for _, kc := range cfg.Buckets() {
		if _, err := ensureBucket(ctx, js, kc); err != nil {
			return err
		}
	}
	return nil
}

// ensureStream creates or updates the stream sc, retrying lost races (see retryRace). A
// stream that already has every setting of sc is left alone (streamUpToDate).
func ensureStream(ctx context.Context, js jetstream.JetStream, sc jetstream.StreamConfig) error {
	err := retryRace(ctx, func(ctx context.Context) error {
		if s, err := js.Stream(ctx, sc.Name); err == nil && streamUpToDate(s.CachedInfo().Config, sc) {
			return nil
		}
		_, err := js.CreateOrUpdateStream(ctx, sc)
		return err
	})
	if err != nil {
		return fmt.Errorf("ensure stream %s: %w", sc.Name, err)
	}
	return nil
}

// streamUpToDate reports whether a stream configured as have already has every setting
// of want, so that an update to want would change nothing: each member want sets has
// the same value in have (maps member by member, since the server adds metadata of its
// own), and have has none of the members whose absence from want is itself a setting
// (a source or mirror to drop). An update that changes nothing is not free: nats-server
// 2.15 rewrites the store's configuration, which races with a consumer created on the
// stream at that moment (a data race inside the server, which the race detector
// reports), and every part that starts would do it to every stream.
func streamUpToDate(have, want jetstream.StreamConfig) bool {
	h, w := jsonMap(have), jsonMap(want)
	if h == nil || w == nil {
		return false
	}
	for _, k := range []string{"max_consumers", "max_msgs", "max_bytes", "max_msgs_per_subject", "max_msg_size"} {
		if w[k] == 0.0 { // sent as 0, which the server stores as -1: no limit
			w[k] = -1.0
		}
	}
	for _, k := range []string{"sources", "mirror", "subject_transform", "republish"} {
		if _, set := w[k]; !set && h[k] != nil {
			return false
		}
	}
	return hasAll(h, w)
}

// hasAll reports whether have has every member of want with the same value, maps
// compared member by member.
func hasAll(have, want map[string]any) bool {
	for k, wv := range want {
		hv, ok := have[k]
		if !ok {
			return false
		}
		wm, wIsMap := wv.(map[string]any)
		hm, hIsMap := hv.(map[string]any)
		switch {
		case wIsMap && hIsMap:
			if !hasAll(hm, wm) {
				return false
			}
		case !reflect.DeepEqual(hv, wv):
			return false
		}
	}
	return true
}

// jsonMap is v as its JSON object (zero members left out, as the API sends it).
func jsonMap(v any) map[string]any {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	return m
}

// ensureBucket creates or updates the key-value bucket kc, retrying lost races, and
// returns it.
func ensureBucket(ctx context.Context, js jetstream.JetStream, kc jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	var kv jetstream.KeyValue
	err := retryRace(ctx, func(ctx context.Context) error {
		var err error
		kv, err = js.CreateOrUpdateKeyValue(ctx, kc)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("ensure bucket %s: %w", kc.Bucket, err)
	}
	return kv, nil
}

// ensureRequestTimeout bounds one create or update request of [Ensure]. On a cluster,
// two parts creating the same R3 stream at the same moment may both never be answered
// (nats-server 2.15, measured: both waited out a 60s context), although the stream is
// created; the request is then tried again after a random wait (so that the parts do
// not collide again), finds the stream and updates it.
const ensureRequestTimeout = 2 * time.Second

// retryRace retries f when it failed because another client created the same thing in
// between our update and our create, or when its request went unanswered. Each call of f
// gets ensureRequestTimeout.
func retryRace(ctx context.Context, f func(context.Context) error) error {
	var err error
	for i := range 10 {
		reqCtx, cancel := context.WithTimeout(ctx, ensureRequestTimeout)
		err = f(reqCtx)
		cancel()
		lost := errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil
		if err == nil || !(isRace(err) || lost) {
			return err
		}
		wait := time.Duration(i+1) * 10 * time.Millisecond
		if lost {
			// Parts that started together would collide again: part them.
			wait += rand.N(time.Second)
		}
		if !tick.Sleep(ctx, wait) {
			return ctx.Err()
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

// EnsurePlanner creates or updates what only planners use, the plan stream and the
// runs' journal (the runs bucket, whose stream also holds the run log:
// [events.Config.JournalStream]), on top of [Ensure]; it returns the runs bucket. Other
// parts neither need nor may create them. Where the run log of an earlier version, the
// stream [events.StreamRunLog], still holds the run log's subjects, it first copies its
// records into the journal (see migrateRunLog) and retires it; [RunLogRetired] then
// tells that the operator may delete it.
func EnsurePlanner(ctx context.Context, js jetstream.JetStream, cfg events.Config) (jetstream.KeyValue, error) {
	if err := Ensure(ctx, js, cfg); err != nil {
		return nil, err
	}
	if err := ensureStream(ctx, js, cfg.PlanStream()); err != nil {
		return nil, err
	}
	if err := migrateRunLog(ctx, js, cfg); err != nil {
		return nil, err
	}
	// The bucket's stream is made as nats.go makes a bucket, with the run log's subjects
	// and atomic batches besides: created or updated in one request, so that no planner
	// starting meanwhile sees it without them. This also drops the source a migration
	// of the old run log added.
	if err := ensureStream(ctx, js, cfg.JournalStream()); err != nil {
		return nil, err
	}
	kv, err := js.KeyValue(ctx, events.BucketRuns)
	if err != nil {
		return nil, fmt.Errorf("bucket %s: %w", events.BucketRuns, err)
	}
	return kv, nil
}

// EnsureLimits creates or updates [events.BucketLimits] and returns it. Executors call it
// only when they serve a tool with a limit.
func EnsureLimits(ctx context.Context, js jetstream.JetStream, cfg events.Config) (jetstream.KeyValue, error) {
	return ensureBucket(ctx, js, cfg.LimitsBucket())
}
