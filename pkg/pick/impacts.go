package pick

import "math"

// impact is a posting as a pick reads it: the tool, and what one occurrence-weighted
// match of the term adds to its raw score per unit of the term's weight,
// tf~/(K1 + tf~) (see [BM25]), precomputed for one set of parameters. A scan then costs
// one multiply-add per posting, and reads 8 bytes instead of the posting's 16.
type impact struct {
	doc DocID
	v   float32
}

// impactIndex holds the impacts of every posting for one set of parameters, and the
// norm table they were computed with (explain reads it, so that a hit's provenance adds
// up to its score).
type impactIndex struct {
	params BM25Params
	norms  *normTable
	// lists by term id, sorted by doc id, holding only impacts above zero (a term found
	// only in fields of weight 0 adds nothing). Like the postings, they are append-only
	// and shared with later snapshots that keep the same norms.
	lists [][]impact
	// max bounds each term's impacts: a term of weight w adds at most w·max to any tool.
	// Removed tools leave it as it was, still a bound.
	max []float32
}

// impactOf computes a posting's impact.
func impactOf(pst posting, n *normTable, k1 float32) float32 {
	tf := weightedTF(pst, n)
	if tf == 0 {
		return 0
	}
	return tf / (k1 + tf)
}

// gain is what a term of weight w adds with impact v. The explicit conversion rounds the
// product, so that no compiler fuses it into the sum: both ways of scoring, adding the
// same gains in the same order, reach the same float32 score.
func gain(w, v float32) float32 { return float32(w * v) }

// newImpactIndex computes the impacts of all of s's postings for p with norms n.
func newImpactIndex(s *Snapshot, p BM25Params, n *normTable) *impactIndex {
	ix := &impactIndex{params: p, norms: n, lists: make([][]impact, len(s.postings)), max: make([]float32, len(s.postings))}
	var total int
	for _, pl := range s.postings {
		total += len(pl)
	}
	// One backing array for all lists, each with no spare capacity: a later snapshot's
	// append copies the list it grows rather than writing into its neighbour.
	all := make([]impact, 0, total)
	for t, pl := range s.postings {
		start := len(all)
		all = ix.appendImpacts(all, uint32(t), pl)
		ix.lists[t] = all[start:len(all):len(all)]
	}
	return ix
}

// appendImpacts appends the impacts of pl (postings of term t) to dst and raises t's
// bound to cover them.
func (ix *impactIndex) appendImpacts(dst []impact, t uint32, pl []posting) []impact {
	k1 := float32(ix.params.K1)
	m := ix.max[t]
	for _, pst := range pl {
		if v := impactOf(pst, ix.norms, k1); v > 0 {
			dst = append(dst, impact{doc: pst.doc, v: v})
			m = max(m, v)
		}
	}
	ix.max[t] = m
	return dst
}

// next returns the impact index of the snapshot s that a builder made from old, whose
// index is ix: ix extended by the postings added since (terms lists which), when the
// averages the norms use still stand; otherwise (see normDrift) built anew.
func (ix *impactIndex) next(old, s *Snapshot, terms []uint32) *impactIndex {
	if ix == nil || s.normsStale() {
		return nil
	}
	nx := &impactIndex{params: ix.params, norms: ix.norms,
		lists: make([][]impact, len(s.postings)), max: make([]float32, len(s.postings))}
	copy(nx.lists, ix.lists)
	copy(nx.max, ix.max)
	for _, t := range terms {
		var from int
		if int(t) < len(old.postings) {
			from = len(old.postings[t])
		}
		nx.lists[t] = nx.appendImpacts(nx.lists[t], t, s.postings[t][from:])
	}
	return nx
}

// normDrift is how far (relatively) a field's live average length may move from the
// average the snapshot's norms were computed with before the impacts are recomputed.
// Norms within 2% of exact change a score by well under 1% (the length norm enters
// through B·len/avg), and tools added to or removed from a large catalog move the
// averages slowly, so a write seldom pays for recomputing every impact.
const normDrift = 0.02

// normsStale reports whether a field's live average length has moved more than
// normDrift from s.avg, the averages the norms were computed with.
func (s *Snapshot) normsStale() bool {
	for f := range numFields {
		live := s.liveAvgLen(Field(f))
		if math.Abs(live-s.avg[f]) > normDrift*s.avg[f] {
			return true
		}
	}
	return false
}
