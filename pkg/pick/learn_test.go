package pick

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

func newLearned(t testing.TB, cfg LearnConfig) *Learned {
	t.Helper()
	cfg.RefreshEvery = -1
	l, err := NewLearned(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func learn(t testing.TB, l *Learned, u Usage) {
	t.Helper()
	if err := l.Learn(u); err != nil {
		t.Fatal(err)
	}
}

func pickJSON(t *testing.T, cat *Catalog, input string, opts Options) ([]Result, string) {
	t.Helper()
	opts.Debug = true
	if opts.MinScore == nil {
		opts.MinScore = new(0.0) // a request half like earlier ones scores low, but first
	}
	res, err := Pick(t.Context(), input, cat, opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	return res, string(b)
}

// A tool used for requests like this one ranks first for the tenant that used it, with
// a learned reason and provenance; another tenant's picks, provenance included, are
// exactly the cold ones; with Share, every tenant's are shaped.
func TestLearnedRanksUsedToolFirstPerTenant(t *testing.T) {
	t.Parallel()
	cat := testCatalog(t)
	const req = "will it rain on saturday?"
	cold, coldJSON := pickJSON(t, cat, req, Options{})
	if len(cold) > 0 && cold[0].Name == "getForecast" {
		t.Fatalf("cold pick already ranks getForecast first: %v", resultNames(cold))
	}
	for _, share := range []bool{false, true} {
		l := newLearned(t, LearnConfig{Share: share})
		for i, r := range []string{"will it rain tomorrow in Oslo", "is rain likely this weekend", "rain or sun on monday?"} {
			learn(t, l, Usage{Tenant: "acme", Run: fmt.Sprint("r", i), Tool: "getForecast", Request: r})
		}
		res, js := pickJSON(t, cat, req, Options{Scorer: l.Scorer("acme")})
		if len(res) == 0 || res[0].Name != "getForecast" || !strings.Contains(res[0].Reason, `learned "rain"`) {
			t.Fatalf("share %v: acme's pick %s; want getForecast first, learned from rain", share, js)
		}
		d, ok := res[0].Provenance.Details.(*LearnedDetails)
		if !ok || d.Requests != 3 || !slices.Contains(d.Terms, "rain") || !(d.Learned > 0) || res[0].Provenance.Scorer != LearnedScorerName {
			t.Fatalf("share %v: provenance %s", share, js)
		}
		other, otherJSON := pickJSON(t, cat, req, Options{Scorer: l.Scorer("globex")})
		if share {
			if len(other) == 0 || other[0].Name != "getForecast" {
				t.Fatalf("shared: globex's pick %s; want acme's usage to count", otherJSON)
			}
			continue
		}
		// Isolated: the same results and scores as cold, and nothing learned in them.
		if !slices.Equal(resultNames(other), resultNames(cold)) || strings.Contains(otherJSON, "learned") || strings.Contains(otherJSON, "Oslo") {
			t.Fatalf("globex's pick %s\ndiffers from cold %s", otherJSON, coldJSON)
		}
		for i := range other {
			if other[i].Score != cold[i].Score || other[i].Reason != cold[i].Reason {
				t.Fatalf("globex's result %d = %+v, cold %+v", i, other[i], cold[i])
			}
		}
	}
}

// A definition whose parameters are not JSON (a catalog may hold one) still has a key
// of its own: two such definitions are not taken for one another.
func TestLearnKeyOfParametersNotJSON(t *testing.T) {
	a := tools.Definition{Name: "a", Description: "same", Parameters: json.RawMessage(`{"type":`)}
	b := tools.Definition{Name: "b", Description: "same", Parameters: json.RawMessage(`{"type":"obj`)}
	if LearnKey(a) == LearnKey(b) {
		t.Errorf("two definitions with different unreadable parameters share the key %s", LearnKey(a))
	}
	valid := tools.Definition{Description: "same", Parameters: json.RawMessage(`{"type":"object"}`)}
	if LearnKey(valid) == LearnKey(a) {
		t.Error("an unreadable definition takes a readable one's key")
	}
}

// What was learned for a tool stays while its description and schemas stay (a tag
// change keeps it) and stops counting when they change; a record for the new
// definition starts the tool over.
func TestLearnedFollowsDefinitionChanges(t *testing.T) {
	t.Parallel()
	cat := testCatalog(t)
	fc, _ := cat.Snapshot().Lookup("getForecast")
	forecast := cat.Snapshot().Definition(fc)
	l := newLearned(t, LearnConfig{})
	learn(t, l, Usage{Tool: "getForecast", Request: "will it rain tomorrow", Key: LearnKey(forecast)})
	first := func() string {
		res, _ := pickJSON(t, cat, "rain on saturday", Options{Scorer: l.Scorer("")})
		if len(res) == 0 {
			return ""
		}
		return res[0].Name
	}
	if got := first(); got != "getForecast" {
		t.Fatalf("first pick %q, want getForecast", got)
	}
	tagged := forecast
	tagged.Tags = []string{"new-tag"}
	if err := cat.Put(tagged); err != nil {
		t.Fatal(err)
	}
	if got := first(); got != "getForecast" {
		t.Fatalf("after a tag change: %q, want getForecast still", got)
	}
	changed := tagged
	changed.Description = "Seven day pollen count"
	if err := cat.Put(changed); err != nil {
		t.Fatal(err)
	}
	if got := first(); got == "getForecast" {
		t.Fatal("after a description change the old requests still count")
	}
	learn(t, l, Usage{Tool: "getForecast", Request: "pollen on saturday", Key: LearnKey(changed)})
	res, _ := pickJSON(t, cat, "rain on saturday", Options{Scorer: l.Scorer("")})
	if d, ok := res[0].Provenance.Details.(*LearnedDetails); !ok || d.Requests != 1 {
		t.Fatalf("after a record of the new definition: %+v; want 1 learned request", res[0].Provenance.Details)
	}
}

func TestLearnRefusesUnusableRecords(t *testing.T) {
	t.Parallel()
	l := newLearned(t, LearnConfig{})
	for _, u := range []Usage{{Request: "rain"}, {Tool: "x", Request: "  "}, {Tool: "x", Request: "the and of"}} {
		if err := l.Learn(u); !errors.Is(err, ErrUsage) {
			t.Fatalf("Learn(%+v) = %v, want ErrUsage", u, err)
		}
	}
	if st := l.Stats(); st.Dropped != 3 || st.Folded != 0 || st.Tools != 0 {
		t.Fatalf("stats %+v", st)
	}
	if _, err := NewLearned(LearnConfig{MaxRequests: -1}); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("negative bound: %v", err)
	}
}

// Tools used in the same runs lift each other: a request learned only for send_email
// lifts get_weather, used with it in every run.
func TestLearnedCoUsage(t *testing.T) {
	t.Parallel()
	cat := testCatalog(t)
	l := newLearned(t, LearnConfig{})
	for i := range 4 {
		run := fmt.Sprint("run", i)
		learn(t, l, Usage{Run: run, Tool: "send_email", Request: "mail my team the morning report"})
		learn(t, l, Usage{Run: run, Tool: "get_weather", Request: "current conditions"})
	}
	res, js := pickJSON(t, cat, "mail the morning report", Options{Scorer: l.Scorer(""), MinScore: new(0.0)})
	if len(res) < 2 || res[0].Name != "send_email" || res[1].Name != "get_weather" ||
		!strings.Contains(res[1].Reason, "used with send_email") {
		t.Fatalf("pick %s; want send_email, then get_weather used with it", js)
	}
}

// A full tool keeps its most used requests, weighed by age: one seen three times long
// ago gives way to new ones once its use has decayed below theirs.
func TestLearnedKeepsUsefulRequests(t *testing.T) {
	t.Parallel()
	l := newLearned(t, LearnConfig{MaxRequests: 2, HalfLife: 24 * time.Hour})
	day0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(u Usage, days int) Usage { u.At, u.Tool = day0.AddDate(0, 0, days), "t"; return u }
	for range 3 {
		learn(t, l, at(Usage{Request: "alpha request"}, 0))
	}
	learn(t, l, at(Usage{Request: "beta request"}, 0))
	learn(t, l, at(Usage{Request: "gamma request"}, 0)) // replaces beta (1 use), not alpha (3)
	has := func(word string) bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		h := termHash(word)
		for _, r := range l.sets[""].tools["t"].reqs {
			if slices.Contains(r.terms, h) {
				return true
			}
		}
		return false
	}
	if !has("alpha") || has("beta") || !has("gamma") {
		t.Fatal("want alpha (used three times) and gamma kept, beta dropped")
	}
	learn(t, l, at(Usage{Request: "delta request"}, 10)) // alpha's 3 uses decayed to 0.003
	learn(t, l, at(Usage{Request: "epsilon request"}, 10))
	if has("alpha") || has("gamma") || !has("delta") || !has("epsilon") {
		t.Fatal("want the old requests dropped for the new ones")
	}
}

// One million usage records stay within the per-tool bounds, and the memory they take
// is bounded by the configuration, not by the records: folding the second half costs
// no more heap than the first. The most used request of a tool survives all of it.
func TestLearnedBoundedMemoryMillionRecords(t *testing.T) {
	if testing.Short() {
		t.Skip("1M records skipped in -short")
	}
	const nTools, n = 2000, 1_000_000
	words := make([]string, 5000)
	for i := range words {
		words[i] = fmt.Sprintf("w%dx%c", i, 'a'+rune(i%26))
	}
	rng := rand.New(rand.NewPCG(7, 8))
	l := newLearned(t, LearnConfig{})
	cfg := l.Config()
	var req strings.Builder
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	base := heap()
	var half uint64
	start := time.Now()
	for i := range n {
		if i == n/2 {
			l.Refresh()
			half = heap()
		}
		u := Usage{Tenant: fmt.Sprint("t", i%3), Run: fmt.Sprint("run", i/3), At: time.Unix(int64(i), 0)}
		if i%50 == 0 {
			u.Tool, u.Request, u.Tenant = "tool_0", "favourite frequent request", "t0"
		} else {
			u.Tool = fmt.Sprint("tool_", rng.IntN(nTools))
			req.Reset()
			for range 6 + rng.IntN(20) {
				req.WriteString(words[rng.IntN(len(words))])
				req.WriteByte(' ')
			}
			u.Request = req.String()
		}
		learn(t, l, u)
	}
	took := time.Since(start)
	l.Refresh()
	full := heap()
	st := l.Stats()
	t.Logf("%d records in %s (%.0f/s); heap %.1f MiB at half, %.1f MiB at the end; %+v",
		n, took, n/took.Seconds(), float64(half-base)/(1<<20), float64(full-base)/(1<<20), st)
	if st.Folded != n || st.MaxToolRequests > cfg.MaxRequests || st.MaxRequestTerms > cfg.MaxTerms ||
		st.MaxToolPartners > cfg.MaxPartners || st.Runs > 3*cfg.MaxRuns {
		t.Fatalf("bounds exceeded: %+v (config %+v)", st, cfg)
	}
	// Each kept request: its terms (4 B each) and about 40 B; each partner about 40 B;
	// twice that for the pick index; per tool 1 KiB of maps and slices.
	perTool := cfg.MaxRequests*(cfg.MaxTerms*4+40) + cfg.MaxPartners*40
	bound := uint64(st.Tools*(2*perTool+1024) + 3*cfg.MaxRuns*512)
	if full-base > bound {
		t.Fatalf("heap grew %d B for %d tools, above the bound %d B", full-base, st.Tools, bound)
	}
	if full > half && full-half > (half-base)/4 {
		t.Fatalf("heap kept growing: %d B at half, %d B at the end", half-base, full-base)
	}
	cat, err := NewCatalog([]tools.Definition{def("tool_0", "zzz"), def("tool_1", "zzz")})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Pick(t.Context(), "my favourite frequent request", cat, Options{Scorer: l.Scorer("t0")})
	if err != nil || len(res) == 0 || res[0].Name != "tool_0" {
		t.Fatalf("the most used request was lost: %+v, %v", res, err)
	}
}

// Picks and learning run at once (run with -race): picks read a consistent index while
// records are folded in and indexes rebuilt.
func TestLearnedConcurrentLearnAndPick(t *testing.T) {
	t.Parallel()
	cat := testCatalog(t)
	l := newLearned(t, LearnConfig{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 2000 {
			learn(t, l, Usage{Tenant: fmt.Sprint("t", i%2), Run: fmt.Sprint(i / 3), Tool: "getForecast", Request: fmt.Sprint("rain forecast ", i%50)})
		}
	}()
	for i := 0; ; i++ {
		select {
		case <-done:
			res, _ := pickJSON(t, cat, "rain", Options{Scorer: l.Scorer("t1")})
			if len(res) == 0 || res[0].Name != "getForecast" {
				t.Fatalf("after learning: %v", resultNames(res))
			}
			return
		default:
		}
		if _, err := Pick(t.Context(), "rain forecast", cat, Options{Scorer: l.Scorer(fmt.Sprint("t", i%2))}); err != nil {
			t.Fatal(err)
		}
	}
}

// A pick reads the last index built without the lock that learning and rebuilding
// hold: while a rebuild (or a Learn) holds it, picks still answer, from the previous
// index, with what it learned.
func TestLearnedPickDoesNotWaitForRebuild(t *testing.T) {
	t.Parallel()
	cat := testCatalog(t)
	l, err := NewLearned(LearnConfig{RefreshEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	learn(t, l, Usage{Tenant: "acme", Run: "r1", Tool: "getForecast", Request: "will it rain tomorrow in Oslo"})
	l.Refresh()
	learn(t, l, Usage{Tenant: "acme", Run: "r2", Tool: "getForecast", Request: "is rain likely this weekend"})
	l.mu.Lock() // as a rebuild of a large index does for the whole of its build
	got := make(chan []Result, 1)
	go func() {
		res, _ := Pick(t.Context(), "will it rain on saturday?", cat, Options{Scorer: l.Scorer("acme"), MinScore: new(0.0)})
		got <- res
	}()
	select {
	case res := <-got:
		l.mu.Unlock()
		if len(res) == 0 || res[0].Name != "getForecast" || !strings.Contains(res[0].Reason, "from 1 requests") {
			t.Fatalf("pick during a rebuild: %+v; want getForecast first, from the index built before", res)
		}
	case <-time.After(30 * time.Second):
		l.mu.Unlock()
		<-got
		t.Fatal("a pick waited for the lock that learning and rebuilding hold")
	}
}

// The background rebuild belongs to Run: a pick that finds its index stale starts no
// goroutine of its own, it asks Run and reads the index it has; Run rebuilds it (here
// once the lock a long rebuild or Learn holds is free), and when its context ends Run
// returns and leaves nothing running.
func TestLearnedRunOwnsTheRebuild(t *testing.T) {
	running := goleak.IgnoreCurrent()
	cat := testCatalog(t)
	l, err := NewLearned(LearnConfig{RefreshEvery: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	learn(t, l, Usage{Tenant: "acme", Run: "r1", Tool: "getForecast", Request: "will it rain tomorrow in Oslo"})
	l.Refresh()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx, cat) }()
	natstest.Eventually(t, 10*time.Second, "Run to start", l.running.Load)
	if err := l.Run(ctx, cat); err == nil {
		t.Fatal("a second Run did not refuse")
	}
	learn(t, l, Usage{Tenant: "acme", Run: "r2", Tool: "getForecast", Request: "is rain likely this weekend"})
	requests := func() string {
		res, _ := pickJSON(t, cat, "will it rain on saturday?", Options{Scorer: l.Scorer("acme")})
		if len(res) == 0 {
			return ""
		}
		return res[0].Reason
	}
	l.mu.Lock()
	before := runtime.NumGoroutine()
	if got := requests(); !strings.Contains(got, "from 1 requests") {
		l.mu.Unlock()
		t.Fatalf("pick with the index stale: %q; want the index built before, from 1 request", got)
	}
	if after := runtime.NumGoroutine(); after > before {
		l.mu.Unlock()
		t.Fatalf("a pick that found its index stale left %d goroutines running", after-before)
	}
	l.mu.Unlock()
	natstest.Eventually(t, 10*time.Second, "Run to rebuild the stale index", func() bool {
		return strings.Contains(requests(), "from 2 requests")
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	goleak.VerifyNone(t, running)
}
