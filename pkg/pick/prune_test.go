package pick_test

import (
	"fmt"
	"testing"

	"github.com/toolfleet/toolfleet/pkg/pick"
)

// TestEarlyTerminationIsExact ranks the real benchmark queries over 10,000 tools with
// the default BM25 (which stops scanning common terms early) and with exhaustive
// scoring: the results must be the same tools with the same scores, with and without
// filters, for several k.
func TestEarlyTerminationIsExact(t *testing.T) {
	t.Parallel()
	n := 10_000
	if testing.Short() {
		n = 2_000
	}
	defs, queries := syntheticCatalog(t, n)
	for i := range defs {
		if i%5 == 0 {
			defs[i].Safe = false // so that the safety filter removes some top tools
		}
	}
	cat, err := pick.NewCatalog(defs)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	// Every fourth query (about 600) per configuration keeps the run short; -short takes
	// every twentieth over 2,000 tools.
	step := 4
	if testing.Short() {
		step = 20
	}
	for _, k := range []int{1, 3, 10} {
		for _, unsafe := range []bool{false, true} {
			opts := pick.Options{MaxCandidates: k, MinScore: new(0.0), AllowUnsafe: unsafe}
			for qi := 0; qi < len(queries); qi += step {
				q := queries[qi]
				got, err := pick.Pick(ctx, q, cat, opts)
				if err != nil {
					t.Fatal(err)
				}
				ref := opts
				ref.Scorer = pick.ExhaustiveBM25
				want, err := pick.Pick(ctx, q, cat, ref)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != len(want) {
					t.Fatalf("k=%d unsafe=%v %q: %d results, exhaustive %d", k, unsafe, q, len(got), len(want))
				}
				for i := range got {
					if got[i].Name != want[i].Name || fmt.Sprintf("%.6f", got[i].Score) != fmt.Sprintf("%.6f", want[i].Score) {
						t.Fatalf("k=%d unsafe=%v %q: rank %d is %s %.6f, exhaustive %s %.6f",
							k, unsafe, q, i+1, got[i].Name, got[i].Score, want[i].Name, want[i].Score)
					}
				}
			}
		}
	}
}

// TestLearnedEarlyTerminationIsExact is TestEarlyTerminationIsExact for the learned
// scorer: the tools that usage lifted are matched from the start of term-by-term
// scoring, and it must rank as scoring every posting does.
func TestLearnedEarlyTerminationIsExact(t *testing.T) {
	t.Parallel()
	n, step := 10_000, 4
	if testing.Short() {
		n, step = 2_000, 20
	}
	defs, queries := syntheticCatalog(t, n)
	cat, err := pick.NewCatalog(defs)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, len(defs))
	for i, d := range defs {
		names[i] = d.Name
	}
	l := learnedFor(t, names, queries[:len(queries)/2]) // half the queries were seen
	for _, k := range []int{1, 3, 10} {
		opts := pick.Options{MaxCandidates: k, MinScore: new(0.0)}
		for qi := 0; qi < len(queries); qi += step {
			q := queries[qi]
			opts.Scorer = pick.LearnedWithPath(l, "", false)
			got, err := pick.Pick(t.Context(), q, cat, opts)
			if err != nil {
				t.Fatal(err)
			}
			opts.Scorer = pick.LearnedWithPath(l, "", true)
			want, err := pick.Pick(t.Context(), q, cat, opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("k=%d %q: %d results, exhaustive %d", k, q, len(got), len(want))
			}
			for i := range got {
				if got[i].Name != want[i].Name || fmt.Sprintf("%.5f", got[i].Score) != fmt.Sprintf("%.5f", want[i].Score) {
					t.Fatalf("k=%d %q: rank %d is %s %.6f, exhaustive %s %.6f", k, q, i+1, got[i].Name, got[i].Score, want[i].Name, want[i].Score)
				}
			}
		}
	}
}
