package jsutil_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// Ensure can run twice, and from many parts starting at once.
func TestEnsureIdempotentAndConcurrent(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	cfg := events.Config{}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			js, err := jetstream.New(srv.Connect())
			if err != nil {
				errs <- err
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			errs <- jsutil.Ensure(ctx, js, cfg)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("concurrent Ensure: %v", err)
		}
	}
	js, _ := jetstream.New(srv.Connect())
	if err := jsutil.Ensure(context.Background(), js, cfg); err != nil {
		t.Fatalf("second Ensure: %v", err)
	}
	for _, name := range []string{events.StreamCalls, events.StreamResults, events.StreamEvents, events.StreamDeadLetters} {
		if _, err := js.Stream(context.Background(), name); err != nil {
			t.Errorf("stream %s: %v", name, err)
		}
	}
	s, _ := js.Stream(context.Background(), events.StreamCalls)
	if s.CachedInfo().Config.Retention != jetstream.WorkQueuePolicy {
		t.Errorf("calls retention %v, want work queue", s.CachedInfo().Config.Retention)
	}
}
