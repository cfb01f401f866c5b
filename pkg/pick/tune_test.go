package pick_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/internal/toolret"
	"github.com/toolfleet/toolfleet/pkg/pick"
)

// learnBenchmark folds queries of b into l as tenant's usage (each query a run of its
// relevant tools), in the order an evaluation feeds them (toolret.ArrivalOrder).
func learnBenchmark(t *testing.T, l *pick.Learned, b *toolret.Benchmark, tenant string, qs []toolret.Query) {
	t.Helper()
	for _, i := range toolret.ArrivalOrder(len(qs)) {
		q := qs[i]
		for _, id := range q.Relevant {
			name, ok := b.ToolName(id)
			if !ok {
				t.Fatalf("query %s names unknown tool %s", q.ID, id)
			}
			if err := l.Learn(pick.Usage{Tenant: tenant, Run: tenant + "/" + q.ID, Tool: name, Request: q.Query}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// tuneOf returns what tuning chose for tenant.
func tuneOf(t *testing.T, res []pick.TuneResult, tenant string) pick.TuneResult {
	t.Helper()
	for _, r := range res {
		if r.Tenant == tenant {
			return r
		}
	}
	t.Fatalf("no tuning of tenant %q in %+v", tenant, res)
	return pick.TuneResult{}
}

// Self-tuning chooses a different setting for a ToolLens-like usage log (requests that
// resemble each other: learning counts much more) than for a Seal-Tools-like one
// (requests that rarely do). On the part of its log it held out, the ToolLens-like
// choice beats the fixed defaults (Weight 1, CoUsage 0.1, squared) by far; the
// Seal-Tools-like one does at least as well as they do (no setting beats them there
// by more than chance, so the defaults are kept).
func TestSelfTuningChoosesPerUsage(t *testing.T) {
	dir := qualityData(t)
	chosen := map[string]pick.TuneResult{}
	for _, folder := range toolret.Folders {
		b, err := toolret.Load(dir, folder)
		if err != nil {
			t.Fatal(err)
		}
		cat, err := pick.NewCatalog(b.Tools)
		if err != nil {
			t.Fatal(err)
		}
		l, err := pick.NewLearned(pick.LearnConfig{})
		if err != nil {
			t.Fatal(err)
		}
		learnBenchmark(t, l, b, "acme", b.Queries)
		before := tuneOf(t, l.Tunings(), "acme")
		if before.Tuned || before.Tuning != (pick.Tuning{Weight: 1, CoUsage: 0.1, Power: 2}) {
			t.Fatalf("%s: before tuning %+v; want the defaults", folder, before)
		}
		res, err := l.Tune(t.Context(), cat.Snapshot())
		if err != nil {
			t.Fatal(err)
		}
		r := tuneOf(t, res, "acme")
		t.Logf("%-9s chose %s: held-out nDCG@10 %.2f on %d of %d runs, fixed defaults %.2f (took %s)",
			folder, r.Tuning, 100*r.Score, r.HeldOut, r.Runs, 100*r.DefaultScore, r.Took)
		if !r.Tuned || r.HeldOut != r.Runs/5 || r.Score < r.DefaultScore || folder == "toollens" && !(r.Score > r.DefaultScore+0.1) {
			t.Errorf("%s: tuning %+v; want a setting that does at least as well as the defaults on the most recent fifth of the log (ToolLens: 10 points better)", folder, r)
		}
		chosen[folder] = r
	}
	if lens, seal := chosen["toollens"].Tuning, chosen["sealtools"].Tuning; lens == seal || !(lens.Weight > seal.Weight) {
		t.Errorf("ToolLens-like usage chose %s, Seal-Tools-like %s; want more weight on what was learned for ToolLens", lens, seal)
	}
}

// A tenant's tuning reads its own log only: the same records give the same choice,
// scores and held-out runs whether or not another tenant's records come between them,
// and a tenant with too few runs keeps the defaults however much the others have.
func TestSelfTuningReadsOnlyItsTenantsLog(t *testing.T) {
	dir := qualityData(t)
	b, err := toolret.Load(dir, "toollens")
	if err != nil {
		t.Fatal(err)
	}
	cat, err := pick.NewCatalog(b.Tools)
	if err != nil {
		t.Fatal(err)
	}
	tune := func(withOther bool) []pick.TuneResult {
		l, err := pick.NewLearned(pick.LearnConfig{})
		if err != nil {
			t.Fatal(err)
		}
		// Every other query is acme's, in arrival order; globex's come between them.
		var acme, other []toolret.Query
		for k, i := range toolret.ArrivalOrder(len(b.Queries)) {
			if k%2 == 0 {
				acme = append(acme, b.Queries[i])
			} else if len(other) < 200 {
				other = append(other, b.Queries[i])
			}
		}
		for i := range acme {
			learnBenchmark(t, l, b, "acme", acme[i:i+1])
			if withOther && i < len(other) {
				learnBenchmark(t, l, b, "globex", other[i:i+1])
			}
		}
		res, err := l.Tune(t.Context(), cat.Snapshot())
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	alone, mixed := tuneOf(t, tune(false), "acme"), tuneOf(t, tune(true), "acme")
	alone.At, alone.Took, mixed.At, mixed.Took = time.Time{}, 0, time.Time{}, 0
	if fmt.Sprintf("%+v", alone) != fmt.Sprintf("%+v", mixed) || !alone.Tuned || alone.Tuning == (pick.Tuning{Weight: 1, CoUsage: 0.1, Power: 2}) {
		t.Errorf("acme's tuning alone %+v\nwith globex's records between its own %+v\nwant the same, a setting of its own", alone, mixed)
	}
	if g := tuneOf(t, tune(true), "globex"); g.Tuned || g.Runs != 200 || g.Tuning != (pick.Tuning{Weight: 1, CoUsage: 0.1, Power: 2}) {
		t.Errorf("globex (200 runs, 40 to hold out) tuned %+v; want the defaults", g)
	}
}

// A tuning that finds none of the held-out runs' tools in the catalog (a picker whose
// catalog is not loaded yet) chooses nothing and leaves the tenant to be tuned again,
// rather than keeping the defaults until a tenth of its log is new.
func TestSelfTuningWaitsForTheCatalog(t *testing.T) {
	dir := qualityData(t)
	b, err := toolret.Load(dir, "toollens")
	if err != nil {
		t.Fatal(err)
	}
	l, err := pick.NewLearned(pick.LearnConfig{})
	if err != nil {
		t.Fatal(err)
	}
	learnBenchmark(t, l, b, "acme", b.Queries)
	empty, err := pick.NewCatalog(nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := l.Tune(t.Context(), empty.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	if r := tuneOf(t, res, "acme"); r.Tuned {
		t.Fatalf("tuned on an empty catalog: %+v", r)
	}
	cat, err := pick.NewCatalog(b.Tools)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx, cat) }()
	natstest.Eventually(t, 30*time.Second, "Run to tune acme once the catalog is there", func() bool {
		return tuneOf(t, l.Tunings(), "acme").Tuned
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
