package planner

import (
	"context"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
)

// BenchmarkNestedRun measures, one at a time, a run that delegates one tool-call step to
// a nested run (root: run_agent → answer; child: add → answer), from its start to its
// done event: what the nested run's budget checks and charges to its parent add to its
// steps.
func BenchmarkNestedRun(b *testing.B) {
	tb := setup(b, map[string]string{
		"main": `
steps:
  - calls: [{name: run_agent, arguments: {task: "add", model: child, tools: [add]}}]
  - text: done
`,
		"child": `
steps:
  - calls: [{name: add, arguments: {a: 1, b: 2}}]
  - text: three
`,
	})
	dones := natstest.Listen(b, tb.nc, "toolfleet.event.run.*.done", runOfEvent)
	var took []time.Duration
	for b.Loop() {
		runID := newRunID()
		ch := dones.Of(runID)
		t0 := time.Now()
		if _, err := tb.p.start(context.Background(), StartRequest{Input: "delegate", Tools: []string{"add", "run_agent"},
			Limits: Limits{TokenBudget: 1 << 30}}, runID, nil, ""); err != nil {
			b.Fatal(err)
		}
		select {
		case <-ch:
		case <-time.After(30 * time.Second):
			b.Fatal("run not done")
		}
		took = append(took, time.Since(t0))
	}
	b.ReportMetric(float64(percentile(took, 50))/1e6, "nested-run-p50-ms")
}
