package pick

import (
	"cmp"
	"slices"
	"sync"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// DocID numbers a tool inside one index; ids are dense so that per-tool data lives in
// slices, never maps. A changed tool gets a new id; ids are renumbered on compaction.
type DocID uint32

// posting says that a term occurs in a document, and how often in each field (capped at
// 255, far beyond where BM25's saturation stops caring).
type posting struct {
	doc DocID
	tf  [numFields]uint8
}

// doc is one indexed tool.
type doc struct {
	def  tools.Definition
	seq  uint64 // registration order, kept when the tool changes
	hash string // definition hash, see DefinitionHash
	lens [numFields]uint32
	// terms are the distinct term ids of the tool, to keep document frequencies right when
	// it is removed.
	terms []uint32
}

// Snapshot is one immutable version of the catalog's index. Picks read a snapshot with
// no lock; writers build the next one (sharing most of the memory) and swap it in.
type Snapshot struct {
	version uint64
	docs    []*doc   // by DocID; the backing array is shared with later snapshots
	dead    []uint64 // bitmap of removed or replaced docs
	nDead   int
	live    int
	byName  cowMap[DocID]
	dict    cowMap[uint32]
	// postings by term id, each sorted by doc id. Lists are append-only and shared with
	// later snapshots, which only write beyond this snapshot's lengths.
	postings [][]posting
	df       []int32 // live documents per term
	lenSum   [numFields]int64
	maxSeq   uint64 // the highest registration sequence number handed out

	params BM25Params
	coef   []float32 // numFields per doc: Weight[f] / (1 - B[f] + B[f]·len/avglen)
	other  sync.Map  // BM25Params → []float32, coefficients for other parameters
}

// Version is the catalog version the snapshot shows; it grows by one with every change.
func (s *Snapshot) Version() uint64 { return s.version }

// Len is the number of tools in the snapshot.
func (s *Snapshot) Len() int { return s.live }

// IsLive reports whether id names a tool of this snapshot (not removed, not replaced).
func (s *Snapshot) IsLive(id DocID) bool {
	return int(id) < len(s.docs) && s.dead[id>>6]&(1<<(id&63)) == 0
}

// Definition returns the definition of tool id.
func (s *Snapshot) Definition(id DocID) tools.Definition { return s.docs[id].def }

// Hash returns the definition hash of tool id (see [DefinitionHash]).
func (s *Snapshot) Hash(id DocID) string { return s.docs[id].hash }

// Lookup returns the id of the tool called name.
func (s *Snapshot) Lookup(name string) (DocID, bool) { return s.byName.get(name) }

// Definitions returns the tools in registration order.
func (s *Snapshot) Definitions() []tools.Definition {
	ids := s.inOrder()
	out := make([]tools.Definition, len(ids))
	for i, id := range ids {
		out[i] = s.docs[id].def
	}
	return out
}

// inOrder returns the live ids in registration order.
func (s *Snapshot) inOrder() []DocID {
	ids := make([]DocID, 0, s.live)
	for id := range s.docs {
		if s.IsLive(DocID(id)) {
			ids = append(ids, DocID(id))
		}
	}
	// Ids grow with registration except for changed tools, which keep their old seq.
	slices.SortFunc(ids, func(a, b DocID) int { return cmp.Compare(s.docs[a].seq, s.docs[b].seq) })
	return ids
}

// avgLen is the average length of field f over live tools (1 when empty, to keep norms
// finite).
func (s *Snapshot) avgLen(f Field) float64 {
	if s.live == 0 || s.lenSum[f] == 0 {
		return 1
	}
	return float64(s.lenSum[f]) / float64(s.live)
}

// coefFor returns the per-document field coefficients for p: precomputed for the
// catalog's parameters, computed once and cached for others.
func (s *Snapshot) coefFor(p BM25Params) []float32 {
	if p == s.params {
		return s.coef
	}
	if c, ok := s.other.Load(p); ok {
		return c.([]float32)
	}
	c := s.computeCoef(p)
	s.other.Store(p, c)
	return c
}

func (s *Snapshot) computeCoef(p BM25Params) []float32 {
	c := make([]float32, len(s.docs)*numFields)
	var avg [numFields]float64
	for f := range avg {
		avg[f] = s.avgLen(Field(f))
	}
	for id, d := range s.docs {
		if !s.IsLive(DocID(id)) {
			continue
		}
		for f := 0; f < numFields; f++ {
			norm := 1 - p.B[f] + p.B[f]*float64(d.lens[f])/avg[f]
			if norm <= 0 {
				norm = 1
			}
			c[id*numFields+f] = float32(p.Weight[f] / norm)
		}
	}
	return c
}

// findPosting returns the posting of doc in term's list (binary search; lists are sorted
// by doc id).
func (s *Snapshot) findPosting(term uint32, id DocID) (posting, bool) {
	pl := s.postings[term]
	lo, hi := 0, len(pl)
	for lo < hi {
		m := (lo + hi) / 2
		if pl[m].doc < id {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(pl) && pl[lo].doc == id {
		return pl[lo], true
	}
	return posting{}, false
}
