package pick_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/pkg/pick"
)

// learnedFor folds min(20·n, 500,000) usage records into a Learned: the benchmark
// queries in turn, each to a tool of the catalog drawn at random, so that learned fields
// are full at 1,000 tools and the commonest words' learned postings span the catalog.
func learnedFor(tb testing.TB, defs []string, queries []string) *pick.Learned {
	l, err := pick.NewLearned(pick.LearnConfig{})
	if err != nil {
		tb.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	n := min(20*len(defs), 500_000)
	for i := range n {
		_ = l.Learn(pick.Usage{Run: fmt.Sprint(i / 2), Tool: defs[rng.IntN(len(defs))], Request: queries[i%len(queries)]})
	}
	l.Refresh()
	return l
}

// BenchmarkPickLearned measures one pick over catalogs of growing size, cold (BM25) and
// learned (bm25+usage after min(20·n, 500k) usage records), with the real benchmark
// queries in turn. Run with -cpu 1 for the one-core figures. Reports p50/p99 wall and
// thread-CPU latency, and for learned the heap the learned index takes per record.
func BenchmarkPickLearned(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		for _, mode := range []string{"cold", "learned"} {
			b.Run(fmt.Sprintf("tools=%d/%s", n, mode), func(b *testing.B) {
				if n == 100_000 && testing.Short() {
					b.Skip("100k tools skipped in -short")
				}
				defs, queries := syntheticCatalog(b, n)
				cat, err := pick.NewCatalog(defs)
				if err != nil {
					b.Fatal(err)
				}
				opts := pick.Options{}
				if mode == "learned" {
					names := make([]string, len(defs))
					for i, d := range defs {
						names[i] = d.Name
					}
					before := heapInUse()
					l := learnedFor(b, names, queries)
					b.ReportMetric(float64(heapInUse()-before)/float64(l.Stats().Folded), "learned-B/record")
					opts.Scorer = l.Scorer("")
				}
				ctx := b.Context()
				lat := make([]time.Duration, 0, 1<<16)
				cpu := make([]time.Duration, 0, 1<<16)
				i := 0
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					q := queries[i%len(queries)]
					i++
					c0, t0 := threadCPU(), time.Now()
					if _, err := pick.Pick(ctx, q, cat, opts); err != nil {
						b.Fatal(err)
					}
					lat = append(lat, time.Since(t0))
					cpu = append(cpu, threadCPU()-c0)
				}
				b.StopTimer()
				for _, m := range []struct {
					unit string
					d    []time.Duration
				}{{"", lat}, {"cpu-", cpu}} {
					slices.Sort(m.d)
					b.ReportMetric(float64(m.d[len(m.d)/2].Nanoseconds())/1e3, "p50-"+m.unit+"µs")
					b.ReportMetric(float64(m.d[len(m.d)*99/100].Nanoseconds())/1e3, "p99-"+m.unit+"µs")
				}
			})
		}
	}
}

// BenchmarkLearn measures folding usage records in (records/s): the benchmark queries
// in turn, to tools of a 10,000-tool catalog drawn at random.
func BenchmarkLearn(b *testing.B) {
	_, queries := syntheticCatalog(b, 1)
	l, err := pick.NewLearned(pick.LearnConfig{})
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	tools := make([]string, 10_000)
	for i := range tools {
		tools[i] = fmt.Sprint("tool_", i)
	}
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		_ = l.Learn(pick.Usage{Run: fmt.Sprint(i / 2), Tool: tools[rng.IntN(len(tools))], Request: queries[i%len(queries)]})
		i++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkLearnedStages shows where a learned pick's time goes at 10,000 tools: each
// benchmark query's pick is timed stage by stage (pick.LearnedStages) and each stage's
// p50 and p99 over the picks are reported in µs: analysing the words, scoring the
// learned fields, ranking by BM25 alone, and the whole learned Score after them.
func BenchmarkLearnedStages(b *testing.B) {
	defs, queries := syntheticCatalog(b, 10_000)
	cat, err := pick.NewCatalog(defs)
	if err != nil {
		b.Fatal(err)
	}
	names := make([]string, len(defs))
	for i, d := range defs {
		names[i] = d.Name
	}
	l := learnedFor(b, names, queries)
	var stages [4][]time.Duration
	ctx := b.Context()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	i := 0
	for b.Loop() {
		a, f, c, t := pick.LearnedStages(ctx, l, cat, queries[i%len(queries)])
		i++
		for j, d := range []time.Duration{a, f, c, t} {
			stages[j] = append(stages[j], d)
		}
	}
	b.StopTimer()
	for j, name := range []string{"analyse", "learned-field", "cold-rank", "score"} {
		d := stages[j]
		slices.Sort(d)
		b.ReportMetric(float64(d[len(d)/2].Nanoseconds())/1e3, name+"-p50-µs")
		b.ReportMetric(float64(d[len(d)*99/100].Nanoseconds())/1e3, name+"-p99-µs")
	}
	b.ReportMetric(0, "ns/op")
}
