package pick

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Scorer returns the scorer that ranks for tenant with what l learned: BM25 over the
// tools' own text (the catalog's parameters) fused with BM25 over their learned fields,
// and the co-usage prior. Picks of a tenant that has learned nothing (or when the
// request matches no learned text) rank as [BM25] does. Without Share, only tenant's
// own usage is read, so neither its scores nor its provenance can show another
// tenant's requests. See "Learning from usage" in the package documentation.
func (l *Learned) Scorer(tenant string) Scorer { return &learnedScorer{l: l, tenant: tenant} }

// LearnedScorerName is the name of the learned scorer in provenance.
const LearnedScorerName = "bm25+usage"

type learnedScorer struct {
	l      *Learned
	tenant string
	cold   BM25
	// view and tuning, when view is set, replace the tenant's: self-tuning scores
	// candidate settings with an index of part of the log.
	view   *learnedView
	tuning Tuning
}

func (*learnedScorer) Name() string { return LearnedScorerName }

// LearnedDetails is the provenance of a learned score (Debug). It names the caller's
// own query words that matched the learned field, and counts; it never holds the text
// of a learned request.
type LearnedDetails struct {
	// Cold is the score from the tool's own text, Learned from its learned field (the
	// share of the request's information found there, to the Power), both 0..1; the
	// score is (Cold + Weight·Learned)/(1 + Weight), plus CoUsage. Weight and Power are
	// the tenant's settings (see [Tuning]).
	Cold    float64 `json:"cold"`
	Learned float64 `json:"learned"`
	Weight  float64 `json:"weight"`
	Power   int     `json:"power"`
	// CoUsage is what the tool gained for being used with With, the best tool.
	CoUsage float64 `json:"coUsage,omitempty"`
	With    string  `json:"with,omitempty"`
	// Requests is how many learned requests the tool's field holds; Terms the query
	// terms found in them.
	Requests int      `json:"requests,omitempty"`
	Terms    []string `json:"terms,omitempty"`
	// BM25 is the cold score's own provenance.
	BM25 *BM25Details `json:"bm25,omitempty"`
}

// Learned-field BM25 parameters: the textbook ones, the field being running text.
const (
	learnedK1 = 1.2
	learnedB  = 0.75
	// maxLearnedQueryTerms bounds the query terms looked up in a learned field.
	maxLearnedQueryTerms = 64
	// learnedBudgetDiv sets the postings a pick reads in the learned fields: one per
	// learnedBudgetDiv learned tools (at least minPostingBudget), the rarest terms
	// first. Below 4096 learned tools (both benchmarks) every posting is read.
	learnedBudgetDiv = 8
	minLearnedBudget = 1024
)

type learnedQueryTerm struct {
	text string
	hash uint32
	idf  float64
	list []learnedPosting
}

type learnedScratch struct {
	words   []queryWord
	keys    []uint64
	sorted  []learnedQueryTerm
	acc     []float32
	touched []uint32
	terms   []learnedQueryTerm
	ranked  []ranked
	seen    hashSet
	bonus   []coBonus
}

// coBonus is what a partner of the best tool gains for being used with it.
type coBonus struct {
	id   DocID
	gain float64
}

// hashSet finds a learned query term by its hash: an open-addressing table of indexes
// into the query's terms, sized for maxLearnedQueryTerms, cleared for each pick.
type hashSet [2 * maxLearnedQueryTerms]uint8 // index+1 into terms; 0 is empty

// has reports whether h is among terms, the terms inserted.
func (hs *hashSet) has(h uint32, terms []learnedQueryTerm) bool {
	const mask = len(hs) - 1
	for i := hashID(h) & mask; hs[i] != 0; i = (i + 1) & mask {
		if terms[hs[i]-1].hash == h {
			return true
		}
	}
	return false
}

// insert adds h, terms[at-1]'s hash.
func (hs *hashSet) insert(h uint32, at int) {
	const mask = len(hs) - 1
	i := hashID(h) & mask
	for hs[i] != 0 {
		i = (i + 1) & mask
	}
	hs[i] = uint8(at)
}

var learnedPool = sync.Pool{New: func() any { return new(learnedScratch) }}

// Score ranks req's tools by fused cold and learned scores; see [Learned.Scorer].
//
// The learned fields are scored first; each matched tool's learned part, on the scale
// of the cold raw score, is added to its accumulator before the cold BM25 reads its
// postings (fusion.seed), so that one pass over the catalog's accumulators ranks by the
// fused score, exactly (block by block, as a cold pick of a long request). Co-usage
// then lifts the partners of the best tool, each scored on its own (coUsage), and each
// hit says why it ranks (ls.hits).
func (ls *learnedScorer) Score(ctx context.Context, req *Request) ([]Hit, error) {
	v, tn := ls.view, ls.tuning
	if v == nil {
		v, tn = ls.l.viewFor(ls.tenant)
	}
	if v == nil || len(v.names) == 0 {
		return ls.cold.Score(ctx, req)
	}
	bd := v.bind(req.Snapshot)
	sc := learnedPool.Get().(*learnedScratch)
	defer learnedPool.Put(sc)
	// The words are analysed once, for the learned fields and the tools' own text.
	sc.words = analyseWords(req.Snapshot, req.Text, sc.words)
	f := &fusion{sc: sc, ids: bd.ids, qmax: ls.scoreField(v, bd, sc.words, sc), w: tn.Weight, squared: tn.Power == 2}
	defer sc.reset()
	var pre func([]float32, float64, []DocID) []DocID
	if len(sc.touched) > 0 {
		pre = f.seed
	}
	r, err := ls.cold.rank(ctx, req, sc.words, pre)
	if err != nil {
		return nil, err
	}
	defer r.release()
	scale := r.norm
	if scale == 0 {
		scale = 1
	}
	ranks := sc.ranked[:0]
	for _, rk := range r.sc.ranked {
		rk.score = rk.score / scale / (1 + f.w)
		ranks = append(ranks, rk)
	}
	co := coUsage(v, bd, req, tn, ranks, sc.bonus[:0])
	if len(co.bonus) > 0 {
		ranks = co.lift(ranks, req, r, f, bd)
	}
	sc.ranked, sc.bonus = ranks, co.bonus
	return ls.hits(req, v, bd, r, f, tn, ranks, co), nil
}

// reset clears what a pick left in sc: the accumulators it touched, and the learned
// lists its terms hold (the pool must not keep a view alive).
func (sc *learnedScratch) reset() {
	for _, i := range sc.touched {
		sc.acc[i] = 0
	}
	clear(sc.terms)
	clear(sc.sorted)
}

// fusion fuses a tool's learned score with its cold one: (cold + w·learned)/(1 + w),
// learned being its learned field's raw score (sc.acc, from scoreField) over qmax, to
// the Power.
type fusion struct {
	sc      *learnedScratch
	ids     []DocID // the binding's: each learned tool's id in the snapshot
	qmax    float64 // the raw learned score's upper bound (scoreField)
	w       float64 // Tuning.Weight
	squared bool    // Tuning.Power is 2
}

// learned is the learned score of learned tool idx, 0..1 (0 for ^0: none).
func (f *fusion) learned(idx uint32) float64 {
	if f.qmax == 0 || idx == ^uint32(0) {
		return 0
	}
	// Squared: a request much like earlier ones (most of its information in a tool's
	// learned field) counts fully, a few shared common words hardly at all. Linear, the
	// loose matches cost Seal-Tools, whose requests rarely repeat, 14 points of held-out
	// nDCG@10; squared, it keeps its cold figure. Self-tuning chooses (Tuning.Power).
	x := float64(f.sc.acc[idx]) / f.qmax
	if f.squared {
		return x * x
	}
	return x
}

// seed adds w·learned·scale to the cold accumulator of every tool the learned fields
// matched, appending to seed the ones it starts (the cold rank's pre).
func (f *fusion) seed(acc []float32, scale float64, seed []DocID) []DocID {
	// w·learned·scale, learned being (acc/qmax)^Power.
	c := float32(f.w * scale / f.qmax)
	if f.squared {
		c = float32(f.w * scale / (f.qmax * f.qmax))
	}
	for _, idx := range f.sc.touched {
		if id := f.ids[idx]; id != noDoc {
			g := c * f.sc.acc[idx]
			if f.squared {
				g *= f.sc.acc[idx]
			}
			if g > 0 {
				if acc[id] == 0 { // else seeded already, by its best sentence
					seed = append(seed, id)
				}
				acc[id] += g
			}
		}
	}
	return seed
}

// coLift is what co-usage adds to a pick: the partners of the best tool (with) and
// what each gains.
type coLift struct {
	with  string
	bonus []coBonus // at most liftPartners, distinct tools
}

// coUsage finds the tools used with the best of ranks that req allows, each gaining
// tn.CoUsage of its share of the best one's uses times the best one's score; bonus is
// the slice to fill.
func coUsage(v *learnedView, bd *binding, req *Request, tn Tuning, ranks []ranked, bonus []coBonus) coLift {
	co := coLift{bonus: bonus}
	if len(ranks) == 0 || tn.CoUsage <= 0 {
		return co
	}
	best := ranks[0]
	bi := bd.indexOf(best.id)
	if bi == ^uint32(0) {
		return co
	}
	for _, p := range v.partners[bi] {
		id := bd.ids[p.tool]
		if id == noDoc || id == best.id || !req.Allowed(id) {
			continue
		}
		co.with = req.Snapshot.docs[best.id].def.Name
		co.bonus = append(co.bonus, coBonus{id: id, gain: tn.CoUsage * float64(p.share) * best.score})
	}
	return co
}

// lift adds each partner's gain to its fused score (at most 1), scoring a partner the
// ranking left out on its own, then orders ranks again and cuts them to req.Limit.
func (co coLift) lift(ranks []ranked, req *Request, r *coldRank, f *fusion, bd *binding) []ranked {
	n := len(ranks)
	for _, cb := range co.bonus {
		id, b := cb.id, cb.gain
		if i := slices.IndexFunc(ranks[:n], func(rk ranked) bool { return rk.id == id }); i >= 0 {
			ranks[i].score = min(ranks[i].score+b, 1)
			continue
		}
		fused := (r.score(id) + f.w*f.learned(bd.indexOf(id))) / (1 + f.w)
		ranks = append(ranks, ranked{score: min(fused+b, 1), key: req.Snapshot.seqs[id], id: id})
	}
	slices.SortFunc(ranks, func(a, b ranked) int {
		if worse(a, b) {
			return 1
		}
		if worse(b, a) {
			return -1
		}
		return 0
	})
	return ranks[:min(len(ranks), req.Limit)]
}

// hits turns ranks into hits, each with its reason (the cold one, the learned terms it
// matched, the tool it was used with) and, for req.Debug, its [LearnedDetails].
func (ls *learnedScorer) hits(req *Request, v *learnedView, bd *binding, r *coldRank, f *fusion, tn Tuning, ranks []ranked, co coLift) []Hit {
	hits := make([]Hit, 0, len(ranks))
	for _, rk := range ranks {
		idx := bd.indexOf(rk.id)
		reason, ex := r.explain(rk.id, req.Debug)
		lr := f.learned(idx)
		var matched []string
		if lr > 0 {
			matched = f.sc.matched(idx)
			reason = learnedReason(reason, matched, int(v.nreq[idx]))
		}
		var gain float64
		if i := slices.IndexFunc(co.bonus, func(cb coBonus) bool { return cb.id == rk.id }); i >= 0 {
			gain = co.bonus[i].gain
			reason += "; used with " + co.with
		}
		h := Hit{ID: rk.id, Score: rk.score, Reason: reason}
		if req.Debug {
			d := &LearnedDetails{Cold: r.score(rk.id), Learned: lr, Weight: f.w, Power: tn.Power, CoUsage: gain, Terms: matched, BM25: ex}
			if gain > 0 {
				d.With = co.with
			}
			if idx != ^uint32(0) {
				d.Requests = int(v.nreq[idx])
			}
			h.Details = d
		}
		hits = append(hits, h)
	}
	return hits
}

// scoreField scores the learned fields of v against text into sc.acc (sc.touched the
// tools matched) and returns the raw score's upper bound: the sum of the idf of every
// query term, those found in no learned field included (at their highest idf), so that
// a tool matching one word of a long request by usage scores a small share of it.
//
// As for the cold score, the terms are read rarest first and past a budget of postings
// (see learnedBudgetDiv) the commoner ones are not read:
// they still count in the bound.
func (ls *learnedScorer) scoreField(v *learnedView, bd *binding, words []queryWord, sc *learnedScratch) float64 {
	if cap(sc.acc) < len(v.names) {
		sc.acc = make([]float32, len(v.names))
	}
	sc.acc = sc.acc[:len(v.names)]
	sc.touched = sc.touched[:0]
	terms := sc.terms[:0]
	seen := &sc.seen
	clear(seen[:])
	for _, w := range words {
		if len(terms) >= maxLearnedQueryTerms {
			break
		}
		h := termHash(w.text)
		if seen.has(h, terms) {
			continue
		}
		qt := learnedQueryTerm{text: w.text, hash: h, idf: bd.idfUnknown}
		if t, ok := v.terms[h]; ok {
			qt.list, qt.idf = v.lists[t], bd.idf[t]
		}
		terms = append(terms, qt)
		seen.insert(h, len(terms))
	}
	var qmax float64
	for _, qt := range terms {
		qmax += qt.idf
	}
	// Rarest first (ties in query order), sorting packed integer keys (list length, then
	// query position) and moving the terms once.
	keys := sc.keys[:0]
	for i, qt := range terms {
		keys = append(keys, uint64(len(qt.list))<<32|uint64(i))
	}
	slices.Sort(keys)
	sorted := sc.sorted[:0]
	for _, k := range keys {
		sorted = append(sorted, terms[uint32(k)])
	}
	sc.keys, sc.sorted, terms = keys, terms, sorted
	budget := max(len(v.names)/learnedBudgetDiv, minLearnedBudget)
	for i, qt := range terms {
		if budget -= len(qt.list); budget < 0 && i > 0 {
			clear(terms[i:])
			terms = terms[:i]
			break
		}
	}
	sc.terms = terms
	acc, touched := sc.acc, sc.touched
	for _, qt := range terms {
		idf := float32(qt.idf)
		for _, p := range qt.list {
			if acc[p.tool] == 0 {
				touched = append(touched, p.tool)
			}
			acc[p.tool] += idf * p.impact
		}
	}
	sc.touched = touched
	return qmax
}

// matched lists the query terms found in learned tool idx's field.
func (sc *learnedScratch) matched(idx uint32) []string {
	var out []string
	for _, qt := range sc.terms {
		if _, ok := slices.BinarySearchFunc(qt.list, idx, func(p learnedPosting, t uint32) int {
			return int(p.tool) - int(t)
		}); ok {
			out = append(out, qt.text)
		}
	}
	return out
}

// indexOf is the learned index of the binding's tool id, or ^0 when it has learned
// nothing (or learned it for another definition).
func (b *binding) indexOf(id DocID) uint32 { return b.rev[id] }

func learnedReason(cold string, matched []string, requests int) string {
	var b strings.Builder
	if cold != "no query term matched" {
		b.WriteString(cold)
		b.WriteString("; ")
	}
	b.WriteString("learned ")
	for i, t := range matched {
		if i == 5 {
			b.WriteString(" and more")
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Quote(t))
	}
	b.WriteString(" from ")
	b.WriteString(strconv.Itoa(requests))
	b.WriteString(" requests")
	return b.String()
}
