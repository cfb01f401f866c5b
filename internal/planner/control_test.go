package planner

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/internal/testsupport/plannertest"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// withModels serves the bundle's runs with a planner whose models are the scripts,
// each counted.
func (b *testBundle) withModels(t *testing.T, scripts map[string]string) map[string]*plannertest.KeptModel {
	t.Helper()
	counted := map[string]*plannertest.KeptModel{}
	models := map[string]provider.Model{}
	for name, s := range scripts {
		counted[name] = &plannertest.KeptModel{Model: scriptedModel(t, s)}
		models[name] = counted[name]
	}
	b.swapPlanner(t, Config{Models: models, DefaultModel: "main"})
	return counted
}

// newLongTool serves a plannertest.LongTool named name until the test ends.
func newLongTool(t *testing.T, b *testBundle, name string, idempotent bool) *plannertest.LongTool {
	t.Helper()
	lt, def, fn := plannertest.NewLongTool(name, idempotent)
	startExecutor(t, b, def, fn)
	return lt
}

// awaitCallStatus waits until the run's call has status and returns the run.
func (b *testBundle) awaitCallStatus(t *testing.T, runID, callID, status string) *Run {
	t.Helper()
	var run *Run
	natstest.EventuallyNil(t, waitTimeout, "call "+callID+" to be "+status, func() error {
		var err error
		if run, err = b.p.Get(b.ctx, runID); err != nil {
			return err
		}
		seen := make([]string, 0, len(run.Calls))
		for _, c := range run.Calls {
			if c.ID == callID && c.Status == status {
				return nil
			}
			seen = append(seen, c.ID+" "+c.Status)
		}
		return fmt.Errorf("the run's calls are %v", seen)
	})
	return run
}

const parentScript = `
steps:
  - calls: [{name: run_agent, arguments: {task: wait, tools: [long], model: child}}]
  - text: the parent was asked again
`

// A run canceled over NATS (request/reply on its cancel subject, for its tenant) ends
// canceled, and its nested runs with it: the child's running call is canceled. The
// subject's tenant decides whose runs it may cancel.
func TestCancelARunOverNATSWithItsChildren(t *testing.T) {
	b := setup(t, nil)
	long := newLongTool(t, b, "long", true)
	models := b.withModels(t, map[string]string{"main": parentScript, "child": plannertest.LongScript})
	run, err := b.p.Start(b.ctx, StartRequest{Input: "delegate", Tools: []string{AgentToolName, "long"},
		Caller: events.Identity{Tenant: "acme", Role: "user"}})
	if err != nil {
		t.Fatal(err)
	}
	callID := plannertest.Recv(t, long.Started, "the child's long tool to start")
	child := childID(callID0(run.ID))

	ask := func(tenant string) ControlReply {
		t.Helper()
		subj, err := events.RunCancelSubject(events.Identity{Tenant: tenant, Role: "user"}, run.ID)
		if err != nil {
			t.Fatal(err)
		}
		msg, err := b.nc.Request(subj, []byte(`{"reason":"enough"}`), waitTimeout)
		if err != nil {
			t.Fatal(err)
		}
		var reply ControlReply
		if err := json.Unmarshal(msg.Data, &reply); err != nil {
			t.Fatal(err)
		}
		return reply
	}
	if r := ask("globex"); r.Status != http.StatusNotFound || r.Run != nil {
		t.Fatalf("globex's cancel: %+v, want 404", r)
	}
	if r := ask("acme"); r.Status != http.StatusOK || r.Run == nil || r.Run.Termination != TerminationCanceled {
		t.Fatalf("acme's cancel: %+v", r)
	}
	plannertest.Recv(t, long.Stopped, "the child's long tool to see its context end")
	b.awaitCallStatus(t, child, callID, string(events.StatusCanceled))
	got, err := b.p.Wait(b.ctx, child)
	if err != nil || got.Termination != TerminationCanceled || got.Canceled == nil {
		t.Fatalf("child ended %s, %v", got.Termination, err)
	}
	if r := ask("acme"); r.Status != http.StatusConflict || r.Run == nil {
		t.Fatalf("second cancel: %+v, want 409 with the run", r)
	}
	// The child's end answers the parent's call (recorded), and neither asks its model again.
	b.awaitCallStatus(t, run.ID, callID0(run.ID), string(events.StatusError))
	if models["main"].Calls() != 1 || models["child"].Calls() != 1 {
		t.Fatalf("model calls after the cancel: parent %d, child %d; want 1 each", models["main"].Calls(), models["child"].Calls())
	}
}

// callID0 is the id of the first call of a run's first step.
func callID0(run string) string { return callID(run, 0, 0) }

// With parallel false, a step's calls run one after another in the model's order: as
// the executor saw them, each started after the one before had finished.
func TestSequentialCalls(t *testing.T) {
	b := setup(t, map[string]string{"main": `
steps:
  - calls:
      - {name: stamp, arguments: {n: 1}}
      - {name: stamp, arguments: {n: 2}}
      - {name: stamp, arguments: {n: 3}}
  - text: stamped
`})
	type span struct {
		n          int
		start, end time.Time
	}
	var mu sync.Mutex
	var spans []span
	startExecutor(t, b, tools.Definition{Type: "function", Name: "stamp", Description: "Notes when it ran.", Safe: true,
		Parameters: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)},
		func(_ context.Context, args json.RawMessage) (any, error) {
			var in struct{ N int }
			if err := json.Unmarshal(args, &in); err != nil {
				return nil, err
			}
			s := span{n: in.N, start: time.Now()}
			time.Sleep(5 * time.Millisecond)
			s.end = time.Now()
			mu.Lock()
			spans = append(spans, s)
			mu.Unlock()
			return in.N, nil
		})
	run := b.run(t, StartRequest{Input: "stamp three times", Tools: []string{"stamp"}, Parallel: new(false)})
	if run.Termination != TerminationCompleted || len(run.Calls) != 3 || !run.Sequential {
		t.Fatalf("run ended %s (%s) with %d calls, sequential %v", run.Termination, run.Detail, len(run.Calls), run.Sequential)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(spans) != 3 {
		t.Fatalf("the tool ran %d times, want 3", len(spans))
	}
	for i, s := range spans {
		if s.n != i+1 {
			t.Fatalf("call %d ran as number %d: %+v", s.n, i+1, spans)
		}
		if i > 0 && s.start.Before(spans[i-1].end) {
			t.Fatalf("call %d started before call %d finished: %+v", s.n, spans[i-1].n, spans)
		}
	}
	// Each call's record is its own: it was called when the one before had finished, so
	// its duration is not its wait behind the calls before it.
	for i := 1; i < len(run.Calls); i++ {
		prev, c := run.Calls[i-1], run.Calls[i]
		if prev.FinishedAt == nil || c.CalledAt.Before(*prev.FinishedAt) {
			t.Errorf("call %d calledAt %s, before call %d finished (%v)", i, c.CalledAt, i-1, prev.FinishedAt)
		}
	}
}
