package pick

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"sort"
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
}

// DefaultBM25Params are the defaults, with two free parameters, K1 and Phrase, chosen
// by tuning on the public ToolLens and Seal-Tools queries (internal/toolret's Grid);
// k-fold cross-validation (`picker eval -folds 5`) chooses the same pair on every fold
// and beats plain BM25 on the held-out queries of both benchmarks. The rest are fixed by
// reasoning rather than tuned, so that they cannot fit the public queries:
//   - Weight 1 in every field: a word counts the same wherever it occurs; what the name
//     says is stressed by its phrases instead.
//   - B: the textbook 0.75 for the fields written as text or labels (name, description,
//     tags, returns); 0 for the parameter fields, which are lists of independent items: a
//     tool with many parameters should not have each of them count less.
//   - K1 1.8 (tuned over 1.2–3): BM25F saturates the weighted sum over all fields once,
//     so K1 is above the single-field textbook 1.2.
//   - Phrase 2 (tuned over 0–3): two query words in a row found in a row in the name or
//     description count twice a word. This is most of the gain on Seal-Tools, whose
//     requests name what a tool does in the words of its camelCase name.
func DefaultBM25Params() BM25Params {
	p := BM25Params{K1: 1.8, Phrase: 2}
	for f := range numFields {
		p.B[f], p.Weight[f] = 0.75, 1
	}
	p.B[FieldParamNames], p.B[FieldParamText] = 0, 0
	return p
}

func (p BM25Params) validate() error {
	if !(p.Phrase >= 0) {
		return fmt.Errorf("%w: BM25 phrase weight must be 0 or more, got %v", ErrInvalidOption, p.Phrase)
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
// matches. It lies in 0..1, does not depend on the other tools' scores (a weak best
// match stays weak), and MinScore keeps its meaning across requests. Query words the
// catalog has never seen (numbers, names) cannot match any tool and do not count.
//
// Only the posting lists of the query's terms are read; per-tool norms are precomputed
// in the snapshot, and scores accumulate in a pooled dense array, so a pick costs time in
// proportion to the postings it reads, not to the catalog.
type BM25 struct {
	// Params overrides the catalog's parameters when set (K1 > 0).
	Params BM25Params

	exhaustive bool // score every posting; tests compare it with early termination
}

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
	pair    []byte
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// analyseQuery returns the distinct query terms known to s, with their counts and idf,
// in order of first appearance, and the words the index does not know. With a phrase
// weight, each pair of adjacent words that the index holds as a phrase is a term too.
func analyseQuery(s *Snapshot, text string, phraseWeight float64, sc *scratch) (terms []queryTerm, unknown []string) {
	terms = sc.terms[:0]
	n := float64(s.live)
	add := func(t string, id uint32, weight float64) {
		for i := range terms { // by id: a few dozen integer compares
			if terms[i].id == id {
				terms[i].qtf++
				return
			}
		}
		if len(terms) >= maxQueryTerms {
			return
		}
		df := float64(s.df[id])
		terms = append(terms, queryTerm{text: t, id: id, qtf: 1, idf: math.Log(1 + (n-df+0.5)/(df+0.5)), weight: weight})
	}
	prev := ""
	splitWords(text, func(w []byte) {
		t, ok := analyseWord(w)
		if !ok {
			return
		}
		if phraseWeight > 0 && prev != "" {
			sc.pair = append(append(append(sc.pair[:0], prev...), ' '), t...)
			if id, ok := s.dict.getBytes(sc.pair); ok && s.df[id] > 0 {
				add(phrase(prev, t), id, phraseWeight)
			}
		}
		prev = t
		id, ok := s.dict.get(t)
		if !ok || s.df[id] == 0 {
			if len(unknown) < maxQueryTerms {
				unknown = append(unknown, t)
			}
			return
		}
		add(t, id, 1)
	})
	return terms, unknown
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
// Terms are read in decreasing order of their upper bound qtf·idf (a term adds less
// than that to any tool). Once the bounds of the terms left sum to less than the k-th
// best score so far, no tool that has not matched yet can reach the top k: the
// remaining, long posting lists of common words then only add to the tools already
// matched (by a binary search per tool when they are few), and tools drop out as soon as
// they cannot reach the k-th score. The result is exactly that of scoring
// every posting of the terms read (term-at-a-time with early termination, after Moffat
// and Zobel); which terms are read is bounded by postingBudget.
func (b BM25) Score(ctx context.Context, req *Request) ([]Hit, error) {
	s := req.Snapshot
	p := s.params
	if b.Params.K1 > 0 {
		if err := b.Params.validate(); err != nil {
			return nil, err
		}
		p = b.Params
	}
	norms := s.normsFor(p)
	k1 := float32(p.K1)

	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	var unknown []string
	sc.terms, unknown = analyseQuery(s, req.Text, p.Phrase, sc)
	terms := sc.terms
	// Highest bound first; ties in query order (insertion sort: a few dozen terms).
	for i := 1; i < len(terms); i++ {
		for j := i; j > 0 && terms[j].bound() > terms[j-1].bound(); j-- {
			terms[j], terms[j-1] = terms[j-1], terms[j]
		}
	}
	var maxRaw float64
	for _, qt := range terms {
		maxRaw += float64(float32(qt.bound()))
	}
	// Bounded work: past a budget of postings, the commonest terms are not read.
	budget := max(postingBudget*len(s.docs), minPostingBudget)
	for i, qt := range terms {
		budget -= len(s.postings[qt.id])
		if budget < 0 && i > 0 {
			terms = terms[:i]
			break
		}
	}
	if cap(sc.acc) < len(s.docs) {
		sc.acc = make([]float32, len(s.docs))
	}
	acc := sc.acc[:len(s.docs)]
	touched := sc.touched[:0]
	defer func() {
		clearAcc(acc, touched)
		sc.touched = touched
	}()

	// rest is the sum of the bounds of the terms not read yet.
	rest := maxRaw
	var best float32 // highest score so far: the k-th cannot be above it
	var cands []DocID
	var theta float32
	attempts := 0
	next := len(terms)
	for i, qt := range terms {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		w := float32(qt.bound())
		for _, pst := range s.postings[qt.id] {
			d := pst.doc
			if s.dead[d>>6]&(1<<(d&63)) != 0 {
				continue
			}
			tf := weightedTF(pst, norms)
			if tf == 0 {
				continue
			}
			v := acc[d]
			if v == 0 {
				touched = append(touched, d)
			}
			v += w * tf / (k1 + tf)
			acc[d] = v
			best = max(best, v)
		}
		rest -= float64(w)
		if b.exhaustive || i == len(terms)-1 || float32(rest) >= best || attempts == 4 {
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
			pl := s.postings[qt.id]
			if len(cands)*bits.Len(uint(len(pl))) < len(pl) {
				// Few candidates, long list: look each one up.
				for _, d := range cands {
					if pst, ok := findIn(pl, d); ok {
						if tf := weightedTF(pst, norms); tf > 0 {
							acc[d] += w * tf / (k1 + tf)
						}
					}
				}
			} else {
				// Scan, adding only to tools already matched: no other can reach the top.
				for _, pst := range pl {
					d := pst.doc
					if acc[d] == 0 || s.dead[d>>6]&(1<<(d&63)) != 0 {
						continue
					}
					if tf := weightedTF(pst, norms); tf > 0 {
						acc[d] += w * tf / (k1 + tf)
					}
				}
			}
			rest -= float64(w)
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
			sc.top.push(ranked{score: v, key: s.docs[d].seq, id: d})
		}
	}
	sc.ranked = sc.top.sorted(sc.ranked[:0])
	hits := make([]Hit, len(sc.ranked))
	for i, r := range sc.ranked {
		hits[i] = Hit{ID: r.id, Score: r.score / maxRaw}
		ex := explain(s, p, norms, terms, r.id, maxRaw)
		hits[i].Reason = ex.reason()
		if req.Debug {
			ex.Unknown = unknown
			hits[i].Details = ex
		}
	}
	return hits, nil
}

// slack covers float32 rounding in the comparisons that end scanning early, so that they
// never drop a tool exact arithmetic would keep.
const slack = 1e-5

// bound is the most the term can add to a tool's raw score.
func (qt queryTerm) bound() float64 { return float64(qt.qtf) * qt.idf * qt.weight }

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
			top.push(ranked{score: v, key: s.docs[d].seq, id: d})
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

// explain recomputes the score of one tool term by term (a binary search per term in
// its posting list), for the reason and the provenance.
func explain(s *Snapshot, p BM25Params, norms *normTable, terms []queryTerm, id DocID, maxRaw float64) *BM25Details {
	ex := &BM25Details{Max: maxRaw}
	for _, qt := range terms {
		pst, ok := s.findPosting(qt.id, id)
		if !ok {
			continue
		}
		var parts [numFields]float64
		var tf float64
		for f := range numFields {
			parts[f] = float64(pst.tf[f]) * float64(norms[f][pst.ql[f]])
			tf += parts[f]
		}
		if tf == 0 {
			continue
		}
		contrib := qt.bound() * tf / (p.K1 + tf)
		m := TermMatch{Term: qt.text, IDF: qt.idf, Score: contrib}
		for f := range numFields {
			if pst.tf[f] > 0 {
				m.Fields = append(m.Fields, FieldMatch{Field: Field(f).String(), TF: int(pst.tf[f]), Score: contrib * parts[f] / tf})
			}
		}
		ex.Raw += contrib
		ex.Terms = append(ex.Terms, m)
	}
	sort.SliceStable(ex.Terms, func(i, j int) bool { return ex.Terms[i].Score > ex.Terms[j].Score })
	return ex
}

// reason renders the strongest matches in a line: `matched "weather" in name,
// description; "citi" in param_names`.
func (ex *BM25Details) reason() string {
	if len(ex.Terms) == 0 {
		return "no query term matched"
	}
	b := make([]byte, 0, 128)
	b = append(b, "matched "...)
	for i, m := range ex.Terms {
		if i == 5 {
			b = append(b, " and "...)
			b = strconv.AppendInt(b, int64(len(ex.Terms)-5), 10)
			b = append(b, " more"...)
			break
		}
		if i > 0 {
			b = append(b, "; "...)
		}
		b = strconv.AppendQuote(b, m.Term)
		b = append(b, " in "...)
		for j, f := range m.Fields {
			if j > 0 {
				b = append(b, ", "...)
			}
			b = append(b, f.Field...)
		}
	}
	return string(b)
}
