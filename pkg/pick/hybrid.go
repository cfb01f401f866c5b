package pick

import (
	"context"
	"errors"
	"fmt"
)

// FusionMode says how [Hybrid] combines its two rankings.
type FusionMode int

const (
	// FuseRRF is reciprocal rank fusion: score = Σ 1/(K + rank) over both rankings,
	// normalised by its maximum 2/(K+1). It needs no calibration between the scorers'
	// scales, which is why it is the default.
	FuseRRF FusionMode = iota
	// FuseWeighted is Alpha·lexical + (1−Alpha)·semantic, each scorer's own 0..1 score.
	FuseWeighted
)

// Hybrid combines a lexical and a semantic scorer (by default BM25 and an [Embedding]).
// Both run concurrently over the same candidates, each ranking Depth tools. When the
// semantic scorer fails, the pick goes on with the lexical ranking alone and the reason
// says so; a failing lexical scorer fails the pick.
type Hybrid struct {
	Lexical  Scorer // nil means BM25{}
	Semantic Scorer
	Mode     FusionMode
	// K is the RRF constant; 0 means 60, the value of the original RRF paper.
	K float64
	// Alpha is the lexical weight in FuseWeighted mode; 0 means 0.5.
	Alpha float64
	// Depth is how many tools each scorer ranks; 0 means max(50, the pick's limit).
	Depth int
}

// Name returns "hybrid".
func (h *Hybrid) Name() string { return "hybrid" }

// HybridDetails is the provenance of a hybrid score: each scorer's rank (1-based, 0 when
// not ranked) and score.
type HybridDetails struct {
	Mode          string  `json:"mode"`
	LexicalRank   int     `json:"lexicalRank"`
	LexicalScore  float64 `json:"lexicalScore"`
	SemanticRank  int     `json:"semanticRank"`
	SemanticScore float64 `json:"semanticScore"`
	SemanticError string  `json:"semanticError,omitempty"`
}

// Score fuses the two rankings.
func (h *Hybrid) Score(ctx context.Context, req *Request) ([]Hit, error) {
	if h.Semantic == nil {
		return nil, errors.New("hybrid scorer has no semantic scorer")
	}
	lex := h.Lexical
	if lex == nil {
		lex = BM25{}
	}
	k, alpha, depth := h.K, h.Alpha, h.Depth
	if k <= 0 {
		k = 60
	}
	if alpha <= 0 {
		alpha = 0.5
	}
	if depth <= 0 {
		depth = max(50, req.Limit)
	}
	sub := *req
	sub.Limit = depth
	type answer struct {
		hits []Hit
		err  error
	}
	// The semantic scorer runs beside the lexical one and is waited for whatever the
	// lexical one answers: nothing of a pick runs after it. A lexical failure fails the
	// pick, so it stops the semantic scorer first.
	semCtx, stopSem := context.WithCancel(ctx)
	defer stopSem()
	semCh := make(chan answer, 1)
	go func() {
		hits, err := h.Semantic.Score(semCtx, &sub)
		semCh <- answer{hits, err}
	}()
	lexHits, err := lex.Score(ctx, &sub)
	if err != nil {
		stopSem()
		<-semCh
		return nil, fmt.Errorf("%s: %w", lex.Name(), err)
	}
	sem := <-semCh
	if sem.err != nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}

	type fused struct {
		d     HybridDetails
		score float64
	}
	all := map[DocID]*fused{}
	get := func(id DocID) *fused {
		f := all[id]
		if f == nil {
			f = &fused{}
			all[id] = f
		}
		return f
	}
	for i, hit := range lexHits {
		f := get(hit.ID)
		f.d.LexicalRank, f.d.LexicalScore = i+1, hit.Score
	}
	if sem.err == nil {
		for i, hit := range sem.hits {
			f := get(hit.ID)
			f.d.SemanticRank, f.d.SemanticScore = i+1, hit.Score
		}
	}
	mode := "rrf"
	if h.Mode == FuseWeighted {
		mode = "weighted"
	}
	s := req.Snapshot
	var top topK
	top.reset(req.Limit)
	for id, f := range all {
		switch {
		case sem.err != nil:
			f.score = f.d.LexicalScore
		case h.Mode == FuseWeighted:
			f.score = alpha*f.d.LexicalScore + (1-alpha)*f.d.SemanticScore
		default:
			for _, r := range []int{f.d.LexicalRank, f.d.SemanticRank} {
				if r > 0 {
					f.score += 1 / (k + float64(r))
				}
			}
			f.score /= 2 / (k + 1)
		}
		top.push(ranked{score: f.score, key: s.docs[id].seq, id: id})
	}
	rs := top.sorted(nil)
	hits := make([]Hit, len(rs))
	for i, r := range rs {
		f := all[r.id]
		f.d.Mode = mode
		reason := fmt.Sprintf("%s fusion: %s rank %d, %s rank %d", mode, lex.Name(), f.d.LexicalRank, h.Semantic.Name(), f.d.SemanticRank)
		if sem.err != nil {
			f.d.SemanticError = sem.err.Error()
			reason = fmt.Sprintf("%s alone (%s failed: %v)", lex.Name(), h.Semantic.Name(), sem.err)
		}
		hits[i] = Hit{ID: r.id, Score: f.score, Reason: reason}
		if req.Debug {
			d := f.d
			hits[i].Details = &d
		}
	}
	return hits, nil
}
