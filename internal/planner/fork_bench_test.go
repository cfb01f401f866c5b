package planner

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/internal/provider"
)

// BenchmarkForkLongRun measures the start of a fork of a 200-step run from its step 199:
// from the call to Fork until it returns with the fork stored (its first step is
// asked in the background, on the same planner). A fork reuses the original's
// records and outputs (read once, in parallel); it asks no model and calls no tool for
// steps 0..198. Reported: ns/op, and the p50 and p90 of the starts in ms.
func BenchmarkForkLongRun(b *testing.B) {
	const steps = 200
	tb := setup(b, map[string]string{"main": plannerAnswerScript})
	answers := make([]provider.Message, 0, steps)
	for i := range steps - 1 {
		answers = append(answers, provider.Message{ToolCalls: []provider.ToolCall{
			callOf(fmt.Sprintf("m%d", i), "add", fmt.Sprintf(`{"a":%d,"b":1}`, i))}})
	}
	answers = append(answers, provider.Message{Text: "done"})
	model := &sequenceModel{answers: answers}
	tb.swapPlanner(b, Config{Models: map[string]provider.Model{"main": model}, DefaultModel: "main"})
	run, err := tb.p.Start(tb.ctx, StartRequest{Input: "add, many times", Tools: []string{"add"}, Limits: Limits{MaxSteps: steps + 10}})
	if err != nil {
		b.Fatal(err)
	}
	orig, err := tb.p.Wait(tb.ctx, run.ID)
	if err != nil || orig.StepsTaken() != steps {
		b.Fatalf("the long run took %d steps (%v), want %d", orig.StepsTaken(), err, steps)
	}
	var took []time.Duration
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		if _, err := tb.p.Fork(tb.ctx, orig.ID, ForkRequest{FromStep: steps - 1}); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(took[len(took)*9/10].Microseconds())/1000, "p90-ms")
}
