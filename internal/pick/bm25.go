package pick

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"sync"
)

// BM25Params are the parameters of the BM25F scorer. Arrays are indexed by [Field].
type BM25Params struct {
	// K1 is the term-frequency saturation: how quickly repeats of a term stop adding.
	K1 float64
	// B is the length normalisation per field, 0 (none) to 1 (full).
	B [numFields]float64
	// Weight is how much a term occurrence in each field counts, before saturation.
	Weight [numFields]float64
}

// DefaultBM25Params are the parameters tuned on the ToolLens and Seal-Tools benchmarks
// (internal/toolret), kept to round, explainable values:
//   - B: the textbook 0.75 for the short, label-like fields (name, tags, returns); 0.4 for
//     descriptions, whose length says less about focus; 0 for the parameter fields, which
//     are lists of independent items: a tool with many parameters should not have each
//     of them count less.
//   - Weight: a name occurrence counts 1.5 times any other.
//   - K1 2.4: BM25F saturates the weighted sum over all six fields once, so K1 is larger
//     than the single-field textbook 1.2 (it equals 1.2 per two plain occurrences).
//
// Coordinate search over K1, B and Weight found nothing better than these by more than
// 0.3 points of nDCG@10 on either benchmark.
func DefaultBM25Params() BM25Params {
	p := BM25Params{K1: 2.4}
	p.B[FieldName], p.Weight[FieldName] = 0.75, 1.5
	p.B[FieldDescription], p.Weight[FieldDescription] = 0.4, 1
	p.B[FieldTags], p.Weight[FieldTags] = 0.75, 1
	p.B[FieldParamNames], p.Weight[FieldParamNames] = 0, 1
	p.B[FieldParamText], p.Weight[FieldParamText] = 0, 1
	p.B[FieldReturns], p.Weight[FieldReturns] = 0.75, 1
	return p
}

func (p BM25Params) validate() error {
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
}

// Name returns "bm25".
func (BM25) Name() string { return "bm25" }

// queryTerm is an analysed query term found in the index.
type queryTerm struct {
	text string
	id   uint32
	qtf  int
	idf  float64
}

// scratch holds the buffers of one pick, reused across picks.
type scratch struct {
	acc     []float32
	touched []DocID
	top     topK
	ranked  []ranked
	terms   []queryTerm
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// analyseQuery returns the distinct query terms known to s, with their counts and idf,
// in order of first appearance, and the words the index does not know.
func analyseQuery(s *Snapshot, text string, dst []queryTerm) (terms []queryTerm, unknown []string) {
	terms = dst[:0]
	splitWords(text, func(w []byte) {
		t, ok := analyseWord(w)
		if !ok {
			return
		}
		for i := range terms {
			if terms[i].text == t {
				terms[i].qtf++
				return
			}
		}
		id, ok := s.dict.get(t)
		if !ok || s.df[id] == 0 {
			if len(unknown) < maxQueryTerms {
				unknown = append(unknown, t)
			}
			return
		}
		if len(terms) >= maxQueryTerms {
			return
		}
		n, df := float64(s.live), float64(s.df[id])
		terms = append(terms, queryTerm{text: t, id: id, qtf: 1, idf: math.Log(1 + (n-df+0.5)/(df+0.5))})
	})
	return terms, unknown
}

// maxQueryTerms bounds the distinct terms of a query, and with it the work of a pick.
const maxQueryTerms = 256

// Score ranks the allowed tools by BM25F.
func (b BM25) Score(ctx context.Context, req *Request) ([]Hit, error) {
	s := req.Snapshot
	p := s.params
	if b.Params.K1 > 0 {
		if err := b.Params.validate(); err != nil {
			return nil, err
		}
		p = b.Params
	}
	coef := s.coefFor(p)
	k1 := float32(p.K1)

	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	var unknown []string
	sc.terms, unknown = analyseQuery(s, req.Text, sc.terms)
	if cap(sc.acc) < len(s.docs) {
		sc.acc = make([]float32, len(s.docs))
	}
	acc := sc.acc[:len(s.docs)]
	touched := sc.touched[:0]
	var maxRaw float64
	for _, qt := range sc.terms {
		if err := ctx.Err(); err != nil {
			clearAcc(acc, touched)
			sc.touched = touched
			return nil, err
		}
		w := float32(float64(qt.qtf) * qt.idf)
		maxRaw += float64(w)
		for _, pst := range s.postings[qt.id] {
			d := pst.doc
			if s.dead[d>>6]&(1<<(d&63)) != 0 {
				continue
			}
			c := coef[int(d)*numFields : int(d)*numFields+numFields : int(d)*numFields+numFields]
			tf := float32(pst.tf[0])*c[0] + float32(pst.tf[1])*c[1] + float32(pst.tf[2])*c[2] +
				float32(pst.tf[3])*c[3] + float32(pst.tf[4])*c[4] + float32(pst.tf[5])*c[5]
			if tf == 0 {
				continue
			}
			if acc[d] == 0 {
				touched = append(touched, d)
			}
			acc[d] += w * tf / (k1 + tf)
		}
	}
	sc.top.reset(req.Limit)
	for _, d := range touched {
		v := float64(acc[d])
		if sc.top.wouldKeep(v) && req.Allowed(d) {
			sc.top.push(ranked{score: v, key: s.docs[d].seq, id: d})
		}
	}
	clearAcc(acc, touched)
	sc.touched = touched
	sc.ranked = sc.top.sorted(sc.ranked[:0])
	hits := make([]Hit, len(sc.ranked))
	for i, r := range sc.ranked {
		hits[i] = Hit{ID: r.id, Score: r.score / maxRaw}
		ex := explain(s, p, coef, sc.terms, r.id, maxRaw)
		hits[i].Reason = ex.reason()
		if req.Debug {
			ex.Unknown = unknown
			hits[i].Details = ex
		}
	}
	return hits, nil
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
func explain(s *Snapshot, p BM25Params, coef []float32, terms []queryTerm, id DocID, maxRaw float64) *BM25Details {
	ex := &BM25Details{Max: maxRaw}
	c := coef[int(id)*numFields : int(id)*numFields+numFields]
	for _, qt := range terms {
		pst, ok := s.findPosting(qt.id, id)
		if !ok {
			continue
		}
		var parts [numFields]float64
		var tf float64
		for f := range numFields {
			parts[f] = float64(pst.tf[f]) * float64(c[f])
			tf += parts[f]
		}
		if tf == 0 {
			continue
		}
		contrib := float64(qt.qtf) * qt.idf * tf / (p.K1 + tf)
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
