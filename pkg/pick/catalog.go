package pick

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Catalog is a live, indexed set of tool definitions. Writers (Put, Remove, Apply) are
// serialised and each publishes a new immutable [Snapshot]; picks take the current
// snapshot with one atomic load and never wait for a writer.
//
// Updates are incremental: a new or changed tool appends postings to the shared,
// append-only posting lists; a removed or replaced tool is marked dead in a bitmap and
// its postings are skipped, until dead tools reach a quarter of the live ones and the
// index is rebuilt from the live tools. A write costs O(terms + tools) word copies for
// the small per-snapshot arrays plus the work for the changed tools, never a rebuild of
// the whole index.
type Catalog struct {
	mu     sync.Mutex // serialises writers
	cur    atomic.Pointer[Snapshot]
	params BM25Params
}

// CatalogOption configures a Catalog.
type CatalogOption func(*Catalog) error

// WithBM25Params sets the BM25 parameters whose per-tool norms are precomputed in every
// snapshot, i.e. the ones the fast path serves. Defaults to [DefaultBM25Params]. Scorers
// with other parameters still work; their norms are computed once per snapshot.
func WithBM25Params(p BM25Params) CatalogOption {
	return func(c *Catalog) error {
		if err := p.validate(); err != nil {
			return err
		}
		c.params = p
		return nil
	}
}

// NewCatalog returns a catalog holding defs, in that registration order.
func NewCatalog(defs []tools.Definition, opts ...CatalogOption) (*Catalog, error) {
	c := &Catalog{params: DefaultBM25Params()}
	for _, o := range opts {
		if err := o(c); err != nil {
			return nil, err
		}
	}
	c.cur.Store(&Snapshot{params: c.params})
	if err := c.Put(defs...); err != nil {
		return nil, err
	}
	return c, nil
}

// Snapshot returns the current version of the index. It is safe to use forever; later
// changes make new snapshots.
func (c *Catalog) Snapshot() *Snapshot { return c.cur.Load() }

// Change is one change to a catalog: Def set puts (adds or replaces) the tool Def.Name;
// Def nil removes the tool Name.
type Change struct {
	Name string
	Def  *tools.Definition
}

// Put adds or replaces tools. A tool whose definition did not change is left alone, so
// replaying a catalog costs little.
func (c *Catalog) Put(defs ...tools.Definition) error {
	ch := make([]Change, len(defs))
	for i := range defs {
		ch[i] = Change{Name: defs[i].Name, Def: &defs[i]}
	}
	return c.Apply(ch...)
}

// Remove removes the named tools; unknown names are ignored.
func (c *Catalog) Remove(names ...string) {
	ch := make([]Change, len(names))
	for i, n := range names {
		ch[i] = Change{Name: n}
	}
	_ = c.Apply(ch...) // removals cannot fail
}

// Apply applies changes in order (a later change of a name wins) and publishes one new
// snapshot for all of them. A definition whose name is not a valid tool name fails the
// whole batch with a *tools.Error of code invalid_definition, and nothing changes.
func (c *Catalog) Apply(changes ...Change) error {
	final := make(map[string]*tools.Definition, len(changes))
	order := make([]string, 0, len(changes))
	for _, ch := range changes {
		name := ch.Name
		if ch.Def != nil {
			name = ch.Def.Name
			if !tools.NamePattern.MatchString(name) {
				return &tools.Error{Code: tools.CodeInvalidDefinition,
					Message: fmt.Sprintf("tool name %q does not match %s", name, tools.NamePattern)}
			}
		}
		if _, seen := final[name]; !seen {
			order = append(order, name)
		}
		final[name] = ch.Def
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.cur.Load()
	b := newBuilder(old)
	for _, name := range order {
		def := final[name]
		id, exists := old.byName.get(name)
		if def == nil {
			if exists {
				b.kill(id)
				b.names[name] = entry[DocID]{deleted: true}
			}
			continue
		}
		h := definitionHash(*def)
		seq := b.nextSeq()
		if exists {
			if old.docs[id].hash == h {
				continue
			}
			seq = old.docs[id].seq
			b.kill(id)
		}
		b.add(*def, h, seq)
	}
	if !b.changed {
		return nil
	}
	next := b.finish()
	if next.nDead > next.live/4+64 {
		next = compact(next)
	}
	c.cur.Store(next)
	return nil
}

// compact rebuilds the index from the live tools of s, keeping their registration order.
func compact(s *Snapshot) *Snapshot {
	b := newBuilder(&Snapshot{params: s.params, version: s.version - 1, maxSeq: s.maxSeq})
	for _, id := range s.inOrder() {
		d := s.docs[id]
		b.add(d.def, d.hash, d.seq)
	}
	return b.finish()
}

// definitionHash identifies a definition's content (see [Snapshot.Hash]): the hex SHA-256 of its JSON
// encoding. Equal definitions hash equally, so it keys caches of derived data (such as
// embeddings) that replicas share.
func definitionHash(d tools.Definition) string {
	b, err := json.Marshal(d)
	if err != nil { // only a RawMessage that is not JSON gets here; hash what we have
		b = fmt.Appendf(nil, "%#v", d)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// builder makes the next snapshot from the current one.
type builder struct {
	old   *Snapshot
	s     *Snapshot
	names map[string]entry[DocID]
	terms map[string]entry[uint32]
	// stems are the words first seen in this batch, by spelling: their terms ("" for a
	// stop word); pairs the phrases first seen, with their two terms.
	stems   map[string]string
	pairs   map[string][2]string
	changed bool
}

func newBuilder(old *Snapshot) *builder {
	s := &Snapshot{
		version:  old.version + 1,
		docs:     old.docs,
		seqs:     old.seqs,
		dead:     append([]uint64(nil), old.dead...),
		open:     append([]uint64(nil), old.open...),
		nDead:    old.nDead,
		live:     old.live,
		byName:   old.byName,
		dict:     old.dict,
		words:    old.words,
		phrases:  old.phrases,
		texts:    old.texts,
		postings: append([][]posting(nil), old.postings...),
		df:       append([]int32(nil), old.df...),
		lenSum:   old.lenSum,
		maxSeq:   old.maxSeq,
		params:   old.params,
	}
	return &builder{old: old, s: s, names: map[string]entry[DocID]{}, terms: map[string]entry[uint32]{},
		stems: map[string]string{}, pairs: map[string][2]string{}}
}

func (b *builder) nextSeq() uint64 {
	b.s.maxSeq++
	return b.s.maxSeq
}

func (b *builder) kill(id DocID) {
	s := b.s
	if !s.isLive(id) {
		return
	}
	b.changed = true
	s.dead[id>>6] |= 1 << (id & 63)
	s.nDead++
	s.live--
	d := s.docs[id]
	for f := range s.lenSum {
		s.lenSum[f] -= int64(d.lens[f])
	}
	for _, t := range d.terms {
		s.df[t]--
	}
}

func (b *builder) add(def tools.Definition, hash string, seq uint64) {
	s := b.s
	b.changed = true
	id := DocID(len(s.docs))
	d := &doc{def: def, seq: seq, hash: hash, learnKey: LearnKey(def)}
	counts := map[string]*[numFields]uint8{}
	var order []string
	count := func(t string, f int) {
		c := counts[t]
		if c == nil {
			c = new([numFields]uint8)
			counts[t] = c
			order = append(order, t)
		}
		if c[f] < 255 {
			c[f]++
		}
	}
	texts := fieldTexts(def)
	for f, list := range texts {
		for _, text := range list {
			prev := ""
			splitWords(text, func(w []byte) {
				t, ok := analyseWord(w)
				if _, known := getBytes(s.words, w); !known {
					if _, seen := b.stems[string(w)]; !seen {
						b.stems[string(w)] = t
					}
				}
				if !ok {
					return
				}
				count(t, f)
				d.lens[f]++
				if prev != "" && phraseFields[f] {
					ph := phrase(prev, t)
					count(ph, f) // not counted in the length: it repeats two words
					if _, known := b.pairs[ph]; !known {
						b.pairs[ph] = [2]string{prev, t}
					}
				}
				prev = t
			})
		}
	}
	for f, n := range d.lens {
		d.ql[f] = quantLen(n)
	}
	d.terms = make([]uint32, 0, len(order))
	d.tfs = make([][numFields]uint8, 0, len(order))
	for _, t := range order {
		tid, ok := b.terms[t]
		if !ok {
			tid.v, ok = s.dict.get(t)
			if !ok {
				tid.v = uint32(len(s.postings))
				s.postings = append(s.postings, nil)
				s.texts = append(s.texts, t)
				s.df = append(s.df, 0)
			}
			b.terms[t] = tid
		}
		s.postings[tid.v] = append(s.postings[tid.v], posting{doc: id, tf: *counts[t], ql: d.ql})
		s.df[tid.v]++
		d.terms = append(d.terms, tid.v)
		d.tfs = append(d.tfs, *counts[t])
	}
	s.docs = append(s.docs, d)
	s.seqs = append(s.seqs, seq)
	if need := (len(s.docs) + 63) / 64; len(s.dead) < need {
		s.dead = append(s.dead, 0)
		s.open = append(s.open, 0)
	}
	if def.Safe && len(def.Roles) == 0 {
		s.open[id>>6] |= 1 << (id & 63)
	}
	s.live++
	for f := range s.lenSum {
		s.lenSum[f] += int64(d.lens[f])
	}
	b.names[def.Name] = entry[DocID]{v: id}
}

func (b *builder) finish() *Snapshot {
	s := b.s
	s.byName = s.byName.with(b.names)
	newTerms := make(map[string]entry[uint32], len(b.terms))
	for t, e := range b.terms {
		if _, known := s.dict.get(t); !known {
			newTerms[t] = e
		}
	}
	s.dict = s.dict.with(newTerms)
	words := make(map[string]entry[uint32], len(b.stems))
	for w, t := range b.stems {
		id := uint32(noTerm)
		if t != "" {
			id = b.terms[t].v
		}
		words[w] = entry[uint32]{v: id}
	}
	s.words = s.words.with(words)
	pairs := make(map[uint64]entry[uint32])
	for ph, parts := range b.pairs {
		if _, known := newTerms[ph]; known {
			pairs[pairKey(b.terms[parts[0]].v, b.terms[parts[1]].v)] = entry[uint32]{v: b.terms[ph].v}
		}
	}
	s.phrases = s.phrases.with(pairs)
	changed := make([]uint32, 0, len(b.terms))
	for _, e := range b.terms {
		changed = append(changed, e.v)
	}
	s.avg = b.old.avg
	s.impacts = b.old.impacts.next(b.old, s, changed)
	if s.impacts == nil {
		for f := range numFields {
			s.avg[f] = s.liveAvgLen(Field(f))
		}
		s.impacts = newImpactIndex(s, s.params, s.buildNorms(s.params))
	}
	return s
}

// deadCount is a consistency helper for tests: the number of set bits in the bitmap.
func (s *Snapshot) deadCount() int {
	n := 0
	for _, w := range s.dead {
		n += bits.OnesCount64(w)
	}
	return n
}
