package pick

import (
	"context"
	"iter"
)

// Scorer ranks the candidate tools of a snapshot against a request.
//
// Score returns at most req.Limit hits, best first, each with a score normalised to
// 0..1 (1 a perfect match, 0 none); the scale must not depend on the catalog's size, so
// that MinScore means the same for every request. It must consider only tools for which
// req.Allowed is true (Pick checks again and drops any other). It must return promptly
// once ctx is done; a scorer that does not is abandoned when the pick's timeout passes,
// and the pick falls back to registration order. Score is called concurrently.
type Scorer interface {
	// Name identifies the scorer in provenance and metrics, e.g. "bm25".
	Name() string
	Score(ctx context.Context, req *Request) ([]Hit, error)
}

// Request is what a scorer scores: the input text, the snapshot and which of its tools
// may be candidates.
type Request struct {
	// Text is the input, stringified, trimmed and cut to the size limit.
	Text string
	// Snapshot is the catalog version being ranked.
	Snapshot *Snapshot
	// Limit is how many hits the pick needs.
	Limit int
	// Debug asks for the scorer's details in each hit.
	Debug bool

	filter *filter
}

// Allowed reports whether tool id may be a candidate (live, safe or unsafe allowed, and
// passing the tag, role and capability filters).
func (r *Request) Allowed(id DocID) bool { return r.filter.allow(id) }

// Candidates yields every allowed tool, in index order. Scorers that look at every tool
// (embeddings) use it; BM25 walks posting lists instead.
func (r *Request) Candidates() iter.Seq[DocID] {
	return func(yield func(DocID) bool) {
		for id := range r.Snapshot.docs {
			if r.Allowed(DocID(id)) && !yield(DocID(id)) {
				return
			}
		}
	}
}

// Hit is one scored tool.
type Hit struct {
	ID DocID
	// Score is normalised to 0..1.
	Score float64
	// Reason says in a few words why the tool scored, for people.
	Reason string
	// Details is the scorer's own provenance, filled when Request.Debug is set.
	Details any
}
