package pick_test

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"testing"

	"github.com/toolfleet/toolfleet/internal/shareddata"
	"github.com/toolfleet/toolfleet/internal/toolret"
	"github.com/toolfleet/toolfleet/pkg/pick"
)

// TestQualityHeldOut cross-validates the tuning of the default scorer on the public
// benchmarks: tuned on four fifths of the queries, on the fifth left out it must reach
// plain BM25 (both of the README's settings) in nDCG@10 and Recall@10, on every fold of
// both benchmarks. And tuned on all the queries it must choose the shipped defaults, so
// that the defaults are what the cross-validation vouches for.
func TestQualityHeldOut(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-validates the retrieval benchmarks: minutes of single-threaded scoring, skipped in -short")
	}
	dir := qualityData(t)
	cv, err := toolret.CrossValidate(t.Context(), dir, 5, toolret.Grid())
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	cv.Write(&out)
	t.Log("\n" + out.String())
	for _, folder := range toolret.Folders {
		for _, f := range append(cv.ByBenchmark[folder], cv.MeanFold(folder)) {
			for i, plain := range f.Plain {
				if f.Picker.NDCG10 < plain.NDCG10 || f.Picker.Recall10 < plain.Recall10 {
					t.Errorf("%s fold %s (held out, tuned %s): picker nDCG@10 %.2f R@10 %.2f, below plain BM25 k1 %g b %g: %.2f %.2f",
						folder, foldName(f), f.Chosen, f.Picker.NDCG10, f.Picker.Recall10,
						toolret.PlainSettings[i][0], toolret.PlainSettings[i][1], plain.NDCG10, plain.Recall10)
				}
			}
		}
	}
	if got, want := cv.AllQueries.Params, pick.DefaultBM25Params(); got != want {
		t.Errorf("tuning on all queries chooses %s (%+v), not DefaultBM25Params (%+v)", cv.AllQueries.Name, got, want)
	}
}

// TestMetricsMatchReadme recomputes the README's plain-BM25 figures with this package's
// metrics; equal figures show the metrics are computed as the README defines them.
func TestMetricsMatchReadme(t *testing.T) {
	dir := qualityData(t)
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

func foldName(f toolret.FoldResult) string {
	if f.Fold < 0 {
		return "mean"
	}
	return fmt.Sprint(f.Fold + 1)
}

// qualityData returns the folder of the retrieval benchmarks. Without it the quality
// tests cannot measure anything: a run of the whole suite skips them (as every test of
// shared data does), but a run that asks for them by name (go test -run Quality) fails,
// saying where the data should be, rather than print ok for a measurement never made.
func qualityData(t *testing.T) string {
	t.Helper()
	if dir := shareddata.Dir("toolret"); dir != "" {
		return dir
	}
	if f := flag.Lookup("test.run"); f != nil && f.Value.String() != "" {
		t.Fatalf("%s was asked for by -run %q, but the shared test data \"toolret\" is absent: nothing was measured "+
			"(put it in ../shared/testdata/toolret beside the repository, or set TOOLFLEET_SHARED)", t.Name(), f.Value.String())
	}
	return shareddata.Require(t, "toolret") // skips, saying why
}

// TestLearnedQualityHeldOut cross-validates learning from usage: the queries of four
// folds are learned as usage records, and on the fifth the learned scorer must not fall
// below the cold default on either benchmark by more than half a point (mean of the
// folds, nDCG@10 and Recall@10: Seal-Tools' requests rarely resemble each other, and
// learning leaves it within ±0.2 of cold) and must gain on ToolLens, whose requests
// resemble each other, at least 20 points of nDCG@10.
func TestLearnedQualityHeldOut(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-validates the retrieval benchmarks: minutes of single-threaded scoring, skipped in -short")
	}
	dir := qualityData(t)
	cv, err := toolret.CrossValidateUsage(t.Context(), dir, 5, pick.LearnConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	cv.Write(&out)
	t.Log("\n" + out.String())
	for _, folder := range toolret.Folders {
		m := cv.MeanFold(folder)
		const slack = 0.5
		if m.Learned.NDCG10 < m.Cold.NDCG10-slack || m.Learned.Recall10 < m.Cold.Recall10-slack {
			t.Errorf("%s: learned nDCG@10 %.2f R@10 %.2f, below cold %.2f %.2f", folder,
				m.Learned.NDCG10, m.Learned.Recall10, m.Cold.NDCG10, m.Cold.Recall10)
		}
	}
	if m := cv.MeanFold("toollens"); m.Learned.NDCG10 < m.Cold.NDCG10+20 {
		t.Errorf("toollens: learned nDCG@10 %.2f, not 20 points above cold %.2f", m.Learned.NDCG10, m.Cold.NDCG10)
	}
}
