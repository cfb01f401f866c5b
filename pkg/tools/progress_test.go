package tools_test

import (
	"context"
	"math"
	"testing"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

type progressLog []tools.Progress

func (l *progressLog) ReportProgress(p tools.Progress) { *l = append(*l, p) }

// ReportProgress does nothing outside an executor, and hands a reporter its reports with
// the fraction kept within 0..1.
func TestReportProgress(t *testing.T) {
	t.Parallel()
	tools.ReportProgress(context.Background(), tools.Progress{Message: "nobody listens"}) // no panic, no effect
	var l progressLog
	ctx := tools.WithProgress(context.Background(), &l)
	for _, f := range []float64{0.5, -1, 7, math.NaN()} {
		tools.ReportProgress(ctx, tools.Progress{Message: "m", Fraction: f})
	}
	want := []float64{0.5, 0, 1, 0}
	if len(l) != len(want) {
		t.Fatalf("reports %+v", l)
	}
	for i, p := range l {
		if p.Fraction != want[i] || p.Message != "m" {
			t.Errorf("report %d: %+v, want fraction %v", i, p, want[i])
		}
	}
}
