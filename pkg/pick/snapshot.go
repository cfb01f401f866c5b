package pick

import (
	"cmp"
	"math"
	"slices"
	"sync"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// DocID numbers a tool inside one index; ids are dense so that per-tool data lives in
// slices, never maps. A changed tool gets a new id; ids are renumbered on compaction.
type DocID uint32

// posting says that a term occurs in a document, how often in each field (capped at
// 255, far beyond where BM25's saturation stops caring), and the document's field
// lengths, quantised to a byte (see quantLen). Carrying the lengths in the posting, as
// Lucene carries norms, keeps the scan of a posting list sequential: the length norm
// comes from a 256-entry table per field that fits in L1, not from a per-tool array
// read at random (a cache miss per posting at 100,000 tools).
type posting struct {
	doc DocID
	tf  [numFields]uint8
	ql  [numFields]uint8
}

// doc is one indexed tool.
type doc struct {
	def  tools.Definition
	seq  uint64 // registration order, kept when the tool changes
	hash string // definition hash, see definitionHash
	// learnKey is LearnKey(def): learned text is kept only for the definition it was
	// learned for.
	learnKey string
	lens     [numFields]uint32
	ql       [numFields]uint8 // lens quantised, as in the tool's postings
	// terms are the distinct term ids of the tool, to keep document frequencies right when
	// it is removed, and tfs their frequencies per field (the tool's postings, kept with
	// the tool so that explaining a hit needs no search of the posting lists).
	terms []uint32
	tfs   [][numFields]uint8
}

// Snapshot is one immutable version of the catalog's index. Picks read a snapshot with
// no lock; writers build the next one (sharing most of the memory) and swap it in.
type Snapshot struct {
	version uint64
	docs    []*doc // by DocID; the backing array is shared with later snapshots
	// seqs are the docs' registration order (doc.seq), by DocID and shared like docs: the
	// tie-breaker of every candidate a pick keeps, read without a pointer chase.
	seqs []uint64
	dead []uint64 // bitmap of removed or replaced docs
	// open is the bitmap of docs that every pick without filters may return (safe, and
	// open to every role), so that such a pick need not read their definitions.
	open   []uint64
	nDead  int
	live   int
	byName cowMap[string, DocID]
	dict   cowMap[string, uint32] // term → term id
	// words maps each word as the tools spell it (lower-cased, before stemming) to its
	// term id, or to noTerm for a stop word, so that most query words are analysed with
	// one lookup; other words are stemmed and looked up in dict.
	words cowMap[string, uint32]
	// phrases maps two adjacent terms, by id (pairKey), to the id of their phrase term.
	phrases cowMap[uint64, uint32]
	texts   []string // term by id; append-only and shared like docs
	// postings by term id, each sorted by doc id. Lists are append-only and shared with
	// later snapshots, which only write beyond this snapshot's lengths.
	postings [][]posting
	df       []int32 // live documents per term
	lenSum   [numFields]int64
	maxSeq   uint64 // the highest registration sequence number handed out

	params BM25Params
	// avg are the average field lengths the norms use: the live averages when the
	// impacts were last computed, within normDrift of them.
	avg     [numFields]float64
	impacts *impactIndex // for params
	other   sync.Map     // BM25Params → *impactIndex, for other parameters
}

// normTable holds, per field and quantised length, Weight[f] / (1 − B[f] + B[f]·len/avglen).
type normTable [numFields][256]float32

// Version is the catalog version the snapshot shows; it grows by one with every change.
func (s *Snapshot) Version() uint64 { return s.version }

// Len is the number of tools in the snapshot.
func (s *Snapshot) Len() int { return s.live }

// isLive reports whether id names a tool of this snapshot (not removed, not replaced).
func (s *Snapshot) isLive(id DocID) bool {
	return int(id) < len(s.docs) && s.dead[id>>6]&(1<<(id&63)) == 0
}

// Definition returns the definition of tool id.
func (s *Snapshot) Definition(id DocID) tools.Definition { return s.docs[id].def }

// Hash identifies the content of tool id's definition (the hex SHA-256 of its JSON):
// equal definitions hash equally, so a scorer can key what it derives from a tool (an
// embedding, say) by it and keep it across snapshots and replicas.
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
		if s.isLive(DocID(id)) {
			ids = append(ids, DocID(id))
		}
	}
	// Ids grow with registration except for changed tools, which keep their old seq.
	slices.SortFunc(ids, func(a, b DocID) int { return cmp.Compare(s.docs[a].seq, s.docs[b].seq) })
	return ids
}

// liveAvgLen is the average length of field f over live tools (1 when empty, to keep
// norms finite).
func (s *Snapshot) liveAvgLen(f Field) float64 {
	if s.live == 0 || s.lenSum[f] == 0 {
		return 1
	}
	return float64(s.lenSum[f]) / float64(s.live)
}

// impactsFor returns the impacts for p: kept with the snapshot for the catalog's
// parameters, computed on first use and cached for others (a pass over every posting).
func (s *Snapshot) impactsFor(p BM25Params) *impactIndex {
	if p == s.params && s.impacts != nil {
		return s.impacts
	}
	if ix, ok := s.other.Load(p); ok {
		return ix.(*impactIndex)
	}
	ix, _ := s.other.LoadOrStore(p, newImpactIndex(s, p, s.buildNorms(p)))
	return ix.(*impactIndex)
}

// buildNorms computes the norm table for p from the averages s.avg.
func (s *Snapshot) buildNorms(p BM25Params) *normTable {
	t := new(normTable)
	for f := range numFields {
		avg := s.avg[f]
		for q := range 256 {
			norm := 1 - p.B[f] + p.B[f]*dequantLen(uint8(q))/avg
			if norm <= 0 {
				norm = 1
			}
			t[f][q] = float32(p.Weight[f] / norm)
		}
	}
	return t
}

// quantLen maps a field length to a byte: exact below 128, then in steps of 10% (the
// length norm changes little between neighbours there).
func quantLen(n uint32) uint8 {
	if n < 128 {
		return uint8(n)
	}
	return uint8(min(128+int(math.Log(float64(n)/128)/math.Log(1.1)), 255))
}

// dequantLen is the length a quantised value stands for.
func dequantLen(q uint8) float64 {
	if q < 128 {
		return float64(q)
	}
	return 128 * math.Pow(1.1, float64(q-128))
}
