package toolret

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
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
//
// The lines are learned in a fixed pseudo-random order ([ArrivalOrder]), not in file
// order: a file has no times, and the benchmarks' files group their queries by the
// tools they need, so that the most recent lines, which self-tuning holds out, would
// be about tools the rest never used.
func (b *Benchmark) LearnFrom(l *pick.Learned, lines []Query, skip map[string]bool) (learned, skipped int, err error) {
	for _, i := range ArrivalOrder(len(lines)) {
		q := lines[i]
		if skip[normText(q.Query)] {
			skipped++
			continue
		}
		for _, id := range q.Relevant {
			name, ok := b.ToolName(id)
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

// ArrivalOrder is the order usage lines arrive in an evaluation: a permutation of 0..n-1,
// the same for every n on every run.
func ArrivalOrder(n int) []int {
	return rand.New(rand.NewPCG(38, 2024)).Perm(n)
}

// ToolName returns the definition name of benchmark tool id.
func (b *Benchmark) ToolName(id string) (string, bool) {
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

// FixedDefaults is the learned scorer as it shipped before self-tuning: Weight 1 and
// CoUsage 0.1 for every tenant. Evaluations print it beside the self-tuned picker.
var FixedDefaults = pick.LearnConfig{Fixed: true, Weight: 1, CoUsage: 0.1}

// UsageFold is one held-out fold of one benchmark, scored cold, with usage learned from
// the other folds, and by plain BM25.
type UsageFold struct {
	Fold int
	Cold Metrics
	// Learned is the learned scorer with the settings it chose itself from the other
	// folds' queries, as the service would (Tune: holding out the most recent fifth).
	Learned Metrics
	Tune    pick.TuneResult
	// Fixed is the learned scorer with FixedDefaults, on the same fold.
	Fixed   Metrics
	Plain   [2]Metrics // by PlainSettings
	Queries int
	// Lines is how many training queries were learned from; Skipped how many were not,
	// their text being that of a query of the fold.
	Lines, Skipped int
}

// UsageCV is a k-fold cross-validation of learning from usage on every benchmark.
type UsageCV struct {
	Folds       int
	ByBenchmark map[string][]UsageFold
}

// CrossValidateUsage learns, for each fold f of each benchmark of dir, from the queries
// of the other folds (as usage records: a request and the tools that served it), and
// scores fold f's queries with the learned scorer beside the cold default and plain
// BM25. A training query whose text is also a query of fold f is not learned from.
//
// The learned scorer is configured by cfg and chooses its own settings from what it
// learned (pick.Learned.Tune), never from fold f; FixedDefaults is scored beside it.
func CrossValidateUsage(ctx context.Context, dir string, k int, cfg pick.LearnConfig) (*UsageCV, error) {
	if k < 2 {
		return nil, fmt.Errorf("toolret: cross-validation needs at least 2 folds, got %d", k)
	}
	cv := &UsageCV{Folds: k, ByBenchmark: map[string][]UsageFold{}}
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
			if r.Learned, r.Lines, r.Skipped, r.Tune, err = b.learnAndScore(ctx, cat, cfg, train, held); err != nil {
				return nil, err
			}
			if r.Fixed, _, _, _, err = b.learnAndScore(ctx, cat, FixedDefaults, train, held); err != nil {
				return nil, err
			}
			cv.ByBenchmark[folder] = append(cv.ByBenchmark[folder], r)
		}
	}
	return cv, nil
}

// learnAndScore learns with cfg from the train queries (those whose text is a held one
// left out), lets the learned scorer tune itself, and scores the held ones; it returns
// the figures, the lines learned and skipped, and what the tuning chose.
func (b *Benchmark) learnAndScore(ctx context.Context, cat *pick.Catalog, cfg pick.LearnConfig, train, held []Query) (Metrics, int, int, pick.TuneResult, error) {
	l, tune, lines, skipped, err := b.learn(ctx, cat, cfg, train, texts(held))
	if err != nil {
		return Metrics{}, 0, 0, tune, err
	}
	m, err := b.evaluateOn(ctx, held, LearnedRanker(cat, l))
	return m, lines, skipped, tune, err
}

// learn learns lines with cfg, skipping those whose text is in skip, and tunes the
// learned scorer on cat as the service would.
func (b *Benchmark) learn(ctx context.Context, cat *pick.Catalog, cfg pick.LearnConfig, lines []Query, skip map[string]bool) (*pick.Learned, pick.TuneResult, int, int, error) {
	var tune pick.TuneResult
	l, err := pick.NewLearned(cfg)
	if err != nil {
		return nil, tune, 0, 0, err
	}
	learned, skipped, err := b.LearnFrom(l, lines, skip)
	if err != nil {
		return nil, tune, 0, 0, err
	}
	tunings, err := l.Tune(ctx, cat.Snapshot())
	if err != nil {
		return nil, tune, 0, 0, err
	}
	for _, t := range tunings {
		if t.Tenant == "" {
			tune = t
		}
	}
	return l, tune, learned, skipped, nil
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
// nDCG@10 and Recall@10 of the learned picker (with the settings it chose, and with
// FixedDefaults), the cold picker and both plain-BM25 settings; and for each fold the
// setting chosen with its own held-out score (nDCG@10 on the most recent fifth of the
// training queries, beside that of the defaults there).
func (cv *UsageCV) Write(w io.Writer) {
	fmt.Fprintf(w, "%d-fold cross-validation of learning: usage from %d folds, figures (×100) on the held-out fold only\n", cv.Folds, cv.Folds-1)
	fmt.Fprintf(w, "usage: the settings the picker chose itself on each fold's usage (w Weight, co CoUsage, p Power; tuning = its nDCG@10 on the usage it held out, chosen/defaults); fixed: Weight %g, CoUsage %g on every fold\n",
		FixedDefaults.Weight, FixedDefaults.CoUsage)
	fmt.Fprintf(w, "%-9s %-5s %7s %7s  %-13s %-13s  %-15s %-15s %-15s %-15s %-15s\n", "benchmark", "fold", "queries", "learned", "chosen", "tuning",
		"usage nDCG/R", "fixed nDCG/R", "cold nDCG/R", fmt.Sprintf("bm25 %.1f/%.2f", PlainSettings[0][0], PlainSettings[0][1]),
		fmt.Sprintf("bm25 %.1f/%.2f", PlainSettings[1][0], PlainSettings[1][1]))
	row := func(folder, fold, chosen, tuning string, r UsageFold) {
		fmt.Fprintf(w, "%-9s %-5s %7d %7d  %-13s %-13s  %6.2f %6.2f   %6.2f %6.2f   %6.2f %6.2f   %6.2f %6.2f   %6.2f %6.2f\n", folder, fold, r.Queries, r.Lines, chosen, tuning,
			r.Learned.NDCG10, r.Learned.Recall10, r.Fixed.NDCG10, r.Fixed.Recall10, r.Cold.NDCG10, r.Cold.Recall10,
			r.Plain[0].NDCG10, r.Plain[0].Recall10, r.Plain[1].NDCG10, r.Plain[1].Recall10)
	}
	for _, folder := range Folders {
		for _, r := range cv.ByBenchmark[folder] {
			row(folder, fmt.Sprint(r.Fold+1), TuneSetting(r.Tune), TuneScores(r.Tune), r)
		}
		row(folder, "mean", "", "", cv.MeanFold(folder))
	}
}

// TuneSetting names the setting a tuning chose, "defaults" when it kept them for want of
// usage.
func TuneSetting(t pick.TuneResult) string {
	if !t.Tuned {
		return "defaults"
	}
	return t.Tuning.String()
}

// TuneScores is a tuning's held-out nDCG@10 (×100), chosen/defaults.
func TuneScores(t pick.TuneResult) string {
	if !t.Tuned {
		return "-"
	}
	return fmt.Sprintf("%.1f/%.1f", 100*t.Score, 100*t.DefaultScore)
}

// UsageResult is one benchmark evaluated with usage from another directory.
type UsageResult struct {
	Benchmark     string
	Cold, Learned Metrics
	// Fixed is the learned scorer with FixedDefaults.
	Fixed Metrics
	// Tune is what the learned scorer chose from the usage, as the service would.
	Tune pick.TuneResult
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
		r := UsageResult{Benchmark: folder}
		l, tune, learned, skipped, err := b.learn(ctx, cat, cfg, lines, texts(b.Queries))
		if err != nil {
			return nil, err
		}
		r.Tune, r.Lines, r.Skipped = tune, learned, skipped
		fixed, _, _, _, err := b.learn(ctx, cat, FixedDefaults, lines, texts(b.Queries))
		if err != nil {
			return nil, err
		}
		if r.Cold, err = b.Evaluate(ctx, PickRanker(cat, pick.Options{})); err != nil {
			return nil, err
		}
		if r.Learned, err = b.Evaluate(ctx, LearnedRanker(cat, l)); err != nil {
			return nil, err
		}
		if r.Fixed, err = b.Evaluate(ctx, LearnedRanker(cat, fixed)); err != nil {
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
		if r.Tune.Tuned {
			fmt.Fprintf(w, "%-9s  %-22s  %s  (nDCG@10 %.2f on the %d most recent of %d usage runs, defaults %.2f)\n", r.Benchmark, "settings chosen",
				r.Tune.Tuning, 100*r.Tune.Score, r.Tune.HeldOut, r.Tune.Runs, 100*r.Tune.DefaultScore)
		} else {
			fmt.Fprintf(w, "%-9s  %-22s  %s  (defaults: %d usage runs are too few to choose on)\n", r.Benchmark, "settings chosen", r.Tune.Tuning, r.Tune.Runs)
		}
		fmt.Fprintf(w, "%-9s  %-22s  %s\n", r.Benchmark, "usage, fixed defaults", r.Fixed)
	}
}
