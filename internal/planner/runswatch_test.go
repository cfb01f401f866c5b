package planner

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/internal/testsupport/plannertest"
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
	w, err := jsutil.Watch(ctx, p.runs.kv, jetstream.AllKeys)
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
