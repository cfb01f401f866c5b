package planner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/planner/runrec"
	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// writes records the size of every value a planner writes: control states by run id,
// run log records by subject.
type writes struct {
	mu      sync.Mutex
	control map[string][]int
	log     map[string]int
}

func newWrites() *writes { return &writes{control: map[string][]int{}, log: map[string]int{}} }

func (w *writes) kv(id string, value []byte) error {
	w.mu.Lock()
	w.control[id] = append(w.control[id], len(value))
	w.mu.Unlock()
	return nil
}

func (w *writes) record(subject string, n int) {
	w.mu.Lock()
	w.log[subject] = max(w.log[subject], n)
	w.mu.Unlock()
}

// hookedPlanner replaces the bundle's planner by one with the models of scripts whose
// writes w records.
func (b *testBundle) hookedPlanner(t *testing.T, scripts map[string]string, w *writes) *Planner {
	t.Helper()
	models := map[string]provider.Model{}
	for name, s := range scripts {
		models[name] = scriptedModel(t, s)
	}
	p, err := New(b.ctx, b.srv.Connect(), Config{Models: models, DefaultModel: "main", Events: b.cfg, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	p.runs.Wrote, p.rlog.Wrote = w.kv, w.record
	b.stopPlanner()
	serve(t, p.Run)
	b.p = p
	return p
}

func (b *testBundle) waitLong(t *testing.T, id string, d time.Duration) *Run {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	run, err := b.p.Wait(ctx, id)
	if err != nil {
		t.Fatalf("wait for run %s: %v (status %s, step %d)", id, err, run.Status, run.Step)
	}
	return run
}

// blob returns a string of n bytes, whatever the call's other arguments.
var blobDef = tools.Definition{Type: "function", Name: "blob", Description: "Returns n bytes.", Safe: true,
	Parameters: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"},"i":{"type":"integer"}},"required":["n"]}`)}

func blob(_ context.Context, args json.RawMessage) (any, error) {
	var in struct{ N int }
	if err := json.Unmarshal(args, &in); err != nil {
		return nil, err
	}
	return strings.Repeat("x", in.N), nil
}

// A run of 200 steps, each with a 500 KB output, completes, and what it writes per
// change of its control state stays the same size from its first steps to its last:
// the conversation and the outputs are not in it.
func TestLongRunStateStaysSmall(t *testing.T) {
	const steps, size = 200, 500_000
	var script strings.Builder
	script.WriteString("name: long\nsteps:\n")
	for i := range steps {
		fmt.Fprintf(&script, "  - calls: [{name: blob, arguments: {n: %d, i: %d}}]\n    usage: {input: 10, output: 2}\n", size, i)
	}
	script.WriteString("  - text: all read\n    usage: {input: 10, output: 2}\n")
	b := setup(t, nil)
	startExecutor(t, b, blobDef, blob)
	w := newWrites()
	b.hookedPlanner(t, map[string]string{"main": script.String()}, w)

	start := time.Now()
	run, err := b.p.Start(b.ctx, StartRequest{Input: "read them all", Tools: []string{"blob"},
		Limits: Limits{MaxSteps: steps + 1, ContextBudget: 2048, Timeout: tools.Duration(10 * time.Minute)}})
	if err != nil {
		t.Fatal(err)
	}
	run = b.waitLong(t, run.ID, 5*time.Minute)
	t.Logf("%d steps of %d-byte outputs in %s", steps, size, time.Since(start).Round(time.Millisecond))
	if run.Termination != TerminationCompleted || run.Answer != "all read" || len(run.Calls) != steps {
		t.Fatalf("run ended %s (%s), answer %q, %d calls; want completed after %d calls", run.Termination, run.Detail, run.Answer, len(run.Calls), steps)
	}
	for i, c := range run.Calls {
		if c.Status != "ok" || len(c.Output) != size+2 || c.Step != i {
			t.Fatalf("call %d: status %s, step %d, %d bytes of output; want ok at step %d with the whole output", i, c.Status, c.Step, len(c.Output), i)
		}
	}
	// The conversation: input, then per step the call and its (truncated) result, then the answer.
	if len(run.Messages) != 1+2*steps+1 {
		t.Fatalf("%d messages, want %d", len(run.Messages), 1+2*steps+1)
	}
	last := run.Messages[2*steps]
	if last.Role != provider.RoleTool || !strings.Contains(string(last.ToolResults[0].Content), `"truncated":true`) ||
		!strings.Contains(string(last.ToolResults[0].Content), run.Calls[steps-1].ID) || len(last.ToolResults[0].Content) > 4096 {
		t.Fatalf("last tool message %.300s; want the output cut to the context budget, with the call id", last.ToolResults[0].Content)
	}

	w.mu.Lock()
	sizes := w.control[run.ID]
	w.mu.Unlock()
	// One create, then step 0's answer, then per step its result with the next step's
	// answer (one compare-and-set: see local.go).
	if len(sizes) < steps+2 {
		t.Fatalf("%d control state writes, want at least %d", len(sizes), steps+2)
	}
	early := 0
	for _, n := range sizes[1:7] { // steps 0 to 2
		early = max(early, n)
	}
	late := 0
	for _, n := range sizes[len(sizes)-7 : len(sizes)-1] { // steps 197 to 199, before the end
		late = max(late, n)
	}
	t.Logf("control state writes: %d, largest at steps 0-2: %d bytes, at steps 197-199: %d bytes", len(sizes), early, late)
	if late > early+64 {
		t.Errorf("a control state write at step 200 is %d bytes, at step 2 %d: it grows with the run", late, early)
	}
	for i, n := range sizes {
		if n > 4096 {
			t.Errorf("control state write %d is %d bytes; want it small", i, n)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for subject, n := range w.log {
		if strings.HasPrefix(subject, "toolfleet.runlog."+run.ID+".") && n > 16<<10 {
			t.Errorf("run log record %s is %d bytes; the outputs are not copied into it", subject, n)
		}
	}
}

// The run from issue 13: two echo calls of about 900 KB each, on a server whose
// max_payload is the production default of 1 MiB. The whole state used to be one value
// holding every argument and output twice, which the server refused; the run stalled
// and then ended as a timeout. It completes.
func TestTwoLargeOutputsComplete(t *testing.T) {
	const size = 900_000
	big := func(c string) string { return strings.Repeat(c, size) }
	script := fmt.Sprintf(`
name: big
steps:
  - calls:
      - {name: echo, arguments: {text: %s}}
      - {name: echo, arguments: {text: %s}}
  - text: both echoed
`, big("a"), big("b"))
	srv := natstest.StartWith(t, func(o *server.Options) { o.MaxPayload = 1 << 20 })
	b := setupOn(t, srv, nil)
	w := newWrites()
	b.hookedPlanner(t, map[string]string{"main": script}, w)
	run, err := b.p.Start(b.ctx, StartRequest{Input: "echo twice", Tools: []string{"echo"}})
	if err != nil {
		t.Fatal(err)
	}
	run = b.waitLong(t, run.ID, time.Minute)
	if run.Status != StatusDone || run.Termination != TerminationCompleted || run.Answer != "both echoed" {
		t.Fatalf("run %s %s (%s), answer %q; want completed", run.Status, run.Termination, run.Detail, run.Answer)
	}
	if len(run.Calls) != 2 {
		t.Fatalf("%d calls, want 2", len(run.Calls))
	}
	for i, c := range run.Calls {
		if c.Status != "ok" || len(c.Output) < size || len(c.Arguments) < size {
			t.Fatalf("call %d: %s, %d bytes of arguments, %d of output; want ok with both whole", i, c.Status, len(c.Arguments), len(c.Output))
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, n := range w.control[run.ID] {
		if n > 4096 {
			t.Errorf("control state write %d is %d bytes", i, n)
		}
	}
}

// A part of a run's state that can never be stored (here a model answer whose text,
// beside a call, is larger than the server's max payload; large arguments would go by
// reference) ends the run at once with a termination that says so, instead of retrying
// until the run's time limit.
func TestStateTooLargeEndsTheRun(t *testing.T) {
	script := fmt.Sprintf(`
name: huge
steps:
  - text: %s
    calls: [{name: echo, arguments: {text: small}}]
  - text: unreachable
`, strings.Repeat("z", 1_200_000))
	srv := natstest.StartWith(t, func(o *server.Options) { o.MaxPayload = 1 << 20 })
	b := setupOn(t, srv, nil)
	b.hookedPlanner(t, map[string]string{"main": script}, newWrites())
	begin := time.Now()
	run, err := b.p.Start(b.ctx, StartRequest{Input: "echo", Tools: []string{"echo"}})
	if err != nil {
		t.Fatal(err)
	}
	run = b.waitLong(t, run.ID, 30*time.Second)
	if run.Termination != TerminationStorageError || !strings.Contains(run.Detail, "maximum payload") {
		t.Fatalf("run ended %s (%s); want storage_error naming the max payload", run.Termination, run.Detail)
	}
	if d := time.Since(begin); d > 10*time.Second {
		t.Errorf("the run took %s to end", d)
	}
}

// Two planner replicas share a run's steps and results: each works from its own copy
// of the control state and its own cache of the conversation, and a stale copy only
// costs a read. The run completes with every call made once.
func TestTwoReplicasShareARun(t *testing.T) {
	const steps = 8
	var script strings.Builder
	script.WriteString("name: shared\nsteps:\n")
	for i := range steps {
		fmt.Fprintf(&script, "  - calls: [{name: add, arguments: {a: %d, b: 1}}, {name: echo, arguments: {text: s%d}}]\n", i, i)
	}
	script.WriteString("  - text: done\n")
	b := setup(t, map[string]string{"main": script.String()})
	second, err := New(b.ctx, b.srv.Connect(), Config{Models: map[string]provider.Model{"main": scriptedModel(t, script.String())},
		DefaultModel: "main", Events: b.cfg, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	serve(t, second.Run)
	runs := make([]*Run, 4)
	for i := range runs {
		run, err := b.p.Start(b.ctx, StartRequest{Input: "go", Tools: []string{"add", "echo"}, Limits: Limits{MaxSteps: steps + 1}})
		if err != nil {
			t.Fatal(err)
		}
		runs[i] = run
	}
	for _, r := range runs {
		run := b.waitLong(t, r.ID, time.Minute)
		if run.Termination != TerminationCompleted || len(run.Calls) != 2*steps {
			t.Fatalf("run %s ended %s (%s) with %d calls; want completed with %d", run.ID, run.Termination, run.Detail, len(run.Calls), 2*steps)
		}
		for i, c := range run.Calls {
			if c.Status != "ok" || c.Step != i/2 {
				t.Fatalf("call %d: %s at step %d", i, c.Status, c.Step)
			}
		}
		if len(run.Messages) != 1+2*steps+1 {
			t.Fatalf("%d messages, want %d", len(run.Messages), 1+2*steps+1)
		}
	}
	// Each call has its one stored result.
	for _, r := range runs {
		for s := range steps {
			for n := range 2 {
				subj, _ := events.ResultSubject("", r.ID, callID(r.ID, s, n))
				results, err := b.js.Stream(b.ctx, b.cfg.ResultStream(subj))
				if err != nil {
					t.Fatal(err)
				}
				if _, err := results.GetLastMsgForSubject(b.ctx, subj); err != nil {
					t.Fatalf("result of call %d of step %d: %v", n, s, err)
				}
			}
		}
	}
}

// A result that comes back before its step's state is stored (a step's calls go out
// while it is stored) waits for it instead of being dropped: here the result is
// published while the model is still thinking, before the call exists anywhere.
func TestResultBeforeItsStepIsStored(t *testing.T) {
	b := setup(t, nil)
	script := `
name: early
steps:
  - calls: [{name: add, arguments: {a: 1, b: 2}}]
  - text: done
`
	p, err := New(b.ctx, b.srv.Connect(), Config{Models: map[string]provider.Model{"main": slowModel{scriptedModel(t, script), 500 * time.Millisecond}},
		DefaultModel: "main", Events: b.cfg, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	b.stopPlanner()
	serve(t, p.Run)
	b.p = p
	run, err := p.Start(b.ctx, StartRequest{Input: "1+2", Tools: []string{"add"}})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := events.NewResult("/test", events.Result{Status: events.StatusOK, Output: json.RawMessage(`{"sum":99}`),
		Attempts: 1, Executor: "early", Validated: true, Tool: "add", CallID: callID(run.ID, 0, 0), RunID: run.ID}, 1)
	if err != nil {
		t.Fatal(err)
	}
	msg.Subject = b.cfg.ResultPublishSubject(msg.Subject)
	if _, err := b.js.PublishMsg(b.ctx, msg); err != nil {
		t.Fatal(err)
	}
	done := b.wait(t, run.ID)
	if done.Termination != TerminationCompleted || len(done.Calls) != 1 || string(done.Calls[0].Output) != `{"sum":99}` || done.Calls[0].Executor != "early" {
		t.Fatalf("run ended %s (%s) with calls %+v; want the early result recorded", done.Termination, done.Detail, done.Calls)
	}
}

// countingModel counts the model's answers.
type countingModel struct {
	provider.Model
	mu sync.Mutex
	n  int
}

func (m *countingModel) Stream(ctx context.Context, req provider.Request, onDelta func(provider.Delta)) (*provider.Response, error) {
	resp, err := m.Generate(ctx, req)
	return streamed(onDelta, resp, err)
}

func (m *countingModel) Generate(ctx context.Context, req provider.Request) (*provider.Response, error) {
	m.mu.Lock()
	m.n++
	m.mu.Unlock()
	return m.Model.Generate(ctx, req)
}

// A step whose record was written but whose state could not be stored (here the first
// compare-and-set of a step fails) is taken again from its record when its message
// comes back: the model is not asked twice, the calls run once, the run completes.
func TestStepRecordedButNotStoredIsNotAskedAgain(t *testing.T) {
	b := setup(t, nil)
	model := &countingModel{Model: scriptedModel(t, `
name: once
steps:
  - calls: [{name: add, arguments: {a: 1, b: 2}}]
  - text: three
`)}
	p, err := New(b.ctx, b.srv.Connect(), Config{Models: map[string]provider.Model{"main": model},
		DefaultModel: "main", Events: b.cfg, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	writes := 0
	p.runs.Wrote = func(string, []byte) error {
		mu.Lock()
		defer mu.Unlock()
		writes++
		if writes == 2 { // the create, then step 0's state
			return errors.New("injected: the server is gone")
		}
		return nil
	}
	b.stopPlanner()
	serve(t, p.Run)
	b.p = p
	run := b.run(t, StartRequest{Input: "1+2", Tools: []string{"add"}})
	if run.Termination != TerminationCompleted || run.Answer != "three" || len(run.Calls) != 1 || run.Calls[0].Status != "ok" {
		t.Fatalf("run ended %s (%s), answer %q, calls %+v", run.Termination, run.Detail, run.Answer, run.Calls)
	}
	model.mu.Lock()
	defer model.mu.Unlock()
	if model.n != 2 {
		t.Fatalf("the model answered %d times, want 2 (one per step)", model.n)
	}
}

// A 5 MB output reaches the model by reference: the executor stores it in the payload
// bucket (the result carries its reference), the planner reads it back, the run keeps it
// whole, and the model sees it cut to the run's context budget with the call id as its
// handle.
func TestFiveMegabyteOutputByReference(t *testing.T) {
	const size = 5 << 20
	b := setup(t, map[string]string{"main": `
steps:
  - calls: [{name: dump, arguments: {}}]
  - text: dumped
`})
	startExecutor(t, b, tools.Definition{Type: "function", Name: "dump", Description: "Returns 5 MB.", Safe: true,
		Parameters: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, json.RawMessage) (any, error) { return strings.Repeat("z", size), nil })
	run, err := b.p.Start(b.ctx, StartRequest{Input: "dump it", Tools: []string{"dump"}})
	if err != nil {
		t.Fatal(err)
	}
	run = b.waitLong(t, run.ID, time.Minute)
	if run.Termination != TerminationCompleted || len(run.Calls) != 1 || run.Calls[0].Status != "ok" || len(run.Calls[0].Output) != size+2 {
		t.Fatalf("run %s (%s), calls %d; want completed with the 5 MB output whole", run.Termination, run.Detail, len(run.Calls))
	}
	subj, _ := events.ResultSubject("", run.ID, run.Calls[0].ID)
	stream, err := b.js.Stream(b.ctx, b.cfg.ResultStream(subj))
	if err != nil {
		t.Fatal(err)
	}
	m, err := stream.GetLastMsgForSubject(b.ctx, subj)
	if err != nil {
		t.Fatal(err)
	}
	var stored events.Result
	if err := json.Unmarshal(m.Data, &stored); err != nil || stored.OutputRef == nil || stored.OutputRef.Size != size+2 || len(m.Data) > 4096 {
		t.Fatalf("stored result (%d bytes): ref %+v, %v; want a small result holding the reference", len(m.Data), stored.OutputRef, err)
	}
	tool := run.Messages[2]
	if tool.Role != provider.RoleTool || len(tool.ToolResults[0].Content) > 2*runrec.DefaultContextBudget ||
		!strings.Contains(string(tool.ToolResults[0].Content), run.Calls[0].ID) {
		t.Fatalf("the model saw %d bytes (%.200s); want the output cut to the context budget with the call id", len(tool.ToolResults[0].Content), tool.ToolResults[0].Content)
	}
}
