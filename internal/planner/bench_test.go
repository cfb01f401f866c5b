package planner

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/synadia-io/orbit.go/jetstreamext"

	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/events"
)

const benchScript = `
name: bench
steps:
  - calls: [{name: add, arguments: {a: 1, b: 2}}]
  - text: three
`

func lastToken(subject string) string { return subject[strings.LastIndexByte(subject, '.')+1:] }

// runOfEvent is the run id in toolfleet.event.run.<run>.<what>.
func runOfEvent(subject string) string { return strings.Split(subject, ".")[3] }

// BenchmarkLoopStep measures, one at a time on the same fleet, a run of one tool-call
// step (model → call → result → model → answer) against the fleet's raw round trip of one
// call (publish the call event, wait for its result event). The difference is the
// planner's overhead per tool call: two scripted model turns, the run state's
// compare-and-set updates, the step messages and the lifecycle events.
//
// A third measurement, writes-only, makes just the JetStream writes a run's guarantees
// put on its critical path, one after another as the loop must: the run created while
// its first step is recorded, the call, the final compare-and-set, the done event (see
// chainRun). writes-only ÷ raw is the floor the loop's ratio has without any planner
// work; loop ÷ writes-only is what the planner adds to it.
//
// Two more measure a later step's writes alone (a step whose run is stored: every step
// but a first one whose model answered before its run's create did): the step's
// record and the state it leaves, written as the journal's one atomic batch (step-batch)
// and as two awaited writes, the record then the compare-and-set (step-parts).
//
// They run in a new random order each round, so that the work one leaves behind when it
// is heard (acks, the calls stream's clean-up, the planner reading a result) weighs on
// each of the others alike: in a fixed order it falls on the same one.
func BenchmarkLoopStep(b *testing.B) {
	tb := setup(b, map[string]string{"main": benchScript})
	results := natstest.Listen(b, tb.nc, "toolfleet.result.*.*", lastToken)
	dones := natstest.Listen(b, tb.nc, "toolfleet.event.run.*.done", runOfEvent)
	args := json.RawMessage(`{"a":1,"b":2}`)

	var raw, loop []time.Duration
	rawCall := func() {
		id := "c" + nuid.Next()
		ch := results.Of(id)
		msg, err := events.NewCall(events.CallOptions{Source: "/bench", ID: id, RunID: "braw"}, events.Call{Tool: "add", Arguments: args})
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if _, err := tb.js.PublishMsg(tb.ctx, msg); err != nil {
			b.Fatal(err)
		}
		natstest.Await(b, ch, "no result")
		raw = append(raw, time.Since(t0))
	}
	// Where a run's time goes, from its own record (as BenchmarkLoopStepR3 reports it):
	// until its call is made, until the executor starts it, until its result, until the
	// run's end is decided, and until the done event is heard.
	runParts := map[string][]time.Duration{}
	part := func(name string, from, to time.Time) { runParts[name] = append(runParts[name], to.Sub(from)) }
	loopRun := func() {
		runID := newRunID()
		ch := dones.Of(runID)
		t0 := time.Now()
		if _, err := tb.p.start(context.Background(), StartRequest{Input: "add", Tools: []string{"add"}}, runID, nil, ""); err != nil {
			b.Fatal(err)
		}
		natstest.Await(b, ch, "run not done")
		heard := time.Now()
		loop = append(loop, heard.Sub(t0))
		run, err := tb.p.Get(tb.ctx, runID)
		if err != nil || len(run.Calls) != 1 || run.FinishedAt == nil || run.Calls[0].StartedAt == nil || run.Calls[0].FinishedAt == nil {
			b.Fatalf("run %s: %v", runID, err)
		}
		call := run.Calls[0]
		part("1-called", t0, call.CalledAt)
		part("2-started", call.CalledAt, *call.StartedAt)
		part("3-answered", *call.StartedAt, *call.FinishedAt)
		part("4-decided", *call.FinishedAt, *run.FinishedAt)
		part("5-heard", *run.FinishedAt, heard)
	}
	// The writes a run's guarantees put on its critical path, and nothing else: the run
	// created while its first step is recorded, the call published and answered, the
	// final state compared-and-set, the done event stored and heard. Values are the
	// sizes this run's writes have. Its run id is not a planner's, so that the planner
	// leaves its result alone.
	var chain []time.Duration
	runs := tb.p.runs.KV()
	value := func(n int) []byte { return fmt.Appendf(nil, `{"status":"done","pad":"%s"}`, strings.Repeat("x", n-29)) }
	created, final, stepRecord := value(535), value(946), value(1108)
	chainRun := func() {
		runID := "w" + nuid.Next()
		callID := runID + "-0-0"
		resultCh, doneCh := results.Of(callID), dones.Of(runID)
		call, err := events.NewCall(events.CallOptions{Source: "/bench", ID: callID, RunID: runID}, events.Call{Tool: "add", Arguments: args})
		if err != nil {
			b.Fatal(err)
		}
		done, err := events.NewRunEvent("/bench", "done", events.RunEvent{RunID: runID}, time.Now())
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		rec, err := tb.js.PublishMsgAsync(&nats.Msg{Subject: "toolfleet.runlog." + runID + ".step.0", Data: stepRecord,
			Header: nats.Header{events.HeaderExpectedLastSubjectSeq: []string{"0"}}})
		if err != nil {
			b.Fatal(err)
		}
		rev, err := runs.Create(tb.ctx, runID, created)
		if err != nil {
			b.Fatal(err)
		}
		select {
		case <-rec.Ok():
		case err := <-rec.Err():
			b.Fatal(err)
		}
		if _, err := tb.js.PublishMsg(tb.ctx, call); err != nil {
			b.Fatal(err)
		}
		natstest.Await(b, resultCh, "no result")
		if _, err := runs.Update(tb.ctx, runID, final, rev); err != nil {
			b.Fatal(err)
		}
		if _, err := tb.js.PublishMsgAsync(done); err != nil {
			b.Fatal(err)
		}
		natstest.Await(b, doneCh, "no done")
		chain = append(chain, time.Since(t0))
	}
	var batched, parts []time.Duration
	stepped := value(900)
	stepWrites := func(batch bool) {
		runID := "w" + nuid.Next()
		rev, err := runs.Create(tb.ctx, runID, created)
		if err != nil {
			b.Fatal(err)
		}
		record := &nats.Msg{Subject: "toolfleet.runlog." + runID + ".step.0", Data: stepRecord,
			Header: nats.Header{events.HeaderExpectedLastSubjectSeq: []string{"0"}}}
		t0 := time.Now()
		if batch {
			bp, err := jetstreamext.NewBatchPublisher(tb.js, jetstreamext.BatchFlowControl{})
			if err != nil {
				b.Fatal(err)
			}
			if err := bp.AddMsg(record); err != nil {
				b.Fatal(err)
			}
			if _, err := bp.CommitMsg(tb.ctx, &nats.Msg{Subject: "$KV." + events.BucketRuns + "." + runID, Data: stepped},
				jetstreamext.WithBatchExpectLastSequencePerSubject(rev)); err != nil {
				b.Fatal(err)
			}
			batched = append(batched, time.Since(t0))
			return
		}
		if _, err := tb.js.PublishMsg(tb.ctx, record); err != nil {
			b.Fatal(err)
		}
		if _, err := runs.Update(tb.ctx, runID, stepped, rev); err != nil {
			b.Fatal(err)
		}
		parts = append(parts, time.Since(t0))
	}
	stepBatch, stepParts := func() { stepWrites(true) }, func() { stepWrites(false) }
	order := []func(){rawCall, chainRun, loopRun, stepBatch, stepParts}
	for b.Loop() {
		rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, f := range order {
			f()
		}
	}
	batchP50, partsP50 := percentile(batched, 50), percentile(parts, 50)
	b.ReportMetric(ms(batchP50), "step-batch-p50-ms")
	b.ReportMetric(ms(partsP50), "step-parts-p50-ms")
	b.ReportMetric(float64(batchP50)/float64(partsP50), "step-batch/parts")
	rawP50, loopP50, chainP50 := percentile(raw, 50), percentile(loop, 50), percentile(chain, 50)
	b.ReportMetric(ms(rawP50), "raw-call-p50-ms")
	b.ReportMetric(ms(loopP50), "loop-step-p50-ms")
	b.ReportMetric(ms(chainP50), "writes-only-p50-ms")
	b.ReportMetric(ms(loopP50-rawP50), "overhead-per-call-ms")
	b.ReportMetric(float64(loopP50)/float64(rawP50), "loop/raw")
	b.ReportMetric(float64(chainP50)/float64(rawP50), "writes-only/raw")
	b.ReportMetric(float64(loopP50)/float64(chainP50), "loop/writes-only")
	for name, d := range runParts {
		b.ReportMetric(float64(percentile(d, 50).Microseconds()), name+"-p50-µs")
	}
}

// BenchmarkConcurrentRuns drives many one-step runs at once through 1, 2 and 4 planner
// replicas sharing the same consumers and state, each on its own NATS connection. Runs
// are started round-robin over the replicas, as a load balancer in front of their HTTP
// APIs would; the steps then go wherever the planner sends them. It reports runs/s and,
// per replica, the share of model turns it took (stepped-r<i>-%): a replica that takes
// none or all of them is a bottleneck by design.
//
// Runs in flight in all: TOOLFLEET_BENCH_RUNS_IN_FLIGHT (default 256). The in-flight
// count bounds what it can show: runs/s is at most in-flight ÷ run latency, whatever the
// replicas (32 in flight at 12 ms a run is 2,600 runs/s), so on a machine with many
// cores give it enough runs to keep them all busy.
//
// cpu-us/run is the process's CPU time (user and system: the replicas, the embedded
// server and the scripted fleet together) over the runs, what a run costs the machine.
func BenchmarkConcurrentRuns(b *testing.B) {
	inFlight := envInt(b, "TOOLFLEET_BENCH_RUNS_IN_FLIGHT", 256)
	for _, replicas := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("replicas=%d", replicas), func(b *testing.B) {
			tb := setup(b, map[string]string{"main": benchScript})
			regs := make([]*prometheus.Registry, replicas)
			planners := make([]*Planner, replicas)
			for i := range replicas {
				regs[i] = prometheus.NewRegistry()
				cfg := Config{Models: tb.p.cfg.Models, DefaultModel: "main", Metrics: regs[i], ID: fmt.Sprintf("r%d", i)}
				if i == 0 {
					planners[i] = tb.swapPlanner(b, cfg)
					continue
				}
				cfg.Events, cfg.Log = tb.cfg, zerolog.Nop()
				p, err := New(tb.ctx, tb.srv.Connect(), cfg)
				if err != nil {
					b.Fatal(err)
				}
				serve(b, p.Run)
				planners[i] = p
			}
			dones := natstest.Listen(b, tb.nc, "toolfleet.event.run.*.done", runOfEvent)
			sem := make(chan struct{}, inFlight)
			var wg sync.WaitGroup
			runs := 0
			cpu0 := cpuTime(b)
			start := time.Now()
			for b.Loop() {
				sem <- struct{}{}
				wg.Add(1)
				p := planners[runs%replicas]
				runs++
				id := newRunID()
				ch := dones.Of(id)
				go func() {
					defer wg.Done()
					defer func() { <-sem }()
					if _, err := p.start(context.Background(), StartRequest{Input: "add", Tools: []string{"add"}}, id, nil, ""); err != nil {
						b.Error(err)
						return
					}
					select {
					case <-ch:
					case <-time.After(60 * time.Second):
						b.Error("run not done within 60s")
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(runs)/time.Since(start).Seconds(), "runs/s")
			b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(time.Microsecond)/float64(max(runs, 1)), "cpu-us/run")
			turns := make([]float64, replicas)
			total := 0.0
			for i, reg := range regs {
				turns[i] = counterValue(b, reg, "toolfleet_planner_steps_total")
				total += turns[i]
			}
			for i := range turns {
				b.ReportMetric(100*turns[i]/max(total, 1), fmt.Sprintf("stepped-r%d-%%", i))
			}
		})
	}
}

// cpuTime is the CPU time this process used so far, user and system.
func cpuTime(tb testing.TB) time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// counterValue reads the counter name from reg.
func counterValue(tb testing.TB, reg *prometheus.Registry, name string) float64 {
	families, err := reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			sum := 0.0
			for _, m := range f.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
			return sum
		}
	}
	return 0
}

func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// envInt is the positive number in the environment variable name, or def when it is unset.
func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s: %q is not a positive number", name, v)
	}
	return n
}
