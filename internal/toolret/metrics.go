package toolret

import (
	"context"
	"fmt"
	"math"
)

// Metrics are the benchmark's figures, each ×100 and averaged over all queries.
type Metrics struct {
	Recall5, Recall10, NDCG10, Comp10 float64
	Queries                           int
}

// String formats the figures as the README's table does.
func (m Metrics) String() string {
	return fmt.Sprintf("R@5 %6.2f  R@10 %6.2f  nDCG@10 %6.2f  COMP@10 %6.2f", m.Recall5, m.Recall10, m.NDCG10, m.Comp10)
}

// Ranker returns the names of the tools it ranks highest for a query, best first (at
// least 10 when it can; fewer count as not retrieved).
type Ranker func(ctx context.Context, query string) ([]string, error)

// Evaluate runs every query through rank and computes the metrics.
func (b *Benchmark) Evaluate(ctx context.Context, rank Ranker) (Metrics, error) {
	each, err := b.EvaluateEach(ctx, rank)
	if err != nil {
		return Metrics{}, err
	}
	return Mean(each, nil), nil
}

// QueryMetrics are one query's figures, each 0..1.
type QueryMetrics struct {
	Recall5, Recall10, NDCG10, Comp10 float64
}

// EvaluateEach runs every query through rank and returns each query's figures, in the
// order of b.Queries.
func (b *Benchmark) EvaluateEach(ctx context.Context, rank Ranker) ([]QueryMetrics, error) {
	out := make([]QueryMetrics, len(b.Queries))
	for i, q := range b.Queries {
		names, err := rank(ctx, q.Query)
		if err != nil {
			return nil, fmt.Errorf("query %s: %w", q.ID, err)
		}
		ids := make([]string, 0, len(names))
		for _, n := range names {
			id, ok := b.byName[n]
			if !ok {
				return nil, fmt.Errorf("query %s: ranked unknown tool %q", q.ID, n)
			}
			ids = append(ids, id)
		}
		r5, r10, n10, c10 := Score(ids, q.Relevant)
		out[i] = QueryMetrics{r5, r10, n10, c10}
	}
	return out, nil
}

// Mean averages the figures of the queries whose index keep accepts (all when keep is
// nil), ×100, as the README reports them.
func Mean(each []QueryMetrics, keep func(i int) bool) Metrics {
	var m Metrics
	for i, q := range each {
		if keep != nil && !keep(i) {
			continue
		}
		m.Recall5 += q.Recall5
		m.Recall10 += q.Recall10
		m.NDCG10 += q.NDCG10
		m.Comp10 += q.Comp10
		m.Queries++
	}
	if m.Queries == 0 {
		return m
	}
	n := float64(m.Queries)
	m.Recall5 *= 100 / n
	m.Recall10 *= 100 / n
	m.NDCG10 *= 100 / n
	m.Comp10 *= 100 / n
	return m
}

// Score computes one query's Recall@5, Recall@10, nDCG@10 and COMP@10 (each 0..1) from
// the ranked ids and the relevant ids, as the README defines them: Recall@k divides by
// |R|; nDCG@k = Σ rel_i/log2(i+1) over ranks 1..k, divided by the same sum over ranks
// 1..min(k,|R|); COMP@k is 1 when all of R is in the top k.
func Score(ranked, relevant []string) (recall5, recall10, ndcg10, comp10 float64) {
	rel := make(map[string]bool, len(relevant))
	for _, r := range relevant {
		rel[r] = true
	}
	seen := map[string]bool{}
	hits5, hits10 := 0, 0
	var dcg float64
	for i, id := range ranked {
		if i == 10 {
			break
		}
		if !rel[id] || seen[id] {
			continue
		}
		seen[id] = true
		if i < 5 {
			hits5++
		}
		hits10++
		dcg += 1 / math.Log2(float64(i+2))
	}
	var idcg float64
	for i := range min(10, len(rel)) {
		idcg += 1 / math.Log2(float64(i+2))
	}
	n := float64(len(rel))
	recall5, recall10, ndcg10 = float64(hits5)/n, float64(hits10)/n, dcg/idcg
	if hits10 == len(rel) {
		comp10 = 1
	}
	return
}

// Reference is the README's plain-BM25 "full" view at k1 0.9, b 0.4: the baseline the
// default scorer must reach.
var Reference = map[string]Metrics{
	"toollens":  {Recall5: 26.50, Recall10: 34.46, NDCG10: 29.40, Comp10: 10.17},
	"sealtools": {Recall5: 76.27, Recall10: 84.73, NDCG10: 82.23, Comp10: 62.08},
}
