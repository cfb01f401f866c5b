package pick_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/internal/shareddata"
	"github.com/toolfleet/toolfleet/internal/toolret"
	"github.com/toolfleet/toolfleet/pkg/pick"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// corpus is the real tools and queries of both benchmarks, loaded once.
var corpus = sync.OnceValues(func() ([]tools.Definition, []string) {
	dir := shareddata.Dir("toolret")
	if dir == "" {
		return nil, nil
	}
	var defs []tools.Definition
	var queries []string
	for _, f := range toolret.Folders {
		b, err := toolret.Load(dir, f)
		if err != nil {
			panic(err)
		}
		defs = append(defs, b.Tools...)
		for _, q := range b.Queries {
			queries = append(queries, q.Query)
		}
	}
	return defs, queries
})

// syntheticCatalog returns n tools: the real corpus first, then tools recombined from
// it (the name's verb from one tool and object from another, the description halves and
// the parameters of others), so that the vocabulary and its frequencies stay realistic.
func syntheticCatalog(tb testing.TB, n int) ([]tools.Definition, []string) {
	real, queries := corpus()
	if real == nil {
		shareddata.Require(tb, "toolret") // skips with the message
	}
	rng := rand.New(rand.NewPCG(1, 2))
	out := make([]tools.Definition, 0, n)
	out = append(out, real[:min(n, len(real))]...)
	for i := len(out); i < n; i++ {
		a, b, c := real[rng.IntN(len(real))], real[rng.IntN(len(real))], real[rng.IntN(len(real))]
		verb, _, _ := strings.Cut(a.Name, "_")
		wa, wb := strings.Fields(a.Description), strings.Fields(b.Description)
		d := tools.Definition{Type: "function", Safe: true,
			Name:        fmt.Sprintf("%s_%s_%d", verb, lastWord(b.Name), i),
			Description: strings.Join(append(wa[:len(wa)/2:len(wa)/2], wb[len(wb)/2:]...), " "),
			Parameters:  c.Parameters, Tags: b.Tags}
		if len(d.Name) > 64 {
			d.Name = fmt.Sprintf("tool_%d", i)
		}
		out = append(out, d)
	}
	return out, queries
}

func lastWord(name string) string {
	if i := strings.LastIndexAny(name, "_"); i >= 0 && i < len(name)-1 {
		name = name[i+1:]
	}
	if len(name) > 24 {
		name = name[:24]
	}
	return name
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkPick measures one pick (default options: BM25, top 3) over catalogs of
// growing size, with the real benchmark queries in turn. Run with -cpu 1 for the
// one-core figures. Reports p50/p99 latency (wall clock, and the thread's CPU time,
// which a busy shared machine inflates far less), index build time and index bytes per
// tool (heap growth of building the catalog, the definitions themselves excluded).
func BenchmarkPick(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("tools=%d", n), func(b *testing.B) {
			if n == 100_000 && testing.Short() {
				b.Skip("100k tools skipped in -short")
			}
			defs, queries := syntheticCatalog(b, n)
			before := heapInUse()
			start := time.Now()
			cat, err := pick.NewCatalog(defs)
			build := time.Since(start)
			if err != nil {
				b.Fatal(err)
			}
			perTool := float64(heapInUse()-before) / float64(n)
			runtime.KeepAlive(cat)

			ctx := b.Context()
			lat := make([]time.Duration, 0, 1<<16)
			cpu := make([]time.Duration, 0, 1<<16)
			i := 0
			runtime.LockOSThread() // so that the thread's CPU clock is the pick's
			defer runtime.UnlockOSThread()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				q := queries[i%len(queries)]
				i++
				c0, t0 := threadCPU(), time.Now()
				if _, err := pick.Pick(ctx, q, cat, pick.Options{}); err != nil {
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
			b.ReportMetric(float64(build.Milliseconds()), "build-ms")
			b.ReportMetric(perTool, "index-B/tool")
		})
	}
}

// BenchmarkCatalogPut measures an incremental change (replace one tool) in a catalog of
// 10,000 tools: the cost of publishing a new snapshot.
func BenchmarkCatalogPut(b *testing.B) {
	defs, _ := syntheticCatalog(b, 10_000)
	cat, err := pick.NewCatalog(defs)
	if err != nil {
		b.Fatal(err)
	}
	i := 0
	for b.Loop() {
		d := defs[i%len(defs)]
		d.Description += fmt.Sprintf(" revision %d", i)
		i++
		if err := cat.Put(d); err != nil {
			b.Fatal(err)
		}
	}
}
