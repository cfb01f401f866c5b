package pick

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// vocabulary is a few hundred distinct words, common ones first, for generated tools.
func vocabulary() []string {
	words := strings.Fields(`get list create update delete search send read write file
		user account email message weather forecast city country price stock order invoice
		payment customer product image video audio text translate summary report chart table
		database query record event calendar meeting task project issue ticket repository
		branch commit review deploy server cluster network device sensor location route map`)
	for i := range 300 {
		words = append(words, fmt.Sprintf("term%03d", i))
	}
	return words
}

// randomTool draws a tool whose words follow a skewed distribution, so that some posting
// lists are long and many are short, like a real catalog's.
func randomTool(rng *rand.Rand, words []string, i int) tools.Definition {
	pickWord := func() string { return words[int(float64(len(words))*rng.Float64()*rng.Float64())] }
	name := fmt.Sprintf("%s_%s_%d", pickWord(), pickWord(), i)
	var desc []string
	for range 3 + rng.IntN(30) {
		desc = append(desc, pickWord())
	}
	d := def(name, strings.Join(desc, " "))
	d.Parameters = fmt.Appendf(nil, `{"type":"object","properties":{%q:{"type":"string","description":%q}}}`,
		pickWord(), pickWord()+" "+pickWord())
	d.Safe = rng.IntN(6) != 0
	return d
}

// TestImpactsFollowChanges applies random puts, replacements and removals to a catalog
// and checks after each that the impacts kept incrementally are those computed afresh
// from the snapshot's postings, that each term's bound covers its impacts, and that
// the averages the norms use are within normDrift of the live ones.
func TestImpactsFollowChanges(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	words := vocabulary()
	var defs []tools.Definition
	for i := range 200 {
		defs = append(defs, randomTool(rng, words, i))
	}
	cat, err := NewCatalog(defs)
	if err != nil {
		t.Fatal(err)
	}
	rebuilds := 0
	for step := range 300 {
		before := cat.Snapshot()
		switch n := len(defs); {
		case rng.IntN(4) == 0 && n > 50: // remove
			i := rng.IntN(n)
			cat.Remove(defs[i].Name)
			defs = slices.Delete(defs, i, i+1)
		case rng.IntN(3) == 0: // replace
			i := rng.IntN(n)
			d := randomTool(rng, words, step+1000)
			d.Name = defs[i].Name
			defs[i] = d
			if err := cat.Put(d); err != nil {
				t.Fatal(err)
			}
		default: // add a few, some long
			var add []tools.Definition
			for j := range 1 + rng.IntN(3) {
				d := randomTool(rng, words, 10_000+3*step+j)
				if rng.IntN(10) == 0 {
					d.Description = strings.Repeat(d.Description+" ", 8)
				}
				add = append(add, d)
			}
			defs = append(defs, add...)
			if err := cat.Put(add...); err != nil {
				t.Fatal(err)
			}
		}
		s := cat.Snapshot()
		if s.impacts.norms != before.impacts.norms {
			rebuilds++
		}
		fresh := newImpactIndex(s, s.params, s.impacts.norms)
		for term := range s.postings {
			if !slices.Equal(s.impacts.lists[term], fresh.lists[term]) {
				t.Fatalf("step %d: impacts of %q kept as %v, computed afresh %v", step, s.texts[term], s.impacts.lists[term], fresh.lists[term])
			}
			for _, im := range s.impacts.lists[term] {
				if im.v > s.impacts.max[term] {
					t.Fatalf("step %d: %q has impact %v above its bound %v", step, s.texts[term], im.v, s.impacts.max[term])
				}
			}
		}
		if s.normsStale() {
			t.Fatalf("step %d: norms use averages %v, more than %v from the live ones", step, s.avg, normDrift)
		}
	}
	if rebuilds == 0 || rebuilds > 150 {
		t.Errorf("impacts recomputed %d times in 300 changes; want some, and most changes appended", rebuilds)
	}
}

// TestScoringPathsAgree ranks random requests, short and long, over a catalog with
// removed and unsafe tools both ways BM25 scores (block by block, and term by term with
// early termination): the same tools with the same scores.
func TestScoringPathsAgree(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 6))
	words := vocabulary()
	var defs []tools.Definition
	for i := range 3000 {
		defs = append(defs, randomTool(rng, words, i))
	}
	cat, err := NewCatalog(defs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 { // dead tools stay in the posting lists until compaction
		cat.Remove(defs[i*7].Name)
	}
	if cat.Snapshot().nDead == 0 {
		t.Fatal("the catalog was compacted; the test needs dead tools")
	}
	for q := range 200 {
		var query []string
		for range 1 + rng.IntN(60) {
			query = append(query, words[int(float64(len(words))*rng.Float64()*rng.Float64())])
		}
		text := strings.Join(query, " ")
		for _, opts := range []Options{{MaxCandidates: 5, MinScore: new(0.0)}, {MaxCandidates: 1, AllowUnsafe: true}} {
			opts.Scorer = BM25{path: pathBlocks}
			blocks, err := Pick(t.Context(), text, cat, opts)
			if err != nil {
				t.Fatal(err)
			}
			opts.Scorer = BM25{path: pathSparse}
			sparse, err := Pick(t.Context(), text, cat, opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(blocks) == 0 && opts.MinScore != nil {
				t.Fatalf("query %d %q: no results", q, text)
			}
			if len(blocks) != len(sparse) {
				t.Fatalf("query %d %q: %d results by blocks, %d by terms", q, text, len(blocks), len(sparse))
			}
			for i := range blocks {
				b, s := blocks[i], sparse[i]
				if b.Name != s.Name || b.Score != s.Score || b.Reason != s.Reason {
					t.Fatalf("query %d %q rank %d: blocks %s %v %q, terms %s %v %q", q, text, i+1, b.Name, b.Score, b.Reason, s.Name, s.Score, s.Reason)
				}
				if !s.Definition.Safe && !opts.AllowUnsafe {
					t.Fatalf("query %d: unsafe tool %s picked", q, s.Name)
				}
				if _, ok := cat.Snapshot().Lookup(s.Name); !ok {
					t.Fatalf("query %d: removed tool %s picked", q, s.Name)
				}
			}
		}
	}
}

// TestQueryWordsSpelledOtherwise checks the two ways a query word finds its term: by its
// spelling in the tools, or stemmed when no tool spells it so; a phrase is found either
// way.
func TestQueryWordsSpelledOtherwise(t *testing.T) {
	t.Parallel()
	cat := testCatalog(t)
	for _, q := range []string{"weather forecast", "Weather FORECASTS", "weathers forecasting"} {
		res, err := Pick(t.Context(), q, cat, Options{Debug: true, MaxCandidates: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != 1 || res[0].Name != "getForecast" {
			t.Fatalf("%q: results %v, want getForecast", q, resultNames(res))
		}
		var matched []string
		for _, m := range res[0].Provenance.Details.(*BM25Details).Terms {
			matched = append(matched, m.Term)
		}
		slices.Sort(matched)
		if want := []string{"forecast", "weather", "weather forecast"}; !slices.Equal(matched, want) {
			t.Errorf("%q matched %v, want %v", q, matched, want)
		}
	}
}

// TestExplainToolWithMuchText explains a tool with far more terms than the query, which
// explain finds by searching the query terms' postings rather than walking the tool's
// terms: the provenance must still add up to the score.
func TestExplainToolWithMuchText(t *testing.T) {
	t.Parallel()
	var filler []string
	for i := range 400 {
		filler = append(filler, fmt.Sprintf("note%03d", i))
	}
	big := def("archive_notes", "Weather archive. "+strings.Join(filler, " "))
	defs := []tools.Definition{big}
	for i := range 10 { // a pick reads at most a posting per tool
		defs = append(defs, def(fmt.Sprintf("send_email_%d", i), "Send an email"))
	}
	cat, err := NewCatalog(defs)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Pick(t.Context(), "weather archive", cat, Options{Debug: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Name != "archive_notes" {
		t.Fatalf("results %v, want archive_notes", resultNames(res))
	}
	if d := cat.Snapshot().docs[0]; len(d.terms) <= explainWalk*3 {
		t.Fatalf("the tool has %d terms; the test needs more than %d", len(d.terms), explainWalk*3)
	}
	ex := res[0].Provenance.Details.(*BM25Details)
	var matched []string
	for _, m := range ex.Terms {
		matched = append(matched, m.Term)
	}
	slices.Sort(matched)
	if want := []string{"archiv", "weather", "weather archiv"}; !slices.Equal(matched, want) {
		t.Errorf("matched %v, want %v", matched, want)
	}
	if d := ex.Raw/ex.Max - res[0].Score; d > 1e-6 || d < -1e-6 {
		t.Errorf("score %v is not raw/max %v", res[0].Score, ex.Raw/ex.Max)
	}
	if !strings.Contains(res[0].Reason, `"archiv" in name, description`) {
		t.Errorf("reason %q", res[0].Reason)
	}
}
