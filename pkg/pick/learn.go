package pick

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Usage is one record to learn from: a call of Tool, in run Run of a caller of Tenant,
// served the request Request and returned ok.
type Usage struct {
	Tenant  string
	Run     string // calls of the same run count as used together
	Tool    string
	Request string
	// Key is [LearnKey] of the definition the call ran with; empty when unknown.
	Key string
	At  time.Time
}

// LearnConfig bounds and weighs what a [Learned] keeps. The zero value takes the
// defaults beside each field.
type LearnConfig struct {
	// MaxRequests is how many distinct requests are kept per tool. Default 32.
	MaxRequests int
	// MaxTerms is how many distinct terms of a request are kept. Default 24.
	MaxTerms int
	// HalfLife is how fast a request's use decays: a request seen n times, last at t,
	// weighs n·2^(−(now−t)/HalfLife) when a full tool chooses which one to drop.
	// Default 14 days.
	HalfLife time.Duration
	// MaxPartners is how many co-used tools are kept per tool. Default 16.
	MaxPartners int
	// MaxRuns is how many recent runs are remembered to find the tools they used
	// together. Default 4096.
	MaxRuns int
	// Weight is how much the learned field counts beside the tool's own text (weight 1)
	// for a tenant whose usage has not chosen its own (see "Self-tuning" in the package
	// documentation), and for every tenant when Fixed. Default 1.
	Weight float64
	// CoUsage is how much the best tool lifts the tools used with it: a partner used in
	// share s of the best tool's runs gains CoUsage·s·score(best). Like Weight, the
	// setting of a tenant whose usage has not chosen its own. Default 0.1; negative
	// turns the lift off.
	CoUsage float64
	// Fixed turns self-tuning off: every tenant ranks with Weight and CoUsage.
	Fixed bool
	// TuneLog is how many recent runs (a request and the tools it used) are kept per
	// tenant for self-tuning. Default 2048.
	TuneLog int
	// MinHeldOut is the least number of held-out runs (the most recent fifth of the
	// log) that self-tuning chooses a tenant's settings on; a tenant with fewer keeps
	// Weight and CoUsage. Default 50.
	MinHeldOut int
	// TuneEvery is how often at most a tenant's settings are chosen again, once a
	// tenth of its log is new. Default 10 minutes.
	TuneEvery time.Duration
	// TuneGrid are the settings self-tuning chooses among. Default [DefaultTuneGrid].
	TuneGrid []Tuning
	// Share lets every tenant's usage shape every tenant's picks. Default off: a
	// tenant's usage shapes only its own picks.
	Share bool
	// RefreshEvery is how often at most a tenant's index is rebuilt for picks after
	// new usage: a pick that finds it older asks [Learned.Run] to rebuild it and reads
	// the index it has meanwhile (without Run, the pick rebuilds it itself). Default
	// 1s; negative: the pick itself rebuilds it, at every pick after new usage.
	RefreshEvery time.Duration
}

func (c LearnConfig) withDefaults() (LearnConfig, error) {
	if c.MaxRequests < 0 || c.MaxTerms < 0 || c.MaxPartners < 0 || c.MaxRuns < 0 || c.HalfLife < 0 ||
		c.TuneLog < 0 || c.MinHeldOut < 0 || c.TuneEvery < 0 || !(c.Weight >= 0) || c.CoUsage != c.CoUsage {
		return c, fmt.Errorf("%w: learn limits and weights must not be negative", ErrInvalidOption)
	}
	for _, t := range c.TuneGrid {
		if err := t.validate(); err != nil {
			return c, err
		}
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.MaxRequests, 32)
	def(&c.MaxTerms, 24)
	def(&c.MaxPartners, 16)
	def(&c.MaxRuns, 4096)
	def(&c.TuneLog, 2048)
	def(&c.MinHeldOut, 50)
	if c.TuneEvery == 0 {
		c.TuneEvery = 10 * time.Minute
	}
	if len(c.TuneGrid) == 0 {
		c.TuneGrid = DefaultTuneGrid()
	}
	if c.HalfLife == 0 {
		c.HalfLife = 14 * 24 * time.Hour
	}
	if c.Weight == 0 {
		c.Weight = 1
	}
	if c.CoUsage == 0 {
		c.CoUsage = 0.1
	}
	if c.RefreshEvery == 0 {
		c.RefreshEvery = time.Second
	}
	return c, nil
}

// LearnKey identifies what a tool's learned text was learned for: 128 bits of SHA-256, in hex, of
// its description, parameters and response schema. What was learned for a tool is kept
// while its key stays (a change of tags, roles, safety or version keeps it) and dropped
// when it changes: a tool that now does something else must not inherit the requests
// of what it did before.
func LearnKey(d tools.Definition) string {
	b, err := json.Marshal([]any{d.Description, d.Parameters, d.ResponseSchema})
	if err != nil {
		// Parameters or a response schema that is not JSON (no registry takes it, but a
		// catalog may hold it): their bytes as they are still tell the definition from
		// any other, and cannot be taken for a JSON array's.
		b = fmt.Appendf(nil, "%q %q %q", d.Description, d.Parameters, d.ResponseSchema)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// ErrUsage: a usage record that cannot be learned from (no tool or no request words).
var ErrUsage = errors.New("pick: unusable usage record")

// Learned is what pickers learn from usage: for each tenant, a learned field per tool
// (the requests that led to it) and the tools used together. It is safe for concurrent
// use: Learn folds records in, [Learned.Scorer] ranks with them.
type Learned struct {
	cfg LearnConfig

	mu   sync.Mutex
	sets map[string]*usageSet // by tenant ("" for all, when shared)
	// readable is a copy of sets, replaced when a tenant is added: picks find their
	// tenant's set without l.mu, which a rebuild holds for the whole of its build.
	readable atomic.Pointer[map[string]*usageSet]
	// folded counts the records learned from, dropped those refused.
	folded, dropped atomic.Int64
	// running is set while Run keeps the indexes fresh; wake asks it to look for
	// stale ones.
	running atomic.Bool
	wake    chan struct{}
}

// NewLearned returns an empty Learned.
func NewLearned(cfg LearnConfig) (*Learned, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Learned{cfg: c, sets: map[string]*usageSet{}, wake: make(chan struct{}, 1)}, nil
}

// Config returns the configuration in force (defaults filled in).
func (l *Learned) Config() LearnConfig { return l.cfg }

// usageSet is one tenant's learning (or everyone's, when shared).
type usageSet struct {
	tools map[string]*toolUsage
	// runs remembers the tools of recent runs (a ring of MaxRuns), for co-usage.
	runs    map[string][]string
	ring    []string
	ringAt  int
	dirty   atomic.Bool  // new usage since the view was built; set under l.mu
	built   atomic.Int64 // when the view was built, Unix nanoseconds
	view    atomic.Pointer[learnedView]
	rebuild sync.Mutex
	// log holds the most recent runs, for self-tuning (see tune.go); tuned is the
	// outcome of the last tuning, nil before the first.
	log   runLog
	tuned atomic.Pointer[TuneResult]
}

// toolUsage is one tool's learned field and partners.
type toolUsage struct {
	key      string // LearnKey the requests were learned for; "" unknown
	reqs     []learnedRequest
	runs     float64 // runs the tool was used in, for co-usage shares
	partners []partner
}

type learnedRequest struct {
	id    uint32   // hash of the request's terms
	terms []uint32 // distinct term hashes, at most MaxTerms
	uses  float32  // times seen
	last  int64    // unix seconds of the last use
}

type partner struct {
	tool  string
	count float64
}

// Learn folds one record in. It returns ErrUsage (wrapped) when the record has no tool
// or no word to learn; the record is then counted as dropped.
func (l *Learned) Learn(u Usage) error {
	if u.Tool == "" {
		l.dropped.Add(1)
		return fmt.Errorf("%w: no tool", ErrUsage)
	}
	terms := requestTerms(u.Request, l.cfg.MaxTerms)
	if len(terms) == 0 {
		l.dropped.Add(1)
		return fmt.Errorf("%w: request %q has no words to learn", ErrUsage, preview(u.Request, 64))
	}
	at := u.At.Unix()
	if u.At.IsZero() {
		at = time.Now().Unix()
	}
	tenant := u.Tenant
	if l.cfg.Share {
		tenant = ""
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	set := l.sets[tenant]
	if set == nil {
		set = &usageSet{tools: map[string]*toolUsage{}, runs: map[string][]string{}, ring: make([]string, 0, 64)}
		l.sets[tenant] = set
		readable := maps.Clone(l.sets)
		l.readable.Store(&readable)
	}
	set.dirty.Store(true)
	t := set.tools[u.Tool]
	if t == nil {
		t = &toolUsage{key: u.Key}
		set.tools[u.Tool] = t
	}
	if u.Key != "" && u.Key != t.key {
		// The tool's definition changed: what was learned for the old one goes.
		*t = toolUsage{key: u.Key}
	}
	l.addRequest(t, terms, at)
	if u.Run != "" {
		l.coUse(set, u.Run, u.Tool)
	}
	set.log.add(l.cfg.TuneLog, u.Run, u.Tool, u.Request)
	l.folded.Add(1)
	return nil
}

// addRequest adds a request to t: a repeat adds a use; a new one takes a free place or
// that of the request of least decayed use (uses·2^(−age/HalfLife)), unless the new
// one would itself be the least.
func (l *Learned) addRequest(t *toolUsage, terms []uint32, at int64) {
	id := termsID(terms)
	for i := range t.reqs {
		if r := &t.reqs[i]; r.id == id {
			r.uses = float32(l.decayed(r, at)) + 1
			r.last = max(r.last, at)
			return
		}
	}
	r := learnedRequest{id: id, terms: terms, uses: 1, last: at}
	if len(t.reqs) < l.cfg.MaxRequests {
		t.reqs = append(t.reqs, r)
		return
	}
	worst, worstUse := 0, math.Inf(1)
	for i := range t.reqs {
		if u := l.decayed(&t.reqs[i], at); u < worstUse {
			worst, worstUse = i, u
		}
	}
	if worstUse <= 1 {
		t.reqs[worst] = r
	}
}

// decayed is r's use at time now.
func (l *Learned) decayed(r *learnedRequest, now int64) float64 {
	age := float64(now - r.last)
	if age <= 0 {
		return float64(r.uses)
	}
	return float64(r.uses) * math.Exp2(-age/l.cfg.HalfLife.Seconds())
}

// coUse records that tool was used in run, with the tools the run used before.
func (l *Learned) coUse(set *usageSet, run, tool string) {
	used, known := set.runs[run]
	for _, o := range used {
		if o == tool {
			return
		}
	}
	if !known {
		if len(set.ring) < l.cfg.MaxRuns {
			set.ring = append(set.ring, run)
		} else {
			delete(set.runs, set.ring[set.ringAt])
			set.ring[set.ringAt] = run
			set.ringAt = (set.ringAt + 1) % len(set.ring)
		}
	}
	t := set.tools[tool]
	t.runs++
	for _, o := range used {
		l.partnerOf(t, o)
		if ot := set.tools[o]; ot != nil {
			l.partnerOf(ot, tool)
		}
	}
	if len(used) < 16 { // a run calling many tools says little about any two of them
		set.runs[run] = append(used, tool)
	}
}

// partnerOf counts one more run where t was used with other. When t's partners are
// full, other takes the place of the least counted and starts from its count plus one
// (Metwally's space-saving count): a partner used often stays, whatever came between.
func (l *Learned) partnerOf(t *toolUsage, other string) {
	least := -1
	for i := range t.partners {
		p := &t.partners[i]
		if p.tool == other {
			p.count++
			return
		}
		if least < 0 || p.count < t.partners[least].count {
			least = i
		}
	}
	if len(t.partners) < l.cfg.MaxPartners {
		t.partners = append(t.partners, partner{tool: other, count: 1})
		return
	}
	t.partners[least] = partner{tool: other, count: t.partners[least].count + 1}
}

// LearnStats are counts of what a Learned holds.
type LearnStats struct {
	// Folded and Dropped count the records learned from and refused.
	Folded, Dropped int64
	// Tenants, Tools, Requests, Terms and Partners count what is kept now; Runs the
	// runs remembered to pair their tools.
	Tenants, Tools, Requests, Terms, Partners, Runs int
	// The largest per-tool counts, to check against LearnConfig's bounds.
	MaxToolRequests, MaxToolPartners, MaxRequestTerms int
}

// Stats counts what l holds; it walks every tool.
func (l *Learned) Stats() LearnStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := LearnStats{Folded: l.folded.Load(), Dropped: l.dropped.Load(), Tenants: len(l.sets)}
	for _, set := range l.sets {
		st.Tools += len(set.tools)
		st.Runs += len(set.runs)
		for _, t := range set.tools {
			st.Requests += len(t.reqs)
			st.Partners += len(t.partners)
			st.MaxToolRequests = max(st.MaxToolRequests, len(t.reqs))
			st.MaxToolPartners = max(st.MaxToolPartners, len(t.partners))
			for _, r := range t.reqs {
				st.Terms += len(r.terms)
				st.MaxRequestTerms = max(st.MaxRequestTerms, len(r.terms))
			}
		}
	}
	return st
}

// Refresh rebuilds every index with new usage now, rather than at the next pick.
func (l *Learned) Refresh() {
	l.mu.Lock()
	sets := make([]*usageSet, 0, len(l.sets))
	for _, s := range l.sets {
		sets = append(sets, s)
	}
	l.mu.Unlock()
	for _, s := range sets {
		l.refresh(s, true)
	}
}

// viewFor returns the index picks of tenant read, rebuilding it when it has new usage
// and was built more than RefreshEvery ago (nil when tenant has learned nothing), and
// the settings tenant's picks rank with.
func (l *Learned) viewFor(tenant string) (*learnedView, Tuning) {
	if l.cfg.Share {
		tenant = ""
	}
	sets := l.readable.Load()
	if sets == nil {
		return nil, l.defaultTuning()
	}
	set := (*sets)[tenant]
	if set == nil {
		return nil, l.defaultTuning()
	}
	return l.refresh(set, false), l.tuningOf(set)
}

// refresh rebuilds set's view if it has new usage (and, unless now, its last build is
// old enough). While [Learned.Run] runs, a pick with a view to read asks it to rebuild
// and reads the view it has (a rebuild of 500,000 records takes about a second, which
// no pick should wait out); the first view, Refresh, RefreshEvery < 0 and picks without
// Run are built by the caller.
func (l *Learned) refresh(set *usageSet, now bool) *learnedView {
	// Without l.mu: a pick must not wait for another's rebuild, nor for Learn.
	v := set.view.Load()
	if !set.dirty.Load() || !now && v != nil && !l.due(set) {
		return v
	}
	if v != nil && !now && l.cfg.RefreshEvery >= 0 && l.running.Load() {
		select {
		case l.wake <- struct{}{}:
		default: // Run has been asked already
		}
		return v
	}
	set.rebuild.Lock()
	defer set.rebuild.Unlock()
	return l.build(set)
}

// due reports whether set's view, if stale, may be rebuilt now: RefreshEvery has
// passed since its last build.
func (l *Learned) due(set *usageSet) bool {
	return l.cfg.RefreshEvery < 0 || time.Since(time.Unix(0, set.built.Load())) >= l.cfg.RefreshEvery
}

// build makes set's view from its records, unless another build took their news
// since; the caller holds set.rebuild.
func (l *Learned) build(set *usageSet) *learnedView {
	l.mu.Lock()
	if !set.dirty.Load() {
		l.mu.Unlock()
		return set.view.Load()
	}
	nv := buildView(set, l.cfg)
	set.dirty.Store(false)
	set.built.Store(time.Now().UnixNano())
	l.mu.Unlock()
	set.view.Store(nv)
	return nv
}

// learnedView is an immutable index of one usage set's learned fields, for picks.
type learnedView struct {
	names    []string // by learned tool index
	index    map[string]uint32
	keys     []string
	nreq     []int32
	lens     []float32          // field length: terms over the tool's requests
	avgLen   float64            // the lengths' average, for the impacts
	terms    map[uint32]uint32  // term hash → index in lists
	lists    [][]learnedPosting // by term index, sorted by tool index
	partners [][]viewPartner
	bound    atomic.Pointer[binding]
}

// learnedPosting is a term's impact in a tool's learned field, tf/(tf+K1·norm): the
// score needs a multiply-add per posting.
type learnedPosting struct {
	tool   uint32
	impact float32
}

type viewPartner struct {
	tool  uint32
	share float32 // of the tool's runs that used the partner
}

// liftPartners is how many partners of the best tool a pick lifts: those used with it
// most often. Each costs a score of its own; more lifted little on ToolLens.
const liftPartners = 4

// binding maps a view's tools to a snapshot's ids.
type binding struct {
	snap *Snapshot
	ids  []DocID  // by learned index; noDoc: not in the snapshot, or learned for another definition
	rev  []uint32 // by the snapshot's DocID: the learned index, ^0 for none
	// idf by term index (v.lists), over n = max(learned tools, s's live tools), and
	// idfUnknown, that of a term found in no learned field: computed once per snapshot rather
	// than a logarithm per query term.
	idf        []float64
	idfUnknown float64
}

const noDoc = ^DocID(0)

// buildView indexes set (l.mu held).
func buildView(set *usageSet, cfg LearnConfig) *learnedView {
	v := &learnedView{terms: map[uint32]uint32{}}
	index := make(map[string]uint32, len(set.tools))
	v.index = index
	for name := range set.tools {
		index[name] = uint32(len(v.names))
		v.names = append(v.names, name)
	}
	v.keys = make([]string, len(v.names))
	v.nreq = make([]int32, len(v.names))
	v.lens = make([]float32, len(v.names))
	v.partners = make([][]viewPartner, len(v.names))
	tf := map[uint32]float32{}
	tfs := make([]map[uint32]float32, len(v.names))
	var total float64
	for i, name := range v.names {
		t := set.tools[name]
		v.keys[i], v.nreq[i] = t.key, int32(len(t.reqs))
		clear(tf)
		for _, r := range t.reqs {
			for _, h := range r.terms {
				tf[h]++
			}
			v.lens[i] += float32(len(r.terms))
		}
		total += float64(v.lens[i])
		tfs[i] = maps.Clone(tf)
		for _, p := range t.partners {
			if j, ok := index[p.tool]; ok && t.runs > 0 {
				v.partners[i] = append(v.partners[i], viewPartner{tool: j, share: float32(min(p.count/t.runs, 1))})
			}
		}
		// Picks lift the partners used most often with the tool, at most liftPartners.
		slices.SortStableFunc(v.partners[i], func(a, b viewPartner) int { return cmp.Compare(b.share, a.share) })
		v.partners[i] = v.partners[i][:min(len(v.partners[i]), liftPartners)]
	}
	if len(v.names) > 0 {
		v.avgLen = max(total/float64(len(v.names)), 1)
	}
	// Postings in tool order, with their impacts once the average length is known.
	for i, tf := range tfs {
		norm := learnedK1 * (1 - learnedB + learnedB*float64(v.lens[i])/v.avgLen)
		for h, n := range tf {
			t, ok := v.terms[h]
			if !ok {
				t = uint32(len(v.lists))
				v.terms[h] = t
				v.lists = append(v.lists, nil)
			}
			v.lists[t] = append(v.lists[t], learnedPosting{tool: uint32(i), impact: float32(float64(n) / (float64(n) + norm))})
		}
	}
	return v
}

// bind returns v's tools as ids of s.
func (v *learnedView) bind(s *Snapshot) *binding {
	if b := v.bound.Load(); b != nil && b.snap == s {
		return b
	}
	ids := make([]DocID, len(v.names))
	rev := make([]uint32, len(s.docs))
	for i := range rev {
		rev[i] = ^uint32(0)
	}
	for i, name := range v.names {
		ids[i] = noDoc
		if id, ok := s.Lookup(name); ok && s.isLive(id) && (v.keys[i] == "" || v.keys[i] == s.docs[id].learnKey) {
			ids[i], rev[id] = id, uint32(i)
		}
	}
	n := float64(max(len(v.names), s.live))
	idf := make([]float64, len(v.lists))
	for t, list := range v.lists {
		df := float64(len(list))
		idf[t] = math.Log(1 + (n-df+0.5)/(df+0.5))
	}
	b := &binding{snap: s, ids: ids, rev: rev, idf: idf, idfUnknown: math.Log(1 + (n+0.5)/0.5)}
	v.bound.Store(b)
	return b
}

// requestTerms analyses a request as tools and queries are, and returns its distinct
// term hashes, at most max.
func requestTerms(text string, maxTerms int) []uint32 {
	var out []uint32
	splitWords(text, func(w []byte) {
		if len(out) >= maxTerms {
			return
		}
		t, ok := analyseWord(w)
		if !ok {
			return
		}
		h := termHash(t)
		for _, o := range out {
			if o == h {
				return
			}
		}
		out = append(out, h)
	})
	return out
}

// termHash is the FNV-1a hash of a term: learned fields keep hashes, not words, so
// that a tool's field costs four bytes a term and no dictionary grows with usage.
func termHash(t string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(t); i++ {
		h ^= uint32(t[i])
		h *= 16777619
	}
	return h
}

// termsID identifies a request by its set of terms (order-independent).
func termsID(terms []uint32) uint32 {
	var id uint32
	for _, h := range terms {
		x := h * 0x9E3779B1
		id += x ^ (x >> 15)
	}
	return id
}

// preview is the start of s, for an error message.
func preview(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
