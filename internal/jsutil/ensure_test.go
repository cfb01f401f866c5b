package jsutil_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
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

// A start that finds the streams as it would set them updates none of them (an update
// that changes nothing races, inside nats-server, with consumers created meanwhile); a
// changed setting is still applied, and so is a setting taken away.
func TestEnsureUpdatesOnlyWhatChanged(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	nc := srv.Connect()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := jsutil.EnsurePlanner(ctx, js, events.Config{}); err != nil {
		t.Fatal(err)
	}
	updated, err := nc.SubscribeSync("$JS.EVENT.ADVISORY.STREAM.UPDATED.>")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := jsutil.EnsurePlanner(ctx, js, events.Config{}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	// Streams only: buckets other than the journal are made by nats.go's
	// CreateOrUpdateKeyValue, which updates them each time.
	for {
		msg, err := updated.NextMsg(300 * time.Millisecond)
		if err != nil {
			break
		}
		name := strings.TrimPrefix(msg.Subject, "$JS.EVENT.ADVISORY.STREAM.UPDATED.")
		if !strings.HasPrefix(name, "KV_") || name == events.StreamJournal {
			t.Fatalf("a start that changes nothing updated %s", name)
		}
	}

	// A new max age is applied.
	if _, err := jsutil.EnsurePlanner(ctx, js, events.Config{ResultsMaxAge: tools.Duration(48 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	for {
		msg, err := updated.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("the results stream's new max age was not applied: %v", err)
		}
		if msg.Subject == "$JS.EVENT.ADVISORY.STREAM.UPDATED."+events.StreamResults {
			break
		}
	}
	s, err := js.Stream(ctx, events.StreamResults)
	if err != nil || s.CachedInfo().Config.MaxAge != 48*time.Hour {
		t.Fatalf("results stream: %v, max age %v", err, s.CachedInfo().Config.MaxAge)
	}

	// A source the stream has and the config does not is taken away.
	plan, err := js.Stream(ctx, events.StreamPlan)
	if err != nil {
		t.Fatal(err)
	}
	withSource := plan.CachedInfo().Config
	withSource.Sources = []*jetstream.StreamSource{{Name: events.StreamResults}}
	if _, err := js.UpdateStream(ctx, withSource); err != nil {
		t.Fatal(err)
	}
	if _, err := jsutil.EnsurePlanner(ctx, js, events.Config{ResultsMaxAge: tools.Duration(48 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if plan, err = js.Stream(ctx, events.StreamPlan); err != nil || len(plan.CachedInfo().Config.Sources) != 0 {
		t.Fatalf("the plan stream kept its source: %v %+v", err, plan.CachedInfo().Config.Sources)
	}
}
