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
	Fold    int
	Cold    Metrics
	Learned Metrics
	Plain   [2]Metrics // by PlainSettings
	Queries int
	// Lines is how many training queries were learned from; Skipped how many were not,
	// their text being that of a query of the fold.
	Lines, Skipped int
}

// UsageCV is a k-fold cross-validation of learning from usage on every benchmark.
type UsageCV struct {
	Folds       int
	Config      pick.LearnConfig
	ByBenchmark map[string][]UsageFold
}

// CrossValidateUsage learns, for each fold f of each benchmark of dir, from the queries
// of the other folds (as usage records: a request and the tools that served it), and
// scores fold f's queries with the learned scorer beside the cold default and plain
// BM25. A training query whose text is also a query of fold f is not learned from.
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
			l, err := pick.NewLearned(cfg)
			if err != nil {
				return nil, err
			}
			cv.Config = l.Config()
			held := only(b.Queries, test)
			r := UsageFold{Fold: f, Cold: Mean(cold, test), Queries: len(held)}
			for i := range plain {
				r.Plain[i] = Mean(plain[i], test)
			}
			train := only(b.Queries, func(i int) bool { return !test(i) })
			if r.Lines, r.Skipped, err = b.LearnFrom(l, train, texts(held)); err != nil {
				return nil, err
			}
			if r.Learned, err = b.evaluateOn(ctx, held, LearnedRanker(cat, l)); err != nil {
				return nil, err
			}
			cv.ByBenchmark[folder] = append(cv.ByBenchmark[folder], r)
		}
	}
	return cv, nil
}

// MeanFold averages a benchmark's folds.
func (cv *UsageCV) MeanFold(folder string) UsageFold {
	var m UsageFold
	folds := cv.ByBenchmark[folder]
	for _, f := range folds {
		m.Cold, m.Learned = addMetrics(m.Cold, f.Cold), addMetrics(m.Learned, f.Learned)
		for i := range m.Plain {
			m.Plain[i] = addMetrics(m.Plain[i], f.Plain[i])
		}
		m.Queries += f.Queries
		m.Lines += f.Lines
		m.Skipped += f.Skipped
	}
	n := 1 / float64(max(len(folds), 1))
	m.Cold, m.Learned = scaleMetrics(m.Cold, n), scaleMetrics(m.Learned, n)
	for i := range m.Plain {
		m.Plain[i] = scaleMetrics(m.Plain[i], n)
	}
	m.Fold = -1
	return m
}

// Write prints the cross-validation: per benchmark, each held-out fold and the mean,
// nDCG@10 and Recall@10 of the learned and cold picker and of both plain-BM25 settings.
func (cv *UsageCV) Write(w io.Writer) {
	fmt.Fprintf(w, "%d-fold cross-validation of learning: usage from %d folds, figures (×100) on the held-out fold only\n", cv.Folds, cv.Folds-1)
	fmt.Fprintf(w, "%-9s %-5s %7s %7s  %-15s %-15s %-15s %-15s\n", "benchmark", "fold", "queries", "learned",
		"usage nDCG/R", "cold nDCG/R", fmt.Sprintf("bm25 %.1f/%.2f", PlainSettings[0][0], PlainSettings[0][1]),
		fmt.Sprintf("bm25 %.1f/%.2f", PlainSettings[1][0], PlainSettings[1][1]))
	row := func(folder, fold string, r UsageFold) {
		fmt.Fprintf(w, "%-9s %-5s %7d %7d  %6.2f %6.2f   %6.2f %6.2f   %6.2f %6.2f   %6.2f %6.2f\n", folder, fold, r.Queries, r.Lines,
			r.Learned.NDCG10, r.Learned.Recall10, r.Cold.NDCG10, r.Cold.Recall10,
			r.Plain[0].NDCG10, r.Plain[0].Recall10, r.Plain[1].NDCG10, r.Plain[1].Recall10)
	}
	for _, folder := range Folders {
		for _, r := range cv.ByBenchmark[folder] {
			row(folder, fmt.Sprint(r.Fold+1), r)
		}
		row(folder, "mean", cv.MeanFold(folder))
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
