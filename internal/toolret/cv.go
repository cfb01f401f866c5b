package toolret

import (
	"context"
	"fmt"
	"io"

	"github.com/toolfleet/toolfleet/pkg/pick"
)

// Candidate is one setting of the picker's scorer that tuning may choose.
type Candidate struct {
	Name   string
	Params pick.BM25Params
}

// Grid is the settings the picker's BM25 is tuned over: three free parameters, K1, the
// phrase weight and the sentence weight; the rest stay as [pick.DefaultBM25Params] fixes
// them. [pick.DefaultBM25Params] is the candidate tuning chooses on all the public
// queries; a test checks that it still is.
func Grid() []Candidate {
	var out []Candidate
	for _, k1 := range []float64{0.9, 1.2, 1.5, 1.8, 2.4} {
		for _, phrase := range []float64{0, 0.5, 1, 1.5, 2, 3} {
			for _, sent := range []float64{0, 0.15, 0.3, 0.45, 0.6} {
				p := pick.DefaultBM25Params()
				p.K1, p.Phrase, p.Sentence = k1, phrase, sent
				out = append(out, Candidate{Name: fmt.Sprintf("k1=%g phrase=%g sent=%g", k1, phrase, sent), Params: p})
			}
		}
	}
	return out
}

// PlainSettings are the README's two plain-BM25 settings (k1, b), the baselines printed
// beside the picker.
var PlainSettings = [2][2]float64{{0.9, 0.4}, {1.2, 0.75}}

// FoldResult is one held-out fold of one benchmark: the candidate that tuning on the
// other folds chose, and its figures beside plain BM25's, all on the fold's queries only.
type FoldResult struct {
	Fold    int
	Chosen  string
	Picker  Metrics
	Plain   [2]Metrics // by PlainSettings
	Queries int
}

// CV is a k-fold cross-validation of the picker's tuning on every benchmark.
type CV struct {
	Folds int
	// AllQueries is the candidate tuning chooses on all the queries: the one to ship as
	// the default, never scored here.
	AllQueries Candidate
	// ByBenchmark holds each folder's folds, in fold order.
	ByBenchmark map[string][]FoldResult
}

// MeanFold averages a benchmark's folds (each fold weighs the same).
func (cv *CV) MeanFold(folder string) FoldResult {
	var m FoldResult
	folds := cv.ByBenchmark[folder]
	for _, f := range folds {
		m.Picker = addMetrics(m.Picker, f.Picker)
		for i := range m.Plain {
			m.Plain[i] = addMetrics(m.Plain[i], f.Plain[i])
		}
		m.Queries += f.Queries
	}
	n := float64(len(folds))
	m.Picker = scaleMetrics(m.Picker, 1/n)
	for i := range m.Plain {
		m.Plain[i] = scaleMetrics(m.Plain[i], 1/n)
	}
	m.Fold = -1
	return m
}

func addMetrics(a, b Metrics) Metrics {
	return Metrics{a.Recall5 + b.Recall5, a.Recall10 + b.Recall10, a.NDCG10 + b.NDCG10, a.Comp10 + b.Comp10, a.Queries + b.Queries}
}

func scaleMetrics(a Metrics, f float64) Metrics {
	return Metrics{a.Recall5 * f, a.Recall10 * f, a.NDCG10 * f, a.Comp10 * f, a.Queries}
}

// InFold reports whether query i belongs to fold f of k: queries are dealt to the folds
// in file order (i mod k), so that every fold holds a like share of each kind of query
// (the files group them by kind).
func InFold(i, f, k int) bool { return i%k == f }

// CrossValidate runs k-fold cross-validation of tuning over cands on every benchmark of
// dir. For each fold f, the candidate with the best nDCG@10 on the other folds' queries
// (averaged over the benchmarks, so that one setting serves both) is chosen, and is then
// scored on fold f's queries beside plain BM25. The queries of fold f never take part in
// choosing the candidate scored on them. Ties go to the earlier candidate.
func CrossValidate(ctx context.Context, dir string, k int, cands []Candidate) (*CV, error) {
	if k < 2 {
		return nil, fmt.Errorf("toolret: cross-validation needs at least 2 folds, got %d", k)
	}
	if len(cands) == 0 {
		return nil, fmt.Errorf("toolret: cross-validation needs at least one candidate")
	}
	type scored struct {
		b     *Benchmark
		cands [][]QueryMetrics // by candidate, then query
		plain [2][]QueryMetrics
	}
	all := make([]scored, 0, len(Folders))
	for _, folder := range Folders {
		b, err := Load(dir, folder)
		if err != nil {
			return nil, err
		}
		if len(b.Queries) < k {
			return nil, fmt.Errorf("toolret: %s has %d queries, fewer than %d folds", folder, len(b.Queries), k)
		}
		sc := scored{b: b}
		// Every candidate is scored on every query once; a fold's choice then reads only
		// the figures of its training queries.
		cat, err := pick.NewCatalog(b.Tools)
		if err != nil {
			return nil, err
		}
		for _, c := range cands {
			each, err := b.EvaluateEach(ctx, PickRanker(cat, pick.Options{Scorer: pick.BM25{Params: c.Params}}))
			if err != nil {
				return nil, fmt.Errorf("toolret: %s, candidate %s: %w", folder, c.Name, err)
			}
			sc.cands = append(sc.cands, each)
		}
		for i, s := range PlainSettings {
			each, err := b.EvaluateEach(ctx, NewPlainBM25(b, s[0], s[1]).Rank)
			if err != nil {
				return nil, err
			}
			sc.plain[i] = each
		}
		all = append(all, sc)
	}
	choose := func(train func(int) bool) int {
		best, bestScore := 0, -1.0
		for c := range cands {
			var v float64
			for _, sc := range all {
				v += Mean(sc.cands[c], train).NDCG10
			}
			if v > bestScore {
				best, bestScore = c, v
			}
		}
		return best
	}
	cv := &CV{Folds: k, ByBenchmark: map[string][]FoldResult{}, AllQueries: cands[choose(nil)]}
	for f := range k {
		train := func(i int) bool { return !InFold(i, f, k) }
		test := func(i int) bool { return InFold(i, f, k) }
		best := choose(train)
		for _, sc := range all {
			r := FoldResult{Fold: f, Chosen: cands[best].Name, Picker: Mean(sc.cands[best], test)}
			for i := range r.Plain {
				r.Plain[i] = Mean(sc.plain[i], test)
			}
			r.Queries = r.Picker.Queries
			cv.ByBenchmark[sc.b.Name] = append(cv.ByBenchmark[sc.b.Name], r)
		}
	}
	return cv, nil
}

// Write prints the cross-validation: per benchmark, each held-out fold and the mean of
// the folds, nDCG@10 and Recall@10 of the tuned picker and of both plain-BM25 settings.
func (cv *CV) Write(w io.Writer) {
	fmt.Fprintf(w, "%d-fold cross-validation: tuned on %d folds, figures (×100) on the held-out fold only\n", cv.Folds, cv.Folds-1)
	hdr := fmt.Sprintf("%-9s %-5s %7s  %-22s %-15s %-15s %-15s\n", "benchmark", "fold", "queries", "chosen",
		"picker nDCG/R", fmt.Sprintf("bm25 %.1f/%.2f", PlainSettings[0][0], PlainSettings[0][1]),
		fmt.Sprintf("bm25 %.1f/%.2f", PlainSettings[1][0], PlainSettings[1][1]))
	fmt.Fprint(w, hdr)
	row := func(folder, fold string, r FoldResult) {
		fmt.Fprintf(w, "%-9s %-5s %7d  %-22s %6.2f %6.2f   %6.2f %6.2f   %6.2f %6.2f\n", folder, fold, r.Queries, r.Chosen,
			r.Picker.NDCG10, r.Picker.Recall10, r.Plain[0].NDCG10, r.Plain[0].Recall10, r.Plain[1].NDCG10, r.Plain[1].Recall10)
	}
	for _, folder := range Folders {
		for _, r := range cv.ByBenchmark[folder] {
			row(folder, fmt.Sprint(r.Fold+1), r)
		}
		row(folder, "mean", cv.MeanFold(folder))
	}
}
