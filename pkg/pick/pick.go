package pick

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Result is one picked tool.
type Result struct {
	Name       string           `json:"name"`
	Definition tools.Definition `json:"-"`
	// Score is normalised to 0..1 (0 for a fallback result).
	Score  float64 `json:"score"`
	Reason string  `json:"reason,omitempty"`
	// Provenance says how the result came about; never nil.
	Provenance *Provenance `json:"provenance,omitempty"`
}

// Provenance is the audit trail of a result.
type Provenance struct {
	// Scorer names the scorer that ranked the tool.
	Scorer string `json:"scorer"`
	// CatalogVersion is the catalog snapshot the pick ranked.
	CatalogVersion uint64 `json:"catalogVersion"`
	// Fallback is set when scoring ran out of time and the result is one of the first
	// allowed tools in registration order instead.
	Fallback bool `json:"fallback,omitempty"`
	// InputTruncated is set when the input was cut to MaxInputBytes; InputBytes is its
	// length before the cut.
	InputTruncated bool `json:"inputTruncated,omitempty"`
	InputBytes     int  `json:"inputBytes,omitempty"`
	// Details are the scorer's own (Debug only): *BM25Details for BM25.
	Details any `json:"details,omitempty"`
}

// Pick ranks the tools of the catalog's current snapshot against input; see
// [Snapshot.Pick].
func Pick(ctx context.Context, input any, c *Catalog, opts Options) ([]Result, error) {
	return c.Snapshot().Pick(ctx, input, opts)
}

// Pick ranks the snapshot's tools against input and returns at most MaxCandidates of
// them, best first, each scoring at least MinScore. It never runs a tool.
//
// Input is a string, or any JSON value ([]byte or json.RawMessage holding JSON, or a Go
// value that encoding/json marshals); a JSON string is unquoted, anything else is ranked
// by its JSON text. Clear answers for the edge cases:
//   - nil, empty or white-space input: [ErrEmptyInput];
//   - an empty catalog, or no tool above MinScore: no results and no error;
//   - input longer than MaxInputBytes: cut, with Provenance.InputTruncated set;
//   - a scorer error: [ErrScorerFailed] wrapping it, no results;
//   - scoring slower than Timeout: the first allowed tools in registration order, with
//     score 0 and Provenance.Fallback set (a scorer that ignores its context is abandoned
//     only when Timeout is set);
//   - ctx done before scoring ends: ctx's error.
func (s *Snapshot) Pick(ctx context.Context, input any, opts Options) ([]Result, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	text, err := inputText(input)
	if err != nil {
		return nil, err
	}
	inBytes := len(text)
	text, truncated := cut(text, o.MaxInputBytes)
	if s.live == 0 {
		return []Result{}, nil
	}
	req := &Request{Text: text, Snapshot: s, Limit: o.MaxCandidates, Debug: o.Debug, filter: newFilter(s, o)}
	prov := func() *Provenance {
		p := &Provenance{Scorer: o.Scorer.Name(), CatalogVersion: s.version, InputTruncated: truncated}
		if truncated {
			p.InputBytes = inBytes
		}
		return p
	}

	hits, err := score(ctx, o, req)
	if errors.Is(err, errScoringTimedOut) {
		return fallback(req, time.Duration(o.Timeout), prov), nil
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: %s: %w", ErrScorerFailed, o.Scorer.Name(), err)
	}
	return results(req, hits, *o.MinScore, prov), nil
}

var errScoringTimedOut = errors.New("scoring timed out")

// score runs the scorer. Without a Timeout it runs on this goroutine: the scorer is
// trusted to honour ctx. With a Timeout, a custom scorer runs on its own goroutine so
// that one ignoring its context cannot hold the pick past the deadline; the built-in
// BM25, which checks its context between terms and has no I/O, stays on this goroutine
// and saves the goroutine hand-off on the hot path.
func score(ctx context.Context, o Options, req *Request) ([]Hit, error) {
	if o.Timeout == 0 {
		return o.Scorer.Score(ctx, req)
	}
	sctx, cancel := context.WithTimeout(ctx, time.Duration(o.Timeout))
	defer cancel()
	timedOut := func(err error) bool { return err != nil && ctx.Err() == nil && sctx.Err() != nil }
	if _, builtin := o.Scorer.(BM25); builtin {
		hits, err := o.Scorer.Score(sctx, req)
		if timedOut(err) {
			return nil, errScoringTimedOut
		}
		return hits, err
	}
	type answer struct {
		hits []Hit
		err  error
	}
	// A scorer that ignores sctx is abandoned at the timeout: Timeout exists to answer
	// without it, so no one waits for its goroutine, which ends when the scorer returns
	// (done is buffered, so that it never blocks then).
	done := make(chan answer, 1)
	go func() {
		h, err := o.Scorer.Score(sctx, req)
		done <- answer{h, err}
	}()
	select {
	case a := <-done:
		if timedOut(a.err) {
			return nil, errScoringTimedOut
		}
		return a.hits, a.err
	case <-sctx.Done():
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, errScoringTimedOut
	}
}

// results checks, orders, thresholds and cuts the scorer's hits.
func results(req *Request, hits []Hit, minScore float64, prov func() *Provenance) []Result {
	s := req.Snapshot
	// A custom scorer may return more than asked, unordered, repeated or filtered-out
	// tools: none of that reaches the caller.
	slices.SortStableFunc(hits, func(a, b Hit) int {
		if a.Score != b.Score {
			if a.Score > b.Score {
				return -1
			}
			return 1
		}
		if a.ID < DocID(len(s.docs)) && b.ID < DocID(len(s.docs)) {
			return cmpSeq(s.docs[a.ID].seq, s.docs[b.ID].seq)
		}
		return 0
	})
	out := make([]Result, 0, min(len(hits), req.Limit))
	// A few hits (the usual top 3) are checked for repeats against the ids kept; many
	// through a map.
	var seen map[DocID]bool
	var few [8]DocID
	kept := few[:0]
	if len(hits) > len(few) {
		seen = make(map[DocID]bool, len(hits))
	}
	for _, h := range hits {
		if len(out) == req.Limit {
			break
		}
		sc := min(max(h.Score, 0), 1)
		if sc != sc || sc < minScore || !req.Allowed(h.ID) { // sc != sc: NaN
			continue
		}
		if seen != nil {
			if seen[h.ID] {
				continue
			}
			seen[h.ID] = true
		} else {
			if slices.Contains(kept, h.ID) {
				continue
			}
			kept = append(kept, h.ID)
		}
		p := prov()
		if req.Debug {
			p.Details = h.Details
		}
		def := s.docs[h.ID].def
		out = append(out, Result{Name: def.Name, Definition: def, Score: sc, Reason: h.Reason, Provenance: p})
	}
	return out
}

func cmpSeq(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// fallback returns the first allowed tools in registration order.
func fallback(req *Request, timeout time.Duration, prov func() *Provenance) []Result {
	s := req.Snapshot
	out := []Result{}
	for _, id := range s.inOrder() {
		if len(out) == req.Limit {
			break
		}
		if !req.Allowed(id) {
			continue
		}
		p := prov()
		p.Fallback = true
		def := s.docs[id].def
		out = append(out, Result{Name: def.Name, Definition: def, Score: 0, Provenance: p,
			Reason: fmt.Sprintf("scoring took longer than %s; fallback to registration order", timeout)})
	}
	return out
}

// inputText stringifies input and rejects empty input.
func inputText(input any) (string, error) {
	var text string
	switch v := input.(type) {
	case nil:
		return "", ErrEmptyInput
	case string:
		text = v
	case json.RawMessage:
		text = rawText(v)
	case []byte:
		text = rawText(v)
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return "", fmt.Errorf("%w: input cannot be stringified: %v", ErrEmptyInput, err)
		}
		text = rawText(b)
	}
	text = strings.TrimSpace(text)
	if text == "" || text == "null" || text == `""` || text == "{}" || text == "[]" {
		return "", ErrEmptyInput
	}
	return text, nil
}

// rawText unquotes a JSON string and keeps any other bytes as they are: the tokeniser
// reads words out of JSON text without help.
func rawText(b []byte) string {
	var s string
	if json.Unmarshal(b, &s) == nil {
		return s
	}
	return string(b)
}

// cut shortens text to at most n bytes, at a character boundary.
func cut(text string, n int) (string, bool) {
	if len(text) <= n {
		return text, false
	}
	i := n
	for i > 0 && !utf8.RuneStart(text[i]) {
		i--
	}
	return text[:i], true
}
