package pick

import (
	"context"
	"time"
)

// ExhaustiveBM25 scores every posting, without early termination: the reference the
// tests compare the default BM25 with.
var ExhaustiveBM25 Scorer = BM25{path: pathBlocks}

// LearnedWithPath is l's scorer for tenant with its cold BM25 forced to score block by
// block (blocks) or term by term with early termination: both must rank alike.
func LearnedWithPath(l *Learned, tenant string, blocks bool) Scorer {
	p := pathSparse
	if blocks {
		p = pathBlocks
	}
	return &learnedScorer{l: l, tenant: tenant, cold: BM25{path: p}}
}

// LearnedStages times the stages of a learned pick of text (tenant "") over c, one
// after the other: analysing the request's words, scoring the learned fields, ranking
// the catalog by BM25 from the analysed words, and the whole learned Score (those
// stages, the fused ranking, co-usage and the reasons).
func LearnedStages(ctx context.Context, l *Learned, c *Catalog, text string) (analyse, field, cold, total time.Duration) {
	s := c.Snapshot()
	o, _ := Options{}.withDefaults()
	req := &Request{Text: text, Snapshot: s, Limit: o.MaxCandidates, filter: newFilter(s, o)}
	v, _ := l.viewFor("")
	ls := &learnedScorer{l: l, view: v, tuning: l.defaultTuning()}
	sc := learnedPool.Get().(*learnedScratch)
	defer learnedPool.Put(sc)
	t0 := time.Now()
	sc.words = analyseWords(s, text, sc.words)
	t1 := time.Now()
	ls.scoreField(v, v.bind(s), sc.words, sc)
	t2 := time.Now()
	sc.reset()
	r, err := ls.cold.rank(ctx, req, sc.words, nil)
	t3 := time.Now()
	if err != nil {
		panic(err)
	}
	r.release()
	if _, err := ls.Score(ctx, req); err != nil {
		panic(err)
	}
	return t1.Sub(t0), t2.Sub(t1), t3.Sub(t2), time.Since(t3)
}
