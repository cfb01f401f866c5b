package planner

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/internal/testsupport/opstest"
	"github.com/toolfleet/toolfleet/internal/testsupport/plannertest"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// A runs watch that breaks (nats.go closes a watch whose consumer it cannot create
// again) is started again from the next revision: the replica's run index goes on
// following the bucket, and a run started after the break is there, with its end.
func TestRunsWatchStartsAgainWhenItBreaks(t *testing.T) {
	b := setup(t, nil)
	// A second replica that follows the runs (and takes no step) through a watch the
	// test breaks.
	models, def := plannertest.Models(t, nil)
	p, err := New(b.ctx, b.srv.Connect(), Config{Models: models, DefaultModel: def, Events: b.cfg, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(b.ctx)
	w, err := jsutil.Watch(ctx, p.runs.KV(), jetstream.AllKeys)
	if err != nil {
		t.Fatal(err)
	}
	followed := make(chan struct{})
	go func() { defer close(followed); p.watchRuns(ctx, w) }()
	defer func() { cancel(); <-followed }()

	ended := func(what string) string {
		t.Helper()
		run, err := b.p.Start(b.ctx, StartRequest{Input: what})
		if err != nil {
			t.Fatal(err)
		}
		if done, err := b.p.Wait(b.ctx, run.ID); err != nil || done.Status != StatusDone {
			t.Fatalf("%s: %v %v", what, done, err)
		}
		return run.ID
	}
	indexed := func(id string) bool {
		p.index.mu.RLock()
		defer p.index.mu.RUnlock()
		ir := p.index.byID[id]
		return ir != nil && ir.sum.Status == StatusDone
	}
	first := ended("before the break")
	natstest.Eventually(t, waitTimeout, "the first run, ended, in the index", func() bool { return indexed(first) })
	if err := w.Stop(); err != nil { // as nats.go closes a broken watch
		t.Fatal(err)
	}
	second := ended("after the break")
	natstest.Eventually(t, waitTimeout, "the second run, ended, in the index", func() bool { return indexed(second) })
	if n := p.index.size(); n != 2 {
		t.Fatalf("the index holds %d runs, want 2", n)
	}
}

// An operator sees a broken watch: each of the planner's watches shows 1 while it
// follows its bucket and 0 while it is broken and being started again, and counts its
// restarts. The runs watch breaks as nats.go closes a broken watch; the catalog watch
// breaks when its bucket is gone, is down while it cannot watch it, and follows it
// again once it is back.
func TestWatchesAreMeasured(t *testing.T) {
	b := setup(t, nil)
	reg := prometheus.NewRegistry()
	models, def := plannertest.Models(t, nil)
	p, err := New(b.ctx, b.srv.Connect(), Config{Models: models, DefaultModel: def, Events: b.cfg, Log: zerolog.Nop(), Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(b.ctx)
	w, err := jsutil.Watch(ctx, p.runs.KV(), jetstream.AllKeys)
	if err != nil {
		t.Fatal(err)
	}
	var following sync.WaitGroup
	following.Go(func() { p.watchRuns(ctx, w) })
	following.Go(func() { p.cat.follow(ctx) })
	defer func() { cancel(); following.Wait() }()
	watch := func(name string, up, restarts float64) func() bool {
		return func() bool {
			m := opstest.Metrics(t, reg)
			return m[`toolfleet_planner_watch_up{watch="`+name+`"}`] == up &&
				m[`toolfleet_planner_watch_restarts_total{watch="`+name+`"}`] == restarts
		}
	}
	natstest.Eventually(t, waitTimeout, "the runs watch up", watch("runs", 1, 0))
	natstest.Eventually(t, waitTimeout, "the catalog watch up", watch("catalog", 1, 0))

	if err := w.Stop(); err != nil { // as nats.go closes a broken watch
		t.Fatal(err)
	}
	natstest.Eventually(t, waitTimeout, "the runs watch up again, restarted once", watch("runs", 1, 1))

	// nats.go closes a watch whose stream is gone after two missed heartbeats (10s).
	if err := b.js.DeleteKeyValue(b.ctx, events.BucketCatalog); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 30*time.Second, "the catalog watch down", watch("catalog", 0, 0))
	if err := jsutil.Ensure(b.ctx, b.js, b.cfg); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 30*time.Second, "the catalog watch up again, restarted once", watch("catalog", 1, 1))
	cat, err := jsutil.OpenCatalog(b.ctx, b.js, b.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := cat.Put(b.ctx, tools.Definition{Name: "back", Parameters: json.RawMessage(`{"type":"object"}`)}); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, waitTimeout, "the catalog followed again", func() bool { _, ok := p.cat.get("back"); return ok })

	cancel()
	following.Wait()
	natstest.Eventually(t, waitTimeout, "both watches down once stopped", func() bool {
		return watch("runs", 0, 1)() && watch("catalog", 0, 1)()
	})
}
