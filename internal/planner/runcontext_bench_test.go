package planner

import (
	"context"
	"encoding/json"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// BenchmarkRunContext measures what a tool's run context costs a run: runs of one call
// of a tool that asks for it against runs of one call of the same tool that does not,
// alternating in the same session, with a small input (the context inline in the call
// event) and one over the claim-check size (stored as a payload once per step). It
// reports each kind's median run (start to done) and their ratio.
func BenchmarkRunContext(b *testing.B) {
	for _, size := range []struct {
		name  string
		bytes int
	}{{"small", 100}, {"large", 300 << 10}} {
		b.Run(size.name, func(b *testing.B) {
			tb := setup(b, map[string]string{
				"main": plannerAnswerScript,
				"yes":  "steps:\n  - calls: [{name: ctx_yes, arguments: {}}]\n  - text: done\n",
				"no":   "steps:\n  - calls: [{name: ctx_no, arguments: {}}]\n  - text: done\n",
			})
			ok := func(context.Context, json.RawMessage) (any, error) { return "ok", nil }
			for _, d := range []tools.Definition{
				{Name: "ctx_yes", Safe: true, RunContext: true, Parameters: json.RawMessage(`{"type":"object"}`)},
				{Name: "ctx_no", Safe: true, Parameters: json.RawMessage(`{"type":"object"}`)},
			} {
				startExecutor(b, tb, d, ok)
			}
			input := "go " + strings.Repeat("x", size.bytes)
			one := func(model string) time.Duration {
				t0 := time.Now()
				run, err := tb.p.Start(tb.ctx, StartRequest{Input: input, Model: model})
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(tb.ctx, 30*time.Second)
				defer cancel()
				if run, err = tb.p.Wait(ctx, run.ID); err != nil || run.Answer != "done" {
					b.Fatalf("run %s: %v (%s %s)", run.ID, err, run.Termination, run.Detail)
				}
				return time.Since(t0)
			}
			one("yes") // warm up
			one("no")
			var with, without []time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				with = append(with, one("yes"))
				without = append(without, one("no"))
			}
			b.StopTimer()
			p50 := func(d []time.Duration) time.Duration { slices.Sort(d); return d[len(d)/2] }
			w, wo := p50(with), p50(without)
			b.ReportMetric(float64(w.Microseconds()), "with-p50-µs")
			b.ReportMetric(float64(wo.Microseconds()), "without-p50-µs")
			b.ReportMetric(float64(w)/float64(wo), "ratio")
		})
	}
}

// BenchmarkPausedRuns pauses b.N runs after their first step and reports what they
// hold while they wait: goroutines of the process and runs the planner's sweeper
// watches, per paused run, against the same process before they started.
func BenchmarkPausedRuns(b *testing.B) {
	tb := setup(b, map[string]string{"main": "steps:\n  - calls: [{name: add, arguments: {a: 1, b: 2}}]\n  - text: done\n"})
	time.Sleep(500 * time.Millisecond) // let the fleet settle
	before := runtime.NumGoroutine()
	b.ResetTimer()
	ids := make([]string, b.N)
	for i := range ids {
		run, err := tb.p.Start(tb.ctx, StartRequest{Input: "add", Tools: []string{"add"}, Pause: &PauseOptions{AfterEveryStep: true}})
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = run.ID
	}
	for _, id := range ids {
		ctx, cancel := context.WithTimeout(tb.ctx, 30*time.Second)
		run, err := tb.p.Wait(ctx, id)
		cancel()
		if err != nil || run.Status != StatusPaused {
			b.Fatalf("run %s: %v, %s", id, err, run.Status)
		}
	}
	b.StopTimer()
	time.Sleep(500 * time.Millisecond) // let the runs' last handlers return
	tb.p.mu.Lock()
	watched := len(tb.p.deadlines)
	tb.p.mu.Unlock()
	b.ReportMetric(float64(runtime.NumGoroutine()-before)/float64(b.N), "goroutines/paused-run")
	b.ReportMetric(float64(watched)/float64(b.N), "swept/paused-run")
}
