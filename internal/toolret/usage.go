package toolret

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/toolfleet/toolfleet/pkg/pick"
)

// normText is a request as compared to keep scored queries out of learning: lower case,
// runs of white space as one space.
func normText(s string) string { return strings.Join(strings.Fields(strings.ToLower(s)), " ") }

// LearnFrom folds usage lines into l, as the planner's records would be: each line is a
// run whose request led to each of its relevant tools. Lines whose text is in skip (by
// normText) are not learned from: they are the queries being scored. It returns how
// many lines were learned from and how many were skipped.
func (b *Benchmark) LearnFrom(l *pick.Learned, lines []Query, skip map[string]bool) (learned, skipped int, err error) {
	for _, q := range lines {
		if skip[normText(q.Query)] {
			skipped++
			continue
		}
		for _, id := range q.Relevant {
			name, ok := b.nameOf(id)
			if !ok {
				return learned, skipped, fmt.Errorf("toolret: usage line %s names tool %q, not in %s", q.ID, id, b.Name)
			}
			err := l.Learn(pick.Usage{Run: b.Name + "/" + q.ID, Tool: name, Request: q.Query})
			if err != nil && !errors.Is(err, pick.ErrUsage) {
				return learned, skipped, err
			}
		}
		learned++
	}
	l.Refresh()
	return learned, skipped, nil
}

// nameOf returns the definition name of benchmark tool id.
func (b *Benchmark) nameOf(id string) (string, bool) {
	if b.byID == nil {
		b.byID = make(map[string]string, len(b.byName))
		for name, tid := range b.byName {
			b.byID[tid] = name
		}
	}
	name, ok := b.byID[id]
	return name, ok
}

// texts is the set of the queries' texts, by normText.
func texts(qs []Query) map[string]bool {
	out := make(map[string]bool, len(qs))
	for _, q := range qs {
		out[normText(q.Query)] = true
	}
	return out
}

// only returns the queries whose index keep accepts.
func only(qs []Query, keep func(int) bool) []Query {
	var out []Query
	for i, q := range qs {
		if keep(i) {
			out = append(out, q)
		}
	}
	return out
}

// evaluateOn evaluates rank on queries qs of b.
func (b *Benchmark) evaluateOn(ctx context.Context, qs []Query, rank Ranker) (Metrics, error) {
	sub := *b
	sub.Queries = qs
	return sub.Evaluate(ctx, rank)
}

// LearnedRanker ranks with what l learned (the tenant "" of a Learned), top ten, no
// threshold, like [PickRanker].
func LearnedRanker(cat *pick.Catalog, l *pick.Learned) Ranker {
	return PickRanker(cat, pick.Options{Scorer: l.Scorer("")})
}

// UsageFold is one held-out fold of one benchmark, scored cold, with usage learned from
// the other folds, and by plain BM25.
type UsageFold struct {
	Fold int
	Cold Metrics
	// Learned is the learned scorer with the weights chosen for this fold (Chosen): by
	// nested cross-validation on the training folds alone when a grid was given, else
	// the configuration passed in.
	Learned Metrics
	Chosen  pick.LearnConfig
	// Fixed is the learned scorer with the configuration passed in (the defaults), on
	// the same fold: beside Learned, how much choosing the weights on the scored
	// queries would flatter the figure.
	Fixed   Metrics
	Plain   [2]Metrics // by PlainSettings
	Queries int
	// Lines is how many training queries were learned from; Skipped how many were not,
	// their text being that of a query of the fold.
	Lines, Skipped int
}

// UsageCV is a k-fold cross-validation of learning from usage on every benchmark.
type UsageCV struct {
	Folds  int
	Config pick.LearnConfig
	// Grid is the configurations the nested cross-validation chose among; nil when
	// every fold used Config.
	Grid        []pick.LearnConfig
	ByBenchmark map[string][]UsageFold
}

// UsageGrid is the learned scorer's weights that -usage-cv chooses among, each fold on
// its training queries alone: base with Weight 0.5, 1, 2 and 4 times CoUsage off, 0.1,
// 0.3 and 0.6. The package defaults (Weight 1, CoUsage 0.1) come first, so that a tie keeps
// them.
func UsageGrid(base pick.LearnConfig) []pick.LearnConfig {
	with := func(w, co float64) pick.LearnConfig {
		c := base
		c.Weight, c.CoUsage = w, co
		return c
	}
	grid := []pick.LearnConfig{with(1, 0.1)}
	for _, w := range []float64{0.5, 1, 2, 4} {
		for _, co := range []float64{-1, 0.1, 0.3, 0.6} {
			if w != 1 || co != 0.1 {
				grid = append(grid, with(w, co))
			}
		}
	}
	return grid
}

// CrossValidateUsage learns, for each fold f of each benchmark of dir, from the queries
// of the other folds (as usage records: a request and the tools that served it), and
// scores fold f's queries with the learned scorer beside the cold default and plain
// BM25. A training query whose text is also a query of fold f is not learned from.
//
// With a grid, the learned scorer's configuration is chosen for each fold f among grid
// by an inner (k−1)-fold cross-validation over f's training queries only (best mean
// nDCG@10, the first of the grid on a tie), so that no weight is chosen on the queries
// it is scored on; cfg is then scored too, as Fixed.
func CrossValidateUsage(ctx context.Context, dir string, k int, cfg pick.LearnConfig, grid []pick.LearnConfig) (*UsageCV, error) {
	if k < 2 || len(grid) > 0 && k < 3 {
		return nil, fmt.Errorf("toolret: cross-validation needs at least 2 folds (3 to choose weights), got %d", k)
	}
	cv := &UsageCV{Folds: k, Grid: grid, ByBenchmark: map[string][]UsageFold{}}
	for _, folder := range Folders {
		b, err := Load(dir, folder)
		if err != nil {
			return nil, err
		}
		cat, err := pick.NewCatalog(b.Tools)
		if err != nil {
			return nil, err
		}
		cold, err := b.EvaluateEach(ctx, PickRanker(cat, pick.Options{}))
		if err != nil {
			return nil, err
		}
		var plain [2][]QueryMetrics
		for i, s := range PlainSettings {
			if plain[i], err = b.EvaluateEach(ctx, NewPlainBM25(b, s[0], s[1]).Rank); err != nil {
				return nil, err
			}
		}
		for f := range k {
			test := func(i int) bool { return InFold(i, f, k) }
			held := only(b.Queries, test)
			r := UsageFold{Fold: f, Cold: Mean(cold, test), Queries: len(held)}
			for i := range plain {
				r.Plain[i] = Mean(plain[i], test)
			}
			train := only(b.Queries, func(i int) bool { return !test(i) })
			r.Fixed, r.Lines, r.Skipped, r.Chosen, err = b.learnAndScore(ctx, cat, cfg, train, held)
			if err != nil {
				return nil, err
			}
			cv.Config = r.Chosen
			r.Learned = r.Fixed
			if len(grid) > 0 {
				best, err := b.chooseConfig(ctx, cat, grid, train, k-1)
				if err != nil {
					return nil, err
				}
				if r.Learned, _, _, r.Chosen, err = b.learnAndScore(ctx, cat, best, train, held); err != nil {
					return nil, err
				}
			}
			cv.ByBenchmark[folder] = append(cv.ByBenchmark[folder], r)
		}
	}
	return cv, nil
}

// learnAndScore learns with cfg from the train queries (those whose text is a held one
// left out) and scores the held ones; it returns the figures, the lines learned and
// skipped, and cfg with its defaults.
func (b *Benchmark) learnAndScore(ctx context.Context, cat *pick.Catalog, cfg pick.LearnConfig, train, held []Query) (Metrics, int, int, pick.LearnConfig, error) {
	l, err := pick.NewLearned(cfg)
	if err != nil {
		return Metrics{}, 0, 0, cfg, err
	}
	lines, skipped, err := b.LearnFrom(l, train, texts(held))
	if err != nil {
		return Metrics{}, 0, 0, cfg, err
	}
	m, err := b.evaluateOn(ctx, held, LearnedRanker(cat, l))
	return m, lines, skipped, l.Config(), err
}

// chooseConfig returns the configuration of grid with the best mean nDCG@10 over an
// inner k-fold cross-validation of train alone (the first on a tie).
func (b *Benchmark) chooseConfig(ctx context.Context, cat *pick.Catalog, grid []pick.LearnConfig, train []Query, k int) (pick.LearnConfig, error) {
	best, bestScore := grid[0], -1.0
	for _, c := range grid {
		var sum float64
		for f := range k {
			inner := only(train, func(i int) bool { return !InFold(i, f, k) })
			held := only(train, func(i int) bool { return InFold(i, f, k) })
			m, _, _, _, err := b.learnAndScore(ctx, cat, c, inner, held)
			if err != nil {
				return best, err
			}
			sum += m.NDCG10 * float64(len(held))
		}
		if sum > bestScore {
			best, bestScore = c, sum
		}
	}
	return best, nil
}

// MeanFold averages a benchmark's folds.
func (cv *UsageCV) MeanFold(folder string) UsageFold {
	var m UsageFold
	folds := cv.ByBenchmark[folder]
	for _, f := range folds {
		m.Cold, m.Learned, m.Fixed = addMetrics(m.Cold, f.Cold), addMetrics(m.Learned, f.Learned), addMetrics(m.Fixed, f.Fixed)
		for i := range m.Plain {
			m.Plain[i] = addMetrics(m.Plain[i], f.Plain[i])
		}
		m.Queries += f.Queries
		m.Lines += f.Lines
		m.Skipped += f.Skipped
	}
	n := 1 / float64(max(len(folds), 1))
	m.Cold, m.Learned, m.Fixed = scaleMetrics(m.Cold, n), scaleMetrics(m.Learned, n), scaleMetrics(m.Fixed, n)
	for i := range m.Plain {
		m.Plain[i] = scaleMetrics(m.Plain[i], n)
	}
	m.Fold = -1
	return m
}

// Write prints the cross-validation: per benchmark, each held-out fold and the mean,
// nDCG@10 and Recall@10 of the learned picker (with the weights chosen for the fold,
// and with the fixed configuration), the cold picker and both plain-BM25 settings.
func (cv *UsageCV) Write(w io.Writer) {
	fmt.Fprintf(w, "%d-fold cross-validation of learning: usage from %d folds, figures (×100) on the held-out fold only\n", cv.Folds, cv.Folds-1)
	if len(cv.Grid) > 0 {
		fmt.Fprintf(w, "usage: weights chosen per fold among %d by a %d-fold cross-validation of its training folds alone (w = Weight, co = CoUsage, off < 0); fixed: Weight %g, CoUsage %g on every fold\n",
			len(cv.Grid), cv.Folds-1, cv.Config.Weight, cv.Config.CoUsage)
	}
	fmt.Fprintf(w, "%-9s %-5s %7s %7s  %-9s  %-15s %-15s %-15s %-15s %-15s\n", "benchmark", "fold", "queries", "learned", "w/co",
		"usage nDCG/R", "fixed nDCG/R", "cold nDCG/R", fmt.Sprintf("bm25 %.1f/%.2f", PlainSettings[0][0], PlainSettings[0][1]),
		fmt.Sprintf("bm25 %.1f/%.2f", PlainSettings[1][0], PlainSettings[1][1]))
	row := func(folder, fold, weights string, r UsageFold) {
		fmt.Fprintf(w, "%-9s %-5s %7d %7d  %-9s  %6.2f %6.2f   %6.2f %6.2f   %6.2f %6.2f   %6.2f %6.2f   %6.2f %6.2f\n", folder, fold, r.Queries, r.Lines, weights,
			r.Learned.NDCG10, r.Learned.Recall10, r.Fixed.NDCG10, r.Fixed.Recall10, r.Cold.NDCG10, r.Cold.Recall10,
			r.Plain[0].NDCG10, r.Plain[0].Recall10, r.Plain[1].NDCG10, r.Plain[1].Recall10)
	}
	for _, folder := range Folders {
		for _, r := range cv.ByBenchmark[folder] {
			row(folder, fmt.Sprint(r.Fold+1), fmt.Sprintf("%g/%g", r.Chosen.Weight, r.Chosen.CoUsage), r)
		}
		row(folder, "mean", "", cv.MeanFold(folder))
	}
}

// UsageResult is one benchmark evaluated with usage from another directory.
type UsageResult struct {
	Benchmark     string
	Cold, Learned Metrics
	// Lines is how many usage lines were learned from; Skipped how many were not, their
	// text being that of a scored query.
	Lines, Skipped int
}

// EvaluateUsage is `picker eval -usage`: for each benchmark present in both dataDir and
// usageDir (usageDir/<benchmark>/queries.jsonl, lines in the queries.jsonl format: a
// request and the ids of the tools that ran for it), it learns from usageDir's lines and
// scores dataDir's queries with the learned scorer and cold. Usage lines whose text is
// that of a scored query are skipped: the eval never learns from what it scores.
func EvaluateUsage(ctx context.Context, dataDir, usageDir string, cfg pick.LearnConfig) ([]UsageResult, error) {
	var out []UsageResult
	for _, folder := range Folders {
		path := filepath.Join(usageDir, folder, "queries.jsonl")
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			continue
		}
		b, err := Load(dataDir, folder)
		if err != nil {
			return nil, err
		}
		var lines []Query
		err = eachLine(path, func(line []byte) error {
			var q Query
			if err := json.Unmarshal(line, &q); err != nil {
				return err
			}
			if strings.TrimSpace(q.Query) == "" || len(q.Relevant) == 0 {
				return fmt.Errorf("usage line %q needs a query and the tools that ran for it (relevant)", q.ID)
			}
			lines = append(lines, q)
			return nil
		})
		if err != nil {
			return nil, err
		}
		cat, err := pick.NewCatalog(b.Tools)
		if err != nil {
			return nil, err
		}
		l, err := pick.NewLearned(cfg)
		if err != nil {
			return nil, err
		}
		r := UsageResult{Benchmark: folder}
		if r.Lines, r.Skipped, err = b.LearnFrom(l, lines, texts(b.Queries)); err != nil {
			return nil, err
		}
		if r.Cold, err = b.Evaluate(ctx, PickRanker(cat, pick.Options{})); err != nil {
			return nil, err
		}
		if r.Learned, err = b.Evaluate(ctx, LearnedRanker(cat, l)); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("toolret: no benchmark of %s has usage in %s (want <benchmark>/queries.jsonl)", dataDir, usageDir)
	}
	return out, nil
}

// WriteUsage prints EvaluateUsage's results.
func WriteUsage(w io.Writer, res []UsageResult) {
	for _, r := range res {
		fmt.Fprintf(w, "%-9s  %-22s  %s  (%d queries)\n", r.Benchmark, "picker cold (BM25F)", r.Cold, r.Cold.Queries)
		fmt.Fprintf(w, "%-9s  %-22s  %s  (learned from %d usage lines, %d skipped as scored queries)\n",
			r.Benchmark, "picker with usage", r.Learned, r.Lines, r.Skipped)
	}
}
