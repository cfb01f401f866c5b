package pick_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/toolfleet/toolfleet/pkg/pick"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// catalog is a few tools, as a registry's definitions would give them.
func catalog() []tools.Definition {
	return []tools.Definition{
		{Name: "get_weather", Description: "Current weather conditions for a city.", Safe: true,
			Parameters: []byte(`{"type":"object","properties":{"city":{"type":"string","description":"City name"}}}`)},
		{Name: "get_forecast", Description: "Seven day weather forecast for a city.", Safe: true,
			Tags: []string{"weather"}},
		{Name: "send_email", Description: "Send an email message to a recipient.", Safe: true},
		{Name: "drop_database", Description: "Delete the weather database.", Safe: false},
	}
}

// A pick with provenance: the unsafe drop_database is never a candidate, and Debug
// says which query terms matched in which fields.
func ExamplePick() {
	cat, err := pick.NewCatalog(catalog())
	if err != nil {
		panic(err)
	}
	res, err := pick.Pick(context.Background(), "What's the weather in Paris today?", cat,
		pick.Options{MaxCandidates: 2, Debug: true})
	if err != nil {
		panic(err)
	}
	for _, r := range res {
		fmt.Printf("%s %.2f (%s, catalog version %d): %s\n",
			r.Name, r.Score, r.Provenance.Scorer, r.Provenance.CatalogVersion, r.Reason)
		d := r.Provenance.Details.(*pick.BM25Details)
		for _, t := range d.Terms {
			for _, f := range t.Fields {
				fmt.Printf("  %q in %s\n", t.Term, f.Field)
			}
		}
	}
	// Output:
	// get_weather 0.62 (bm25, catalog version 1): matched "weather" in name, description
	//   "weather" in name
	//   "weather" in description
	// get_forecast 0.49 (bm25, catalog version 1): matched "weather" in description, tags
	//   "weather" in description
	//   "weather" in tags
}

// overlap is a plain keyword scorer written as a custom Scorer: the share of
// the request's words found in a tool's name or description.
type overlap struct{}

func (overlap) Name() string { return "overlap" }

func (overlap) Score(ctx context.Context, req *pick.Request) ([]pick.Hit, error) {
	words := strings.Fields(strings.ToLower(req.Text))
	var hits []pick.Hit
	for id := range req.Candidates() { // only the tools that passed the filters
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		d := req.Snapshot.Definition(id)
		text := strings.ToLower(strings.ReplaceAll(d.Name, "_", " ") + " " + d.Description)
		var found []string
		for _, w := range words {
			if strings.Contains(text, w) {
				found = append(found, w)
			}
		}
		if len(found) > 0 {
			hits = append(hits, pick.Hit{ID: id, Score: float64(len(found)) / float64(len(words)),
				Reason: "matched " + strings.Join(found, ", ")})
		}
	}
	// Best first, at most Limit.
	slices.SortStableFunc(hits, func(a, b pick.Hit) int { return cmp.Compare(b.Score, a.Score) })
	return hits[:min(len(hits), req.Limit)], nil
}

// A custom scorer replaces BM25 through Options.Scorer; the filters, the threshold and
// the provenance stay the package's.
func ExampleScorer() {
	cat, err := pick.NewCatalog(catalog())
	if err != nil {
		panic(err)
	}
	res, err := pick.Pick(context.Background(), "send an email", cat,
		pick.Options{Scorer: overlap{}, MinScore: new(0.5)})
	if err != nil {
		panic(err)
	}
	for _, r := range res {
		fmt.Printf("%s %.2f by %s: %s\n", r.Name, r.Score, r.Provenance.Scorer, r.Reason)
	}
	// Output:
	// send_email 1.00 by overlap: matched send, an, email
}
