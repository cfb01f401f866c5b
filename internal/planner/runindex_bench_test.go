package planner

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// indexBenchRuns is how many stored runs the index benchmarks hold.
const indexBenchRuns = 100_000

// benchRunState is the control state of the i-th of the benchmarks' runs, as the runs
// bucket stores it: a finished run of one tenant that made a call, with a
// realistic input.
func benchRunState(i int, at time.Time) []byte {
	fin := at.Add(2 * time.Second)
	r := &Run{ID: fmt.Sprintf("rBENCH%016d", i), Status: StatusDone, Termination: TerminationCompleted, Model: "main",
		Tools: []string{"add", "echo"}, Limits: Limits{}.WithDefaults(), Tenant: "acme", Role: "user",
		InputPreview: fmt.Sprintf("Please add the numbers of invoice %d and tell me the total, then echo it back to the user.", i),
		CallCount:    1, Called: []string{"add"}, Step: 1, Recorded: 1, Usage: provider.Usage{InputTokens: 120, OutputTokens: 30},
		Calls: []*CallRecord{{ID: callID("r", 0, 0), ModelCallID: "call_1", Name: "add", Status: "ok", Validated: true,
			Executor: "executor-1", Attempts: 1, CalledAt: at, FinishedAt: &fin, DurationMS: 3}},
		CreatedAt: at, Deadline: at.Add(time.Hour), FinishedAt: &fin}
	b, err := json.Marshal(r.Control())
	if err != nil {
		panic(err)
	}
	return b
}

// BenchmarkListRuns lists one page (50 runs) of a tenant with 100k stored runs, from the
// run index: the newest page, a page deep in the list (by cursor), and a filter that
// matches no run (q), which scans the tenant's whole index: the worst case. It reports
// the index's memory per run.
func BenchmarkListRuns(b *testing.B) {
	x := newRunIndex()
	base := time.Now().Add(-24 * time.Hour)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range indexBenchRuns {
		w, err := decodeWatched(benchRunState(i, base.Add(time.Duration(i)*time.Millisecond)))
		if err != nil {
			b.Fatal(err)
		}
		x.put(uint64(i+1), w)
	}
	x.loaded()
	runtime.GC()
	runtime.ReadMemStats(&after)
	perRun := float64(after.HeapAlloc-before.HeapAlloc) / indexBenchRuns
	mid := x.listRuns("acme", RunFilter{Limit: 50}, &runCursor{at: base.Add(indexBenchRuns / 2 * time.Millisecond), id: "~"}, time.Now())
	if len(mid.Runs) != 50 {
		b.Fatalf("a page from the middle has %d runs", len(mid.Runs))
	}
	cursor, err := decodeRunCursor(mid.Next)
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name  string
		f     RunFilter
		after *runCursor
		want  int
	}{
		{"newest", RunFilter{Limit: 50}, nil, 50},
		{"cursor", RunFilter{Limit: 50}, &cursor, 50},
		{"q-no-match", RunFilter{Limit: 50, Q: "no such text"}, nil, 0},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if page := x.listRuns("acme", bc.f, bc.after, time.Now()); len(page.Runs) != bc.want {
					b.Fatalf("%d runs, want %d", len(page.Runs), bc.want)
				}
			}
			b.ReportMetric(perRun, "index-B/run")
		})
	}
}

// BenchmarkIndexRebuild is a replica's start with 100k stored runs: the runs bucket's
// watch delivers every run's value and the index is built from them, as watchRuns does.
func BenchmarkIndexRebuild(b *testing.B) {
	fx := natstest.StartJetStream(b, events.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	kv, err := jsutil.EnsurePlanner(ctx, fx.JS, fx.Cfg)
	if err != nil {
		b.Fatal(err)
	}
	base := time.Now().Add(-time.Hour)
	for i := range indexBenchRuns {
		if _, err := fx.JS.PublishAsync("$KV."+events.BucketRuns+"."+fmt.Sprintf("rBENCH%016d", i), benchRunState(i, base.Add(time.Duration(i)*time.Millisecond))); err != nil {
			b.Fatal(err)
		}
		if i%1000 == 999 {
			<-fx.JS.PublishAsyncComplete()
		}
	}
	<-fx.JS.PublishAsyncComplete()
	for b.Loop() {
		x := newRunIndex()
		w, err := kv.WatchAll(ctx)
		if err != nil {
			b.Fatal(err)
		}
		for e := range w.Updates() {
			if e == nil {
				x.loaded()
				break
			}
			x.observe(e)
		}
		_ = w.Stop()
		if n := x.size(); n != indexBenchRuns {
			b.Fatalf("the index holds %d runs, want %d", n, indexBenchRuns)
		}
	}
}
