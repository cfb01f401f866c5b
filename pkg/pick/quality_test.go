package pick_test

import (
	"context"
	"testing"

	"github.com/toolfleet/toolfleet/internal/shareddata"
	"github.com/toolfleet/toolfleet/internal/toolret"
	"github.com/toolfleet/toolfleet/pkg/pick"
)

// rankWith ranks with the library as the metrics need (top 10, no threshold).
func rankWith(cat *pick.Catalog, opts pick.Options) toolret.Ranker {
	return toolret.PickRanker(cat, opts)
}

func TestQualityToolret(t *testing.T) {
	dir := shareddata.Require(t, "toolret")
	for _, folder := range toolret.Folders {
		t.Run(folder, func(t *testing.T) {
			b, err := toolret.Load(dir, folder)
			if err != nil {
				t.Fatal(err)
			}
			cat, err := pick.NewCatalog(b.Tools)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			got, err := b.Evaluate(ctx, rankWith(cat, pick.Options{}))
			if err != nil {
				t.Fatal(err)
			}
			ref := toolret.Reference[folder]
			t.Logf("%-9s README plain BM25 (full, k1 0.9 b 0.4): %s", folder, ref)
			t.Logf("%-9s picker default (bm25f)               : %s", folder, got)
			if got.Recall5 < ref.Recall5 || got.Recall10 < ref.Recall10 || got.NDCG10 < ref.NDCG10 {
				t.Errorf("default scorer below the plain-BM25 baseline on %s:\n got %s\nwant ≥ %s", folder, got, ref)
			}
		})
	}
}

// TestMetricsMatchReadme recomputes the README's plain-BM25 figures with this package's
// metrics; equal figures show the metrics are computed as the README defines them.
func TestMetricsMatchReadme(t *testing.T) {
	dir := shareddata.Require(t, "toolret")
	for _, folder := range toolret.Folders {
		t.Run(folder, func(t *testing.T) {
			b, err := toolret.Load(dir, folder)
			if err != nil {
				t.Fatal(err)
			}
			got, err := b.Evaluate(context.Background(), toolret.NewPlainBM25(b, 0.9, 0.4).Rank)
			if err != nil {
				t.Fatal(err)
			}
			ref := toolret.Reference[folder]
			t.Logf("%-9s plain BM25 recomputed: %s", folder, got)
			for _, c := range []struct {
				name      string
				got, want float64
			}{{"Recall@5", got.Recall5, ref.Recall5}, {"Recall@10", got.Recall10, ref.Recall10}, {"nDCG@10", got.NDCG10, ref.NDCG10}, {"COMP@10", got.Comp10, ref.Comp10}} {
				if d := c.got - c.want; d > 0.005 || d < -0.005 {
					t.Errorf("%s: recomputed %.2f, README %.2f", c.name, c.got, c.want)
				}
			}
		})
	}
}
