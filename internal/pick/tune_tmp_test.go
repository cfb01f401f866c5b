package pick_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/toolfleet/toolfleet/internal/pick"
	"github.com/toolfleet/toolfleet/internal/shareddata"
	"github.com/toolfleet/toolfleet/internal/toolret"
)

func TestTuneTmp(t *testing.T) {
	if os.Getenv("TUNE") == "" {
		t.Skip()
	}
	dir := shareddata.Require(t, "toolret")
	type fb struct {
		b   *toolret.Benchmark
		cat *pick.Catalog
	}
	var fs []fb
	for _, f := range toolret.Folders {
		b, _ := toolret.Load(dir, f)
		c, _ := pick.NewCatalog(b.Tools)
		fs = append(fs, fb{b, c})
	}
	eval := func(p pick.BM25Params) (float64, string) {
		var sum float64
		s := ""
		for _, f := range fs {
			m, err := f.b.Evaluate(context.Background(), rankWith(f.cat, pick.Options{Scorer: pick.BM25{Params: p}}))
			if err != nil {
				t.Fatal(err)
			}
			sum += m.NDCG10 + m.Recall10
			s += f.b.Name + ": " + m.String() + " | "
		}
		return sum, s
	}
	mk := func(k1 float64, b, w [6]float64) pick.BM25Params { return pick.BM25Params{K1: k1, B: b, Weight: w} }
	for i, p := range []pick.BM25Params{
		pick.DefaultBM25Params(),
		mk(1.2, [6]float64{1, 0.4, 1, 0, 0, 0.8}, [6]float64{0.75, 0.5, 0.5, 0.5, 0.5, 0.5}),
		mk(2.4, [6]float64{1, 0.4, 1, 0, 0, 0.8}, [6]float64{1.5, 1, 1, 1, 1, 1}),
		mk(2.4, [6]float64{0.75, 0.4, 0.75, 0, 0, 0.75}, [6]float64{1.5, 1, 1, 1, 1, 1}),
		mk(1.2, [6]float64{0.75, 0.4, 0.75, 0, 0, 0.75}, [6]float64{1.5, 1, 1, 1, 1, 1}),
		mk(1.2, [6]float64{0.75, 0.75, 0.75, 0, 0, 0.75}, [6]float64{1.5, 1, 1, 1, 1, 1}),
		mk(2, [6]float64{0.75, 0.4, 0.75, 0, 0, 0.75}, [6]float64{1.5, 1, 1, 1, 1, 1}),
		mk(2, [6]float64{0.75, 0.4, 0.75, 0, 0, 0.75}, [6]float64{2, 1, 1, 1, 1, 1}),
		mk(2, [6]float64{0.75, 0.4, 0.75, 0, 0, 0.75}, [6]float64{1.5, 1, 1, 1, 1, 0.5}),
		mk(2, [6]float64{0.75, 0.4, 0.75, 0, 0, 0.75}, [6]float64{1.5, 1, 1, 0.5, 1, 1}),
	} {
		v, s := eval(p)
		fmt.Println(i, v, s)
	}
}
