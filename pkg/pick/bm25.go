package pick

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"sync"
)

// BM25Params are the parameters of the BM25F scorer. Arrays are indexed by [Field].
type BM25Params struct {
	// K1 is the term-frequency saturation: how quickly repeats of a term stop adding.
	K1 float64
	// B is the length normalisation per field, 0 (none) to 1 (full); index it by
	// [Field], e.g. B[FieldDescription].
	B [numFields]float64
	// Weight is how much a term occurrence in each field counts, before saturation;
	// index it by [Field].
	Weight [numFields]float64
	// Phrase is how much a match of two adjacent query words, found adjacent in a tool's
	// name or description, counts beside a word match (whose weight is 1); 0 turns
	// phrases off.
	Phrase float64
	// Sentence is how much the sentence of a request that a tool matches best counts
	// beside the whole request (weight 1): a request that asks for several things, one
	// sentence each, needs a tool for each, and a tool that matches one sentence well
	// matches only a small share of the whole. It applies to requests of two or more
	// sentences of at least two words; 0 turns it off.
	Sentence float64
}

// DefaultBM25Params are the defaults, with three free parameters, K1, Phrase and
// Sentence, chosen by tuning on the public ToolLens and Seal-Tools queries
// (internal/toolret's Grid); k-fold cross-validation (`picker eval -folds 5`) chooses
// the same on four folds of five (K1 0.9 and Sentence 0.45 on the other) and beats plain
// BM25 on the held-out queries of both benchmarks. The rest are fixed by reasoning
// rather than tuned, so that they cannot fit the public queries:
//   - Weight 1 in every field: a word counts the same wherever it occurs; what the name
//     says is stressed by its phrases instead.
//   - B: the textbook 0.75 for the fields written as text or labels (name, description,
//     tags, returns); 0 for the parameter fields, which are lists of independent items: a
//     tool with many parameters should not have each of them count less.
//   - K1 1.2 (tuned over 0.9–2.4): the textbook value.
//   - Phrase 1 (tuned over 0–3): two query words in a row found in a row in the name or
//     description count as much again as a word. Seal-Tools requests name what a tool
//     does in the words of its camelCase name.
//   - Sentence 0.3 (tuned over 0–0.6): a tool's share of the sentence it matches best
//     adds 0.3 of it. Seal-Tools requests ask for up to six things in as many
//     sentences; the tool for a sentence that shares few words with the others ranked
//     below tools matching several of them, or two alike (getBloodCount and
//     getCompleteBloodCount). With it Seal-Tools gains 1.4 points of held-out nDCG@10
//     (93.16 to 94.55) and ToolLens, mostly one sentence a request, 0.7 (36.44 to 37.14,
//     with the contractions of splitWords).
func DefaultBM25Params() BM25Params {
	p := BM25Params{K1: 1.2, Phrase: 1, Sentence: 0.3}
	for f := range numFields {
		p.B[f], p.Weight[f] = 0.75, 1
	}
	p.B[FieldParamNames], p.B[FieldParamText] = 0, 0
	return p
}

func (p BM25Params) validate() error {
	if !(p.Phrase >= 0) || !(p.Sentence >= 0) {
		return fmt.Errorf("%w: BM25 phrase and sentence weights must be 0 or more, got %v and %v", ErrInvalidOption, p.Phrase, p.Sentence)
	}
	if !(p.K1 > 0) {
		return fmt.Errorf("%w: BM25 k1 must be positive, got %v", ErrInvalidOption, p.K1)
	}
	for f := range numFields {
		if !(p.B[f] >= 0 && p.B[f] <= 1) || !(p.Weight[f] >= 0) {
			return fmt.Errorf("%w: BM25 field %s needs 0 ≤ b ≤ 1 and weight ≥ 0, got b %v weight %v",
				ErrInvalidOption, Field(f), p.B[f], p.Weight[f])
		}
	}
	return nil
}

// BM25 is the default scorer: BM25F over the catalog's inverted index. A term's
// frequency is summed over the fields, each occurrence weighted by its field's weight and
// divided by the field's length norm, then saturated once:
//
//	tf~(t,d) = Σ_f Weight[f]·tf_f(t,d) / (1 − B[f] + B[f]·len_f(d)/avglen_f)
//	raw(d)   = Σ_t qtf(t)·idf(t)·tf~(t,d) / (K1 + tf~(t,d))
//	idf(t)   = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))
//
// The score is raw(d) divided by its upper bound for this query, Σ_t qtf(t)·idf(t) over
// the query terms the catalog knows: the share of the query's information the tool
// matches. For a request of several sentences, with Params.Sentence = s, it is
// (share + s·best)/(1 + s), best being the tool's share of the sentence it matches
// best. It lies in 0..1, does not depend on the other tools' scores (a weak best match
// stays weak), and MinScore keeps its meaning across requests. Query words the
// catalog has never seen (numbers, names) cannot match any tool and do not count.
//
// Only the posting lists of the query's terms are read, as precomputed impacts
// tf~/(K1+tf~) (kept in the snapshot for the catalog's parameters), and scores
// accumulate in a pooled dense array, so a pick costs a multiply-add per posting read.
type BM25 struct {
	// Params overrides the catalog's parameters when set (K1 > 0).
	Params BM25Params

	path scorePath // tests force one way of scoring, to compare them
}

// scorePath is how BM25 scores: by the size of the request, or always one way.
type scorePath uint8

const (
	pathAuto   scorePath = iota
	pathBlocks           // every posting, block by block
	pathSparse           // term by term, with early termination
)

// Name returns "bm25".
func (BM25) Name() string { return "bm25" }

// queryTerm is an analysed query term (a word or a phrase) found in the index.
type queryTerm struct {
	text   string
	id     uint32
	qtf    int
	idf    float64
	weight float64 // 1 for a word, Params.Phrase for a phrase
}

// scratch holds the buffers of one pick, reused across picks.
type scratch struct {
	acc     []float32
	touched []DocID
	cands   []DocID
	top     topK
	ranked  []ranked
	terms   []queryTerm
	set     termSet
	lists   [][]impact
	weights []float32
	hits    []termHit
	keys    []termKey
	sorted  []queryTerm
	seed    []DocID
	words   []queryWord
	// best holds each tool's share of the sentence it matches best (sentences),
	// bestDocs the tools with one; sent and sentDocs score one sentence.
	best, sent         []float32
	bestDocs, sentDocs []DocID
}

// termKey is a query term's place in the order terms are read.
type termKey struct {
	bound float64
	at    int // index in query order
}

// termSet finds a query term by id: an open-addressing table of indexes into the
// query's terms, sized for maxQueryTerms, cleared for each pick.
type termSet struct {
	terms []queryTerm
	slots [2 * maxQueryTerms]uint16 // index+1 into terms; 0 is empty
}

// reset makes the set hold terms.
func (ts *termSet) reset(terms []queryTerm) {
	clear(ts.slots[:])
	ts.terms = terms
	for i := range terms {
		ts.insert(terms, i)
	}
}

// insert adds terms[i], which the set does not hold yet; terms extends the set's slice.
func (ts *termSet) insert(terms []queryTerm, i int) {
	ts.terms = terms
	const mask = len(ts.slots) - 1
	h := hashID(terms[i].id) & mask
	for ts.slots[h] != 0 {
		h = (h + 1) & mask
	}
	ts.slots[h] = uint16(i + 1)
}

func (ts *termSet) find(id uint32) (int, bool) {
	const mask = len(ts.slots) - 1
	for h := hashID(id) & mask; ; h = (h + 1) & mask {
		i := ts.slots[h]
		if i == 0 {
			return 0, false
		}
		if ts.terms[i-1].id == id {
			return int(i - 1), true
		}
	}
}

// hashID mixes a term id (Fibonacci hashing), so that neighbouring ids spread.
func hashID(id uint32) int { return int((id * 0x9E3779B1) >> 16) }

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// queryWord is a word of a request, analysed once for every scorer that reads it (the
// catalog's BM25 and the learned fields): a long request's words cost most of a pick's
// time outside the postings.
type queryWord struct {
	text     string // its term: as some tool spells it, else stemmed
	id       uint32 // the catalog's term id; noTerm when the catalog has no such term
	spelled  bool   // found as spelled in some tool (s.words), so not stemmed
	sentence int32  // the sentence of the request it is in (splitSentences)
}

// analyseWords splits text into its words' terms, stop words left out, into words.
// A word spelled as in some tool costs one lookup (s.words); only other words are
// stemmed and looked up by their term.
func analyseWords(s *Snapshot, text string, words []queryWord) []queryWord {
	words = words[:0]
	splitSentences(text, func(w []byte, sentence int) {
		if id, ok := getBytes(s.words, w); ok {
			if id != noTerm { // else a stop word
				words = append(words, queryWord{text: s.texts[id], id: id, spelled: true, sentence: int32(sentence)})
			}
			return
		}
		t, ok := analyseWord(w)
		if !ok {
			return // a stop word
		}
		id, ok := s.dict.get(t)
		if !ok {
			id = noTerm
		}
		words = append(words, queryWord{text: t, id: id, sentence: int32(sentence)})
	})
	return words
}

// analyseQuery returns the distinct query terms known to s among words (analyseWords),
// with their counts and idf, in order of first appearance, and the words the index does
// not know. With a phrase weight, each pair of adjacent words that the index holds as a
// phrase is a term too (a phrase costs one lookup by the two term ids).
func analyseQuery(s *Snapshot, words []queryWord, phraseWeight float64, sc *scratch) (terms []queryTerm, unknown []string) {
	terms = sc.terms[:0]
	n := float64(s.live)
	set := &sc.set
	set.reset(nil)
	add := func(id uint32, weight float64) {
		if i, ok := set.find(id); ok {
			terms[i].qtf++
			return
		}
		if len(terms) >= maxQueryTerms {
			return
		}
		df := float64(s.df[id])
		terms = append(terms, queryTerm{text: s.texts[id], id: id, qtf: 1, idf: math.Log(1 + (n-df+0.5)/(df+0.5)), weight: weight})
		set.insert(terms, len(terms)-1)
	}
	prev := noTerm // the previous word's term id; noTerm when not in the index
	for i, w := range words {
		id := w.id
		if i > 0 && words[i-1].sentence != w.sentence {
			prev = noTerm // a phrase does not span two sentences
		}
		if !w.spelled && (id == noTerm || s.df[id] == 0) {
			if len(unknown) < maxQueryTerms {
				unknown = append(unknown, w.text)
			}
			prev = noTerm
			continue
		}
		if phraseWeight > 0 && prev != noTerm {
			if ph, ok := s.phrases.get(pairKey(prev, id)); ok && s.df[ph] > 0 {
				add(ph, phraseWeight)
			}
		}
		prev = id
		if s.df[id] == 0 {
			if len(unknown) < maxQueryTerms {
				unknown = append(unknown, w.text)
			}
			continue
		}
		add(id, 1)
	}
	return terms, unknown
}

// sortByBound orders terms by decreasing bound, ties in query order, into a scratch
// slice (the terms are sorted as small keys, then moved once).
func sortByBound(terms []queryTerm, sc *scratch) []queryTerm {
	keys := sc.keys[:0]
	for i, qt := range terms {
		keys = append(keys, termKey{qt.bound(), i})
	}
	slices.SortFunc(keys, func(a, b termKey) int {
		switch { // bounds are finite: no NaN to order, as cmp.Compare would
		case a.bound > b.bound:
			return -1
		case a.bound < b.bound:
			return 1
		}
		return a.at - b.at
	})
	sorted := sc.sorted[:0]
	for _, k := range keys {
		sorted = append(sorted, terms[k.at])
	}
	sc.keys, sc.sorted, sc.terms = keys, terms, sorted
	return sorted
}

// maxQueryTerms bounds the distinct terms of a query, and with it the work of a pick.
const maxQueryTerms = 256

// postingBudget bounds the postings a pick reads, per tool of the catalog: the terms of
// a request are read from the rarest, and once their lists hold that many postings the
// commoner ones left are not scored (they still count in the score's upper bound, as
// words the tool does not match). It cuts only the commonest words of long requests,
// which add little to a ranking and most of its cost: on the ToolLens and Seal-Tools
// queries it changed held-out nDCG@10 by +0.05 or less, and it roughly halved p99 at
// 10,000 tools. Half the catalog cost 0.35 points on Seal-Tools.
const postingBudget = 1

// minPostingBudget is the budget's floor: a small catalog's postings are all read (there
// the whole pick costs microseconds), so a request whose rare words are many does not
// crowd out the words of a tool it names (found with a three-tool catalog, where a
// budget of three postings left write_file unscored for "... and write it to a file").
const minPostingBudget = 4096

// Score ranks the allowed tools by BM25F.
//
// Terms are read in decreasing order of their weight qtf·idf; which are read is bounded
// by postingBudget. A request that reads postings of many of the catalog's tools (one
// per denseReads or more: long requests) is scored block by block of tool ids
// (scoreBlocks), every posting once. Others are scored term by term (scoreSparse): once
// the bounds of the terms left (weight times highest impact) sum to less than the k-th
// best score so far, no tool that has not matched yet can reach the top k, so the
// remaining, long posting lists of common words only add to the tools already matched
// (by a binary search per tool when they are few), and tools drop out as soon as they
// cannot reach the k-th score (term-at-a-time with early termination, after Moffat and
// Zobel). Either way the result is exactly that of scoring every posting of the terms
// read.
func (b BM25) Score(ctx context.Context, req *Request) ([]Hit, error) {
	r, err := b.rank(ctx, req, nil, nil)
	if err != nil {
		return nil, err
	}
	defer r.release()
	hits := make([]Hit, len(r.sc.ranked))
	for i, rk := range r.sc.ranked {
		hits[i] = Hit{ID: rk.id, Score: rk.score / r.norm}
		reason, ex := r.explain(rk.id, req.Debug)
		hits[i].Reason = reason
		if ex != nil {
			hits[i].Details = ex
		}
	}
	return hits, nil
}

// coldRank is a BM25 ranking of a request: its best req.Limit allowed tools in
// sc.ranked (raw scores), and what explaining or scoring another tool needs.
type coldRank struct {
	s       *Snapshot
	ix      *impactIndex
	sc      *scratch
	terms   []queryTerm // the terms read, in sc.set
	unknown []string
	maxRaw  float64 // the raw score's upper bound: the whole request's share is raw/maxRaw
	// sent is the weight of the best sentence's share (sc.best), 0 when the request
	// was scored whole only; norm = maxRaw·(1 + sent) normalises scores to 0..1.
	sent, norm float64
}

// release returns the scratch buffers; r is not to be used after.
func (r *coldRank) release() { r.sc.release() }

// release clears what a ranking left in sc and returns it to the pool.
func (sc *scratch) release() {
	for _, d := range sc.bestDocs {
		sc.best[d] = 0
	}
	sc.bestDocs = sc.bestDocs[:0]
	scratchPool.Put(sc)
}

// explain explains tool id's score (see explain).
func (r *coldRank) explain(id DocID, debug bool) (string, *BM25Details) {
	reason, ex := explain(r.s, r.ix, r.terms, &r.sc.set, id, r.maxRaw, debug, r.sc)
	if ex != nil {
		ex.Unknown = r.unknown
		if r.sent > 0 {
			ex.Sentence = float64(r.sc.best[id])
		}
	}
	return reason, ex
}

// score is tool id's normalised score, as the ranking would give it (0..1).
func (r *coldRank) score(id DocID) float64 {
	if r.maxRaw == 0 {
		return 0
	}
	var sent float64
	if r.sent > 0 {
		sent = r.sent * float64(r.sc.best[id]) * r.maxRaw
	}
	norms := r.ix.norms
	d := r.s.docs[id]
	var raw float64
	add := func(i int, tfs [numFields]uint8) {
		var tf float64
		for f := range numFields {
			tf += float64(tfs[f]) * float64(norms[f][d.ql[f]])
		}
		if tf > 0 {
			raw += r.terms[i].bound() * tf / (r.ix.params.K1 + tf)
		}
	}
	if len(d.terms) <= explainWalk*len(r.terms) {
		for j, t := range d.terms {
			if i, ok := r.sc.set.find(t); ok {
				add(i, d.tfs[j])
			}
		}
	} else {
		for i, qt := range r.terms {
			if pst, ok := findIn(r.s.postings[qt.id], id); ok {
				add(i, pst.tf)
			}
		}
	}
	return (raw + sent) / r.norm
}

// rank scores req's allowed tools and keeps the best req.Limit in sc.ranked. With pre,
// the ranking is by raw score plus what pre adds to the accumulators (indexed by tool
// id) before any posting is read, given the scale of a raw score (norm, or 1 when the
// query has no known term); pre appends the tools it added to to seed and returns it,
// so that term-by-term scoring counts them as matched. words are req.Text's words
// (analyseWords) when the caller has them already; nil analyses req.Text.
func (b BM25) rank(ctx context.Context, req *Request, words []queryWord, pre func(acc []float32, scale float64, seed []DocID) []DocID) (*coldRank, error) {
	s := req.Snapshot
	p := s.params
	if b.Params.K1 > 0 {
		if err := b.Params.validate(); err != nil {
			return nil, err
		}
		p = b.Params
	}
	ix := s.impactsFor(p)

	sc := scratchPool.Get().(*scratch)
	r := &coldRank{s: s, ix: ix, sc: sc}
	if words == nil {
		sc.words = analyseWords(s, req.Text, sc.words)
		words = sc.words
	}
	// Bounded work: past a budget of postings, the commonest terms are not read.
	budget := max(postingBudget*len(s.docs), minPostingBudget)
	if p.Sentence > 0 && scoreSentences(s, ix, words, p.Phrase, max(budget/2, minPostingBudget), sc) {
		r.sent = p.Sentence
	}
	sc.terms, r.unknown = analyseQuery(s, words, p.Phrase, sc)
	terms := sc.terms
	terms = sortByBound(terms, sc)
	for _, qt := range terms {
		r.maxRaw += float64(float32(qt.bound()))
	}
	r.norm = r.maxRaw * (1 + r.sent)
	terms = withinBudget(ix, terms, budget)
	if cap(sc.acc) < len(s.docs) {
		sc.acc = make([]float32, len(s.docs))
	}
	acc := sc.acc[:len(s.docs)]
	reads := 0
	for _, qt := range terms {
		reads += len(ix.lists[qt.id])
	}
	var err error
	sc.seed = sc.seed[:0]
	if r.sent > 0 {
		// Each tool's best sentence, on the scale of the raw score, before any posting.
		c := float32(r.sent * r.maxRaw)
		for _, d := range sc.bestDocs {
			acc[d] += c * sc.best[d]
			sc.seed = append(sc.seed, d)
		}
	}
	if pre != nil {
		scale := r.norm
		if scale == 0 {
			scale = 1
		}
		sc.seed = pre(acc, scale, sc.seed)
	}
	if b.path == pathBlocks || b.path == pathAuto && reads*denseReads >= len(s.docs) {
		if err = scoreBlocks(ctx, req, ix, terms, acc, sc); err != nil && len(sc.seed) > 0 {
			clear(acc) // the blocks not reached hold what pre added
		}
	} else {
		err = b.scoreSparse(ctx, req, ix, terms, acc, sc)
	}
	if err != nil {
		sc.release()
		return nil, err
	}
	sc.ranked = sc.top.sorted(sc.ranked[:0])
	sc.set.reset(terms)
	r.terms = terms
	return r, nil
}

// withinBudget returns the first of terms (in the order they are read) whose posting
// lists hold at most budget postings together, and at least one term.
func withinBudget(ix *impactIndex, terms []queryTerm, budget int) []queryTerm {
	for i, qt := range terms {
		budget -= len(ix.lists[qt.id])
		if budget < 0 && i > 0 {
			return terms[:i]
		}
	}
	return terms
}

// minSentenceWords is how many words the index knows a sentence needs to be scored on
// its own: "1." or "Thanks!" say nothing of a tool.
const minSentenceWords = 2

// scoreSentences scores each sentence of a request of two or more (of at least
// minSentenceWords known words) on its own, with budget postings for them all (the
// caller gives them half the request's, at least minPostingBudget: a sentence is
// known by its rarest words), and
// leaves in sc.best each tool's share of the information of the sentence it matches
// best (sc.bestDocs lists the tools with one). It reports whether the request had such
// sentences. It uses the scratch's term buffers, which the whole request's analysis
// then takes over.
func scoreSentences(s *Snapshot, ix *impactIndex, words []queryWord, phrase float64, budget int, sc *scratch) bool {
	var spans [][2]int
	for lo := 0; lo < len(words); {
		hi, known := lo, 0
		for ; hi < len(words) && words[hi].sentence == words[lo].sentence; hi++ {
			if id := words[hi].id; id != noTerm && s.df[id] > 0 {
				known++
			}
		}
		if known >= minSentenceWords {
			spans = append(spans, [2]int{lo, hi})
		}
		lo = hi
	}
	if len(spans) < 2 {
		return false
	}
	if cap(sc.best) < len(s.docs) {
		sc.best = make([]float32, len(s.docs))
		sc.sent = make([]float32, len(s.docs))
	}
	best, sent := sc.best[:len(s.docs)], sc.sent[:len(s.docs)]
	for _, sp := range spans {
		terms, _ := analyseQuery(s, words[sp[0]:sp[1]], phrase, sc)
		terms = sortByBound(terms, sc)
		var bound float64
		for _, qt := range terms {
			bound += float64(float32(qt.bound()))
		}
		if bound == 0 {
			continue
		}
		docs := sc.sentDocs[:0]
		for _, qt := range withinBudget(ix, terms, budget/len(spans)) {
			w := float32(qt.bound())
			for _, im := range ix.lists[qt.id] {
				if sent[im.doc] == 0 {
					docs = append(docs, im.doc)
				}
				sent[im.doc] += gain(w, im.v)
			}
		}
		for _, d := range docs {
			if share := float32(float64(sent[d]) / bound); share > best[d] {
				if best[d] == 0 {
					sc.bestDocs = append(sc.bestDocs, d)
				}
				best[d] = share
			}
			sent[d] = 0
		}
		sc.sentDocs = docs
	}
	return len(sc.bestDocs) > 0
}

// denseReads sets when a pick scores block by block (scoreBlocks) rather than term by
// term (scoreSparse): when it reads at least one posting per denseReads tools of the
// catalog. Block scoring pays a compare per tool of the catalog; term scoring several
// times more per posting (a branch on first touch, a random update, checks of the k-th
// score). Of 4, 8, 16 and 32 tried on the benchmark queries at 10,000 and 100,000 tools,
// 4 to 16 were within the machine's noise of each other; 32 was slower.
const denseReads = 8

// blockDocs is the span of tool ids scoreBlocks scores at a time: 16,384 accumulators,
// 64 KiB, stay in the L2 cache (a random update there costs little more than in L1)
// while every term adds its postings of the block. Catalogs of up to that many tools are
// one block, scored with no compare per posting. Of 4,096 and 16,384, measured at
// 10,000 and 100,000 tools, the larger was as fast or faster.
const blockDocs = 16384

// scoreBlocks scores every posting of terms into the best req.Limit allowed tools in
// sc.top, a block of tool ids at a time: every term adds its postings of the block
// (lists are sorted by tool id), then one pass over the block's accumulators keeps the
// best and clears them. Each posting costs a multiply-add in cache with no branch to
// mispredict, and each tool of the catalog a compare: for requests that read postings
// of a large share of the tools, several times less than tracking which tools were
// touched, and the accumulators never leave the cache of a large catalog.
func scoreBlocks(ctx context.Context, req *Request, ix *impactIndex, terms []queryTerm, acc []float32, sc *scratch) error {
	s := req.Snapshot
	sc.top.reset(req.Limit)
	lists, ws := sc.lists[:0], sc.weights[:0]
	for _, qt := range terms {
		lists = append(lists, ix.lists[qt.id])
		ws = append(ws, float32(qt.bound()))
	}
	sc.lists, sc.weights = lists, ws
	defer clear(lists) // the pool must not keep the snapshot's lists alive
	// floor is the least score that can enter the top: any match until it is full, then
	// its worst score.
	floor := float32(math.SmallestNonzeroFloat32)
	for lo := 0; lo < len(acc); lo += blockDocs {
		if err := ctx.Err(); err != nil {
			return err
		}
		hi := min(lo+blockDocs, len(acc))
		for t, list := range lists {
			w := ws[t]
			if hi == len(acc) { // the last block: the rest of every list
				for _, im := range list {
					acc[im.doc] += gain(w, im.v)
				}
				continue
			}
			j := 0
			for ; j < len(list) && int(list[j].doc) < hi; j++ {
				acc[list[j].doc] += gain(w, list[j].v)
			}
			lists[t] = list[j:]
		}
		block := acc[lo:hi]
		for i, v := range block {
			if v < floor {
				continue // most tools: one predictable compare
			}
			if d := DocID(lo + i); req.Allowed(d) {
				sc.top.push(ranked{score: float64(v), key: s.seqs[d], id: d})
				if len(sc.top.heap) == req.Limit {
					floor = float32(sc.top.heap[0].score) // ties may still enter, by seq
				}
			}
		}
		clear(block)
	}
	return nil
}

// scoreSparse scores terms into the best req.Limit allowed tools in sc.top, tracking
// the tools touched, with early termination (see [BM25.Score]).
func (b BM25) scoreSparse(ctx context.Context, req *Request, ix *impactIndex, terms []queryTerm, acc []float32, sc *scratch) error {
	s := req.Snapshot
	// Tools given a head start (rank's pre) count as matched from the start.
	touched := append(sc.touched[:0], sc.seed...)
	defer func() {
		clearAcc(acc, touched)
		sc.touched = touched
	}()

	// rest bounds what the terms not read yet can add to a tool: the sum of their
	// weights times their highest impact.
	var rest float64
	for _, qt := range terms {
		rest += qt.limit(ix)
	}
	var best float32 // highest score so far: the k-th cannot be above it
	for _, d := range touched {
		best = max(best, acc[d])
	}
	var cands []DocID
	var theta float32
	attempts := 0
	next := len(terms)
	for i, qt := range terms {
		if err := ctx.Err(); err != nil {
			return err
		}
		w := float32(qt.bound())
		for _, im := range ix.lists[qt.id] {
			v := acc[im.doc]
			if v == 0 {
				touched = append(touched, im.doc)
			}
			v += gain(w, im.v)
			acc[im.doc] = v
			if v > best {
				best = v
			}
		}
		rest -= qt.limit(ix)
		if i == len(terms)-1 || float32(rest) >= best || attempts == 4 {
			continue
		}
		// Worth checking: the k-th best allowed score, against the bound of the rest.
		attempts++
		theta = b.kth(req, s, acc, touched, &sc.top)
		if float64(theta)*(1-slack) > rest*(1+slack) {
			next = i + 1
			break
		}
	}
	if next < len(terms) {
		// Candidates: the tools that could still reach theta.
		cands = sc.cands[:0]
		for _, d := range touched {
			if float64(acc[d])+rest*(1+slack) >= float64(theta)*(1-slack) {
				cands = append(cands, d)
			}
		}
		for _, qt := range terms[next:] {
			w := float32(qt.bound())
			list := ix.lists[qt.id]
			if len(cands)*bits.Len(uint(len(list))) < len(list) {
				// Few candidates, long list: look each one up.
				for _, d := range cands {
					if im, ok := findImpact(list, d); ok {
						acc[d] += gain(w, im.v)
					}
				}
			} else {
				// Scan, adding only to tools already matched: no other can reach the top.
				for _, im := range list {
					if v := acc[im.doc]; v != 0 {
						acc[im.doc] = v + gain(w, im.v)
					}
				}
			}
			rest -= qt.limit(ix)
			kept := cands[:0]
			for _, d := range cands {
				if float64(acc[d])+rest*(1+slack) >= float64(theta)*(1-slack) {
					kept = append(kept, d)
				}
			}
			cands = kept
		}
		sc.cands = cands
	} else {
		cands = touched
	}

	sc.top.reset(req.Limit)
	for _, d := range cands {
		v := float64(acc[d])
		if sc.top.wouldKeep(v) && req.Allowed(d) {
			sc.top.push(ranked{score: v, key: s.seqs[d], id: d})
		}
	}
	return nil
}

// slack covers float32 rounding in the comparisons that end scanning early, so that they
// never drop a tool exact arithmetic would keep.
const slack = 1e-5

// bound is the term's weight in the raw score: qtf·idf·(1, or the phrase weight). No
// tool gets more than that from the term; the score is normalised by the sum of the
// bounds.
func (qt queryTerm) bound() float64 { return float64(qt.qtf) * qt.idf * qt.weight }

// limit is the most the term adds to any tool of ix: its bound times its highest
// impact, a tighter bound to stop scanning by.
func (qt queryTerm) limit(ix *impactIndex) float64 {
	return float64(float32(qt.bound())) * float64(ix.max[qt.id])
}

// findIn binary-searches a posting list (sorted by doc id) for id.
func findIn(pl []posting, id DocID) (posting, bool) {
	i, ok := slices.BinarySearchFunc(pl, id, func(p posting, id DocID) int { return cmp.Compare(p.doc, id) })
	if !ok {
		return posting{}, false
	}
	return pl[i], true
}

// findImpact binary-searches an impact list (sorted by doc id) for id.
func findImpact(list []impact, id DocID) (impact, bool) {
	i, ok := slices.BinarySearchFunc(list, id, func(im impact, id DocID) int { return cmp.Compare(im.doc, id) })
	if !ok {
		return impact{}, false
	}
	return list[i], true
}

// weightedTF is the field-weighted, length-normalised term frequency of a posting.
func weightedTF(pst posting, n *normTable) float32 {
	return float32(pst.tf[0])*n[0][pst.ql[0]] + float32(pst.tf[1])*n[1][pst.ql[1]] +
		float32(pst.tf[2])*n[2][pst.ql[2]] + float32(pst.tf[3])*n[3][pst.ql[3]] +
		float32(pst.tf[4])*n[4][pst.ql[4]] + float32(pst.tf[5])*n[5][pst.ql[5]]
}

// kth returns the k-th best score among the allowed touched tools, 0 when fewer than k.
func (b BM25) kth(req *Request, s *Snapshot, acc []float32, touched []DocID, top *topK) float32 {
	top.reset(req.Limit)
	for _, d := range touched {
		v := float64(acc[d])
		if top.wouldKeep(v) && req.Allowed(d) {
			top.push(ranked{score: v, key: s.seqs[d], id: d})
		}
	}
	if len(top.heap) < req.Limit {
		return 0
	}
	return float32(top.heap[0].score)
}

func clearAcc(acc []float32, touched []DocID) {
	for _, d := range touched {
		acc[d] = 0
	}
}

// BM25Details is the provenance of a BM25 score.
type BM25Details struct {
	// Raw is the unnormalised BM25F score; Max its upper bound for this query; the score
	// is Raw/Max.
	Raw float64 `json:"raw"`
	Max float64 `json:"max"`
	// Terms lists the query terms the tool matched, largest contribution first.
	Terms []TermMatch `json:"terms"`
	// Unknown lists the query terms no tool of the catalog contains.
	Unknown []string `json:"unknown,omitempty"`
	// Sentence is the tool's share of the information of the request's sentence it
	// matches best (0..1), for a request of several sentences: the score is then
	// (Raw/Max + Params.Sentence·Sentence)/(1 + Params.Sentence).
	Sentence float64 `json:"sentence,omitempty"`
}

// TermMatch is one query term's part of a BM25 score.
type TermMatch struct {
	Term string  `json:"term"`
	IDF  float64 `json:"idf"`
	// Score is the term's contribution to Raw, split over Fields in proportion to each
	// field's share of the weighted term frequency.
	Score  float64      `json:"score"`
	Fields []FieldMatch `json:"fields"`
}

// FieldMatch is a term's occurrences in one field.
type FieldMatch struct {
	Field string  `json:"field"`
	TF    int     `json:"tf"`
	Score float64 `json:"score"`
}

// termHit is one query term matched by a tool being explained.
type termHit struct {
	term    int // index in the query's terms
	tfs     [numFields]uint8
	contrib float64
	tf      float64 // weighted term frequency
}

// explainWalk sets how explain finds a tool's matches: by walking the tool's terms when
// they are at most explainWalk times the query's (a probe each), else by a binary
// search per query term in its posting list; so that explaining costs what the
// cheaper of the two costs, and a tool with much text cannot make a pick slow.
const explainWalk = 16

// explain recomputes the score of one tool term by term, for the reason and, with
// debug, the provenance. Without debug it allocates only the reason.
func explain(s *Snapshot, ix *impactIndex, terms []queryTerm, set *termSet, id DocID, maxRaw float64,
	debug bool, sc *scratch) (string, *BM25Details) {
	p, norms := ix.params, ix.norms
	d := s.docs[id]
	hits := sc.hits[:0]
	match := func(i int, tfs [numFields]uint8) {
		var tf float64
		for f := range numFields {
			tf += float64(tfs[f]) * float64(norms[f][d.ql[f]])
		}
		if tf > 0 {
			hits = append(hits, termHit{term: i, tfs: tfs, tf: tf, contrib: terms[i].bound() * tf / (p.K1 + tf)})
		}
	}
	if len(d.terms) <= explainWalk*len(terms) {
		for j, t := range d.terms {
			if i, ok := set.find(t); ok {
				match(i, d.tfs[j])
			}
		}
	} else {
		for i, qt := range terms {
			if pst, ok := findIn(s.postings[qt.id], id); ok {
				match(i, pst.tf)
			}
		}
	}
	sc.hits = hits
	// Largest contribution first, ties in query order. The reason names the first
	// reasonTerms only: without debug, selecting them costs less than sorting a long
	// request's matches.
	if debug || len(hits) <= 2*reasonTerms {
		slices.SortFunc(hits, func(a, b termHit) int {
			if a.before(b) {
				return -1
			}
			if b.before(a) {
				return 1
			}
			return 0
		})
	} else {
		for i := range reasonTerms {
			m := i
			for j := i + 1; j < len(hits); j++ {
				if hits[j].before(hits[m]) {
					m = j
				}
			}
			hits[i], hits[m] = hits[m], hits[i]
		}
	}
	reason := explainReason(terms, hits)
	if !debug {
		return reason, nil
	}
	ex := &BM25Details{Max: maxRaw, Terms: make([]TermMatch, 0, len(hits))}
	for _, h := range hits {
		qt, tfs := terms[h.term], &h.tfs
		tm := TermMatch{Term: qt.text, IDF: qt.idf, Score: h.contrib}
		for f := range numFields {
			if tfs[f] > 0 {
				part := float64(tfs[f]) * float64(norms[f][d.ql[f]])
				tm.Fields = append(tm.Fields, FieldMatch{Field: Field(f).String(), TF: int(tfs[f]), Score: h.contrib * part / h.tf})
			}
		}
		ex.Raw += h.contrib
		ex.Terms = append(ex.Terms, tm)
	}
	return reason, ex
}

// reasonTerms is how many of a tool's matches its reason names, the strongest.
const reasonTerms = 5

// before orders matches: larger contribution first, ties in query order.
func (h termHit) before(o termHit) bool {
	if h.contrib != o.contrib {
		return h.contrib > o.contrib
	}
	return h.term < o.term
}

// explainReason renders the strongest matches in a line: `matched "weather" in name,
// description; "citi" in param_names`.
func explainReason(terms []queryTerm, hits []termHit) string {
	if len(hits) == 0 {
		return "no query term matched"
	}
	b := make([]byte, 0, 128)
	b = append(b, "matched "...)
	for i, h := range hits {
		if i == reasonTerms {
			b = append(b, " and "...)
			b = strconv.AppendInt(b, int64(len(hits)-reasonTerms), 10)
			b = append(b, " more"...)
			break
		}
		if i > 0 {
			b = append(b, "; "...)
		}
		b = strconv.AppendQuote(b, terms[h.term].text)
		b = append(b, " in "...)
		first := true
		for f := range numFields {
			if h.tfs[f] > 0 {
				if !first {
					b = append(b, ", "...)
				}
				first = false
				b = append(b, fieldNames[f]...)
			}
		}
	}
	return string(b)
}
