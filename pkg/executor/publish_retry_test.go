package executor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// A call that finished while the results stream could not take its result (here: the
// stream's subjects moved away for 5s, so every publish is answered "no responders", as
// while a cluster elects the stream's leader) gets its real result once the stream is
// back: the publish is retried for as long as the call's limits allow — well past the
// ~3s after which results used to be given up and the call handed back — with the call
// kept alive meanwhile. So a non-idempotent call that ran once is answered ok, never
// interrupted, and an idempotent call is not run a second time.
func TestResultPublishOutlastsUnavailableStream(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var mu sync.Mutex
	runs := map[string]int{}
	release := make(chan struct{})
	started := make(chan struct{}, 2)
	reg := tools.NewRegistry()
	for _, def := range []tools.Definition{
		{Name: "charge", Parameters: echoSchema, Safe: true, Idempotent: new(false)},
		{Name: "lookup", Parameters: echoSchema, Safe: true},
	} {
		must(t, reg.AddFunc(def, func(ctx context.Context, _ json.RawMessage) (any, error) {
			info, _ := tools.CallInfoFrom(ctx)
			mu.Lock()
			runs[info.CallID]++
			mu.Unlock()
			started <- struct{}{}
			<-release
			return "done", nil
		}))
	}
	b.start(t, reg)
	b.waitServed(t, "lookup")

	// The calls' deadline is what lets their results wait longer than the ack wait (2s here).
	deadline := time.Now().Add(time.Minute)
	for _, c := range []struct{ tool, id string }{{"charge", "pay-1"}, {"lookup", "look-1"}} {
		m, err := events.NewCall(events.CallOptions{Source: "/test", ID: c.id, RunID: "run-pr", Deadline: deadline},
			events.Call{Tool: c.tool, Arguments: json.RawMessage(`{"text":"x"}`)})
		must(t, err)
		b.publish(t, m)
	}
	for range 2 {
		select {
		case <-started:
		case <-time.After(15 * time.Second):
			t.Fatal("the calls did not start")
		}
	}

	ctx := context.Background()
	var cfgs []jetstream.StreamConfig // each results stream (shard)
	for n, name := range b.cfg.ResultStreams() {
		stream, err := b.js.Stream(ctx, name)
		must(t, err)
		cfg := stream.CachedInfo().Config
		cfgs = append(cfgs, cfg)
		away := cfg
		away.Subjects = []string{fmt.Sprintf("toolfleet.unavailable.%d.>", n)}
		away.SubjectTransform = nil
		if _, err := b.js.UpdateStream(ctx, away); err != nil {
			t.Fatal(err)
		}
	}
	close(release) // both calls finish while their results have nowhere to go
	time.Sleep(5 * time.Second)
	for _, cfg := range cfgs {
		if _, err := b.js.UpdateStream(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}

	got := b.results.wait(t, 30*time.Second, "pay-1", "look-1")
	for id, r := range got {
		if r.Status != events.StatusOK {
			t.Errorf("%s: status %s (%v), want ok: the call ran once and succeeded", id, r.Status, r.Error)
		}
	}
	time.Sleep(3 * time.Second) // longer than the ack wait: a call handed back would be back by now
	mu.Lock()
	defer mu.Unlock()
	for _, id := range []string{"pay-1", "look-1"} {
		if runs[id] != 1 || b.results.count(id) != 1 {
			t.Errorf("%s ran %d times and has %d results; want 1 and 1", id, runs[id], b.results.count(id))
		}
	}
}
