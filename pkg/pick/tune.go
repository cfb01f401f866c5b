package pick

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
)

// Tuning is how a tenant's picks weigh what was learned: the settings that usage, not
// the operator, decides (see "Self-tuning" in the package documentation).
type Tuning struct {
	// Weight is how much the learned field counts beside the tool's own text (weight 1).
	Weight float64 `json:"weight"`
	// CoUsage is how much the best tool lifts the tools used with it; 0 turns it off.
	CoUsage float64 `json:"coUsage"`
	// Power is how the learned share enters the score: 2, squared (a loose match of a
	// few common words hardly counts), or 1, as it is.
	Power int `json:"power"`
}

// String is the setting in a few characters: "w4 co0.6 p1".
func (t Tuning) String() string { return fmt.Sprintf("w%g co%g p%d", t.Weight, t.CoUsage, t.Power) }

func (t Tuning) validate() error {
	if !(t.Weight >= 0) || !(t.CoUsage >= 0) || t.Power != 1 && t.Power != 2 {
		return fmt.Errorf("%w: a tuning needs weight ≥ 0, coUsage ≥ 0 and power 1 or 2, got %+v", ErrInvalidOption, t)
	}
	return nil
}

// DefaultTuneGrid is the settings self-tuning chooses among: Weight 0.5 to 16 ×
// CoUsage off to 1.5 × Power 2 and 1; 72 settings.
func DefaultTuneGrid() []Tuning {
	var out []Tuning
	for _, p := range []int{2, 1} {
		for _, w := range []float64{0.5, 1, 2, 4, 8, 16} {
			for _, co := range []float64{0, 0.1, 0.3, 0.6, 1, 1.5} {
				out = append(out, Tuning{Weight: w, CoUsage: co, Power: p})
			}
		}
	}
	return out
}

// defaultTuning is the setting of a tenant whose usage has not chosen one: the
// configuration's Weight and CoUsage, squared.
func (l *Learned) defaultTuning() Tuning {
	return Tuning{Weight: l.cfg.Weight, CoUsage: max(l.cfg.CoUsage, 0), Power: 2}
}

// tuningOf is the setting set's picks rank with.
func (l *Learned) tuningOf(set *usageSet) Tuning {
	if r := set.tuned.Load(); r != nil && !l.cfg.Fixed {
		return r.Tuning
	}
	return l.defaultTuning()
}

// TuneResult is what self-tuning chose for a tenant, and on what evidence.
type TuneResult struct {
	// Tenant is the tenant ("" when usage is shared, or for records without one).
	Tenant string `json:"tenant"`
	// Tuning is the setting its picks rank with.
	Tuning Tuning `json:"tuning"`
	// Tuned is false while the tenant ranks with the configured defaults: its log
	// holds too few runs (HeldOut below LearnConfig.MinHeldOut), or Fixed.
	Tuned bool `json:"tuned"`
	// Runs is how many runs the log held, HeldOut how many of them (the most recent)
	// the settings were scored on, after learning from the others.
	Runs    int `json:"runs"`
	HeldOut int `json:"heldOut"`
	// Score is Tuning's mean nDCG@10 on the held-out runs (0..1), DefaultScore that of
	// the defaults on the same runs.
	Score        float64 `json:"score"`
	DefaultScore float64 `json:"defaultScore"`
	// At is when the tuning ran, Took how long it took.
	At   time.Time     `json:"at"`
	Took time.Duration `json:"took"`

	added int64 // runs the log had taken in when tuned
}

// Self-tuning's rules.
const (
	// heldOutDiv: the most recent 1/heldOutDiv of a tenant's log is held out.
	heldOutDiv = 5
	// tuneSE is how many standard errors a setting must beat the defaults by.
	tuneSE = 2
	// maxRunTools bounds the tools logged per run, as co-usage does.
	maxRunTools = 16
	// maxLoggedRequest bounds the bytes of a logged request, as the usage record does.
	maxLoggedRequest = 1024
	// tuneK is the depth of the ranking a tuning scores: nDCG@10.
	tuneK = 10
)

// runLog is a tenant's most recent runs, oldest first from at: the request of each
// and the tools that served it. It is what self-tuning holds out and learns from.
type runLog struct {
	runs  []loggedRun
	at    int            // the oldest run once the ring is full
	byRun map[string]int // run id → index in runs
	added int64          // runs ever logged
}

type loggedRun struct {
	run     string
	request string
	tools   []string
}

// add logs that tool served request in run: a run seen before gains the tool, a new
// one takes the place of the oldest once the log holds max runs. A record without a
// run is a run of its own.
func (g *runLog) add(max int, run, tool, request string) {
	if i, ok := g.byRun[run]; ok && run != "" {
		if r := &g.runs[i]; !slices.Contains(r.tools, tool) && len(r.tools) < maxRunTools {
			r.tools = append(r.tools, tool)
		}
		return
	}
	request, _ = cut(request, maxLoggedRequest)
	r := loggedRun{run: run, request: strings.Clone(request), tools: []string{tool}}
	i := len(g.runs)
	if i < max {
		g.runs = append(g.runs, r)
	} else {
		i = g.at
		delete(g.byRun, g.runs[i].run)
		g.runs[i] = r
		g.at = (g.at + 1) % max
	}
	if run != "" {
		if g.byRun == nil {
			g.byRun = map[string]int{}
		}
		g.byRun[run] = i
	}
	g.added++
}

// ordered copies the runs, oldest first.
func (g *runLog) ordered() []loggedRun {
	out := make([]loggedRun, 0, len(g.runs))
	out = append(append(out, g.runs[g.at:]...), g.runs[:g.at]...)
	for i := range out {
		out[i].tools = slices.Clone(out[i].tools) // Learn appends to the log's
	}
	return out
}

// Run keeps l fresh for the picks of cat until ctx ends, and returns nil then: it
// rebuilds the indexes that picks found stale (at most every RefreshEvery) and tunes
// each tenant's settings from its own log (at most every TuneEvery, once a tenth of
// its log is new). One goroutine does all of it, one tenant at a time, so that
// learning costs at most one core whatever the number of tenants. Run is the owner of
// that work: without it, picks rebuild stale indexes themselves and every tenant
// ranks with the defaults. It returns an error when another Run is under way.
func (l *Learned) Run(ctx context.Context, cat *Catalog) error {
	if cat == nil {
		return fmt.Errorf("%w: Run needs a catalog", ErrInvalidOption)
	}
	if !l.running.CompareAndSwap(false, true) {
		return errors.New("pick: Learned.Run is running already")
	}
	defer l.running.Store(false)
	every := l.cfg.RefreshEvery
	if every <= 0 {
		every = time.Second
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		l.maintain(ctx, cat.Snapshot())
		select {
		case <-ctx.Done():
			return nil
		case <-l.wake:
		case <-tick.C:
		}
	}
}

// maintain rebuilds the stale indexes that may be rebuilt now and tunes the tenants
// that are due.
func (l *Learned) maintain(ctx context.Context, snap *Snapshot) {
	sets := l.readable.Load()
	if sets == nil {
		return
	}
	for _, set := range *sets {
		if set.dirty.Load() && l.due(set) && set.rebuild.TryLock() {
			l.build(set)
			set.rebuild.Unlock()
		}
	}
	if l.cfg.Fixed {
		return
	}
	for _, tenant := range slices.Sorted(maps.Keys(*sets)) {
		set := (*sets)[tenant]
		if ctx.Err() != nil {
			return
		}
		if l.tuneDue(set) {
			_ = l.tuneSet(ctx, tenant, set, snap) // only ctx ends a tuning early
		}
	}
}

// tuneDue reports whether set's settings are to be chosen (again): never chosen and
// the log large enough, or a tenth of the log new since and TuneEvery passed.
func (l *Learned) tuneDue(set *usageSet) bool {
	l.mu.Lock()
	runs, added := len(set.log.runs), set.log.added
	l.mu.Unlock()
	r := set.tuned.Load()
	if r == nil {
		return runs/heldOutDiv >= l.cfg.MinHeldOut
	}
	return added-r.added >= max(int64(runs/10), 1) && time.Since(r.At) >= l.cfg.TuneEvery
}

// Tune chooses every tenant's settings now, ranking snap, and returns what it chose
// (as [Learned.Tunings]). It is what Run does in the background; call it to tune at a
// moment of your choosing (an evaluation, a test). It returns ctx's error if ctx ends
// first; the tenants tuned by then keep their new settings.
func (l *Learned) Tune(ctx context.Context, snap *Snapshot) ([]TuneResult, error) {
	if sets := l.readable.Load(); sets != nil {
		for _, tenant := range slices.Sorted(maps.Keys(*sets)) {
			if err := l.tuneSet(ctx, tenant, (*sets)[tenant], snap); err != nil {
				return nil, err
			}
		}
	}
	return l.Tunings(), nil
}

// Tunings returns the settings every tenant ranks with and how they were chosen,
// by tenant.
func (l *Learned) Tunings() []TuneResult {
	sets := l.readable.Load()
	if sets == nil {
		return nil
	}
	out := make([]TuneResult, 0, len(*sets))
	for _, tenant := range slices.Sorted(maps.Keys(*sets)) {
		set := (*sets)[tenant]
		if r := set.tuned.Load(); r != nil && !l.cfg.Fixed {
			out = append(out, *r)
			continue
		}
		l.mu.Lock()
		runs := len(set.log.runs)
		l.mu.Unlock()
		out = append(out, TuneResult{Tenant: tenant, Tuning: l.defaultTuning(), Runs: runs})
	}
	return out
}

// tuneSet chooses set's settings from its own log, and only from it: the most recent
// fifth is held out, the rest learned into an index of its own, and each setting of
// the grid ranks snap for every held-out request; the best mean nDCG@10 (against the
// tools each run used) wins, if it beats the defaults by more than the noise. The picks go on
// with the index of all the records, which already holds the held-out runs.
func (l *Learned) tuneSet(ctx context.Context, tenant string, set *usageSet, snap *Snapshot) error {
	start := time.Now()
	l.mu.Lock()
	runs, added := set.log.ordered(), set.log.added
	l.mu.Unlock()
	def := l.defaultTuning()
	res := &TuneResult{Tenant: tenant, Tuning: def, Runs: len(runs), At: start, added: added}
	held := len(runs) / heldOutDiv
	if held < l.cfg.MinHeldOut || l.cfg.Fixed {
		set.tuned.Store(res)
		return nil
	}
	train, test := runs[:len(runs)-held], runs[len(runs)-held:]
	v := buildView(l.trainingSet(train), l.cfg)
	cands := append([]Tuning{def}, l.cfg.TuneGrid...)
	scores := make([][]float64, len(cands)) // by candidate, then held-out run
	for i, tn := range cands {
		var err error
		if scores[i], err = l.heldOutScores(ctx, snap, &learnedScorer{l: l, view: v, tuning: tn}, test); err != nil {
			return err
		}
	}
	res.HeldOut = len(scores[0])
	if res.HeldOut == 0 {
		// None of the held-out runs' tools is in the catalog (not loaded yet, say):
		// nothing to choose on, and the next round tries again.
		return nil
	}
	means := make([]float64, len(cands))
	best := 0
	for i, sc := range scores {
		means[i] = mean(sc)
		if means[i] > means[best] {
			best = i
		}
	}
	// The best replaces the defaults only when it beats them by more than twice the
	// standard error of the difference over the held-out runs: the best of many
	// settings beats them by about that much by chance alone, and a small log's noise
	// must keep them.
	if best != 0 && means[best]-means[0] <= tuneSE*stdErrDiff(scores[best], scores[0]) {
		best = 0
	}
	res.Tuning, res.Tuned, res.Score, res.DefaultScore = cands[best], true, means[best], means[0]
	res.Took = time.Since(start)
	set.tuned.Store(res)
	return nil
}

// trainingSet learns runs into a usage set of its own, as Learn would have.
func (l *Learned) trainingSet(runs []loggedRun) *usageSet {
	set := &usageSet{tools: map[string]*toolUsage{}, runs: map[string][]string{}}
	for i, r := range runs {
		terms := requestTerms(r.request, l.cfg.MaxTerms)
		if len(terms) == 0 {
			continue
		}
		run := fmt.Sprint(i)
		for _, tool := range r.tools {
			t := set.tools[tool]
			if t == nil {
				t = &toolUsage{}
				set.tools[tool] = t
			}
			l.addRequest(t, terms, 0)
			l.coUse(set, run, tool)
		}
	}
	return set
}

// heldOutScores are sc's nDCG@10 for each held-out run whose tools snap holds.
func (l *Learned) heldOutScores(ctx context.Context, snap *Snapshot, sc Scorer, held []loggedRun) ([]float64, error) {
	opts := Options{Scorer: sc, MaxCandidates: tuneK, MinScore: new(0.0), AllowUnsafe: true}
	out := make([]float64, 0, len(held))
	for _, r := range held {
		rel := r.tools[:0:0]
		for _, t := range r.tools {
			if _, ok := snap.Lookup(t); ok {
				rel = append(rel, t)
			}
		}
		if len(rel) == 0 {
			continue
		}
		res, err := snap.Pick(ctx, r.request, opts)
		if errors.Is(err, ErrEmptyInput) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, ndcg(res, rel))
	}
	return out, nil
}

func mean(xs []float64) float64 {
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// stdErrDiff is the standard error of the mean of a−b, paired.
func stdErrDiff(a, b []float64) float64 {
	n := float64(len(a))
	if n < 2 {
		return math.Inf(1)
	}
	var sum, sq float64
	for i := range a {
		d := a[i] - b[i]
		sum += d
		sq += d * d
	}
	m := sum / n
	return math.Sqrt((sq/n - m*m) * n / (n - 1) / n)
}

// ndcg is the nDCG of a ranking against the relevant tools (binary gains), at the
// ranking's length.
func ndcg(res []Result, rel []string) float64 {
	var dcg, idcg float64
	for i, r := range res {
		if slices.Contains(rel, r.Name) {
			dcg += 1 / math.Log2(float64(i+2))
		}
	}
	for i := range min(len(rel), tuneK) {
		idcg += 1 / math.Log2(float64(i+2))
	}
	return dcg / idcg
}
