package clustertest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/toolfleet/toolfleet/internal/planner"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// BenchmarkLoopStepR3 is internal/planner's BenchmarkLoopStep on a 3-node cluster with
// every stream and bucket at R3, where a step's record and the state it leaves are one
// atomic batch on the journal: a run of one tool-call step (model, call, result, model,
// answer) against the raw round trip of one call (publish the call, hear its result),
// taking turns. The planner, the executor and the caller sit on different nodes.
func BenchmarkLoopStepR3(b *testing.B) {
	c := startNodes(b, buildNATSServer(b), 3, nil)
	cfg := events.Config{Replicas: 3}
	startExecutor(b, c, 2, cfg, &runCounter{n: map[string]int{}})
	ctx := context.Background()
	p, _ := startScriptedPlanner(b, ctx, c, 1, fmt.Sprintf("steps:\n  - calls: [{name: %s, arguments: {n: 1}}]\n  - text: one\n", toolIdem), nil)

	caller := c.connect(b, "caller", 0)
	js, err := jetstream.New(caller)
	if err != nil {
		b.Fatal(err)
	}
	results := natstest.Listen(b, caller, "toolfleet.result.*.*", func(s string) string { return s[strings.LastIndexByte(s, '.')+1:] })
	dones := natstest.Listen(b, caller, "toolfleet.event.run.*.done", func(s string) string { return strings.Split(s, ".")[3] })
	start := func() *planner.Run {
		for { // the planner's catalog lists the tool once the executor announced it
			run, err := p.Start(ctx, planner.StartRequest{Input: "echo one", Tools: []string{toolIdem}})
			if err == nil {
				return run
			}
			if ctx.Err() != nil {
				b.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	natstest.Await(b, dones.Of(start().ID), "the first run did not end")

	var raw, loop []time.Duration
	rawCall := func() {
		id := "c" + nuid.Next()
		msg, err := events.NewCall(events.CallOptions{Source: "/bench", ID: id, RunID: "braw"},
			events.Call{Tool: toolIdem, Arguments: json.RawMessage(`{"n":1}`)})
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if _, err := js.PublishMsg(ctx, msg); err != nil {
			b.Fatal(err)
		}
		natstest.Await(b, results.Of(id), "no result")
		raw = append(raw, time.Since(t0))
	}
	// Where a run's time goes, from the run's own record: until its call is published
	// (the run's create and its first step), until the executor starts the call, until
	// the call's result, until the run's end is decided (the result stored and heard,
	// the model's second turn), and until the caller hears the done event (the final
	// compare-and-set and the event).
	parts := map[string][]time.Duration{}
	part := func(name string, from, to time.Time) { parts[name] = append(parts[name], to.Sub(from)) }
	loopRun := func() {
		t0 := time.Now()
		run := start()
		natstest.Await(b, dones.Of(run.ID), "run not done")
		heard := time.Now()
		loop = append(loop, heard.Sub(t0))
		done, err := p.Get(ctx, run.ID)
		if err != nil || len(done.Calls) != 1 || done.FinishedAt == nil || done.Calls[0].StartedAt == nil || done.Calls[0].FinishedAt == nil {
			b.Fatalf("run %s: %v", run.ID, err)
		}
		call := done.Calls[0]
		part("1-called", t0, call.CalledAt)
		part("2-started", call.CalledAt, *call.StartedAt)
		part("3-answered", *call.StartedAt, *call.FinishedAt)
		part("4-decided", *call.FinishedAt, *done.FinishedAt)
		part("5-heard", *done.FinishedAt, heard)
	}
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			rawCall()
			loopRun()
		} else {
			loopRun()
			rawCall()
		}
	}
	p50 := func(d []time.Duration) time.Duration { slices.Sort(d); return d[len(d)/2] }
	b.ReportMetric(float64(p50(raw).Microseconds()), "raw-p50-µs")
	b.ReportMetric(float64(p50(loop).Microseconds()), "loop-p50-µs")
	b.ReportMetric(float64(p50(loop))/float64(p50(raw)), "loop/raw")
	for name, d := range parts {
		b.ReportMetric(float64(p50(d).Microseconds()), name+"-p50-µs")
	}
}
