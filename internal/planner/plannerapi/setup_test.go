package plannerapi

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/planner"
	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/internal/testsupport/plannertest"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/executor"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// The planner's own tests (package planner) have a bundle of the same shape over its
// internals: what needs no planner type is shared in plannertest, which cannot import
// the planner (its tests import plannertest).

// testBundle is a planner on a real embedded JetStream with a catalog and scripted models.
type testBundle struct {
	srv *natstest.Server
	nc  *nats.Conn
	js  jetstream.JetStream
	cfg events.Config
	p   *planner.Planner
	ctx context.Context
	// stopPlanner stops the bundle's planner from serving.
	stopPlanner func()
}

// setup starts a fleet and a planner whose models are the scripts (name → YAML script).
func setup(t testing.TB, scripts map[string]string) *testBundle {
	t.Helper()
	return setupFleet(t, scripts)
}

// setupFleet is setup with the fleet's executor given opts.
func setupFleet(t testing.TB, scripts map[string]string, opts ...executor.Option) *testBundle {
	t.Helper()
	f := plannertest.StartFleet(t, natstest.Start(t), opts...)
	models, defaultModel := plannertest.Models(t, scripts)
	p, err := planner.New(f.Ctx, f.Srv.Connect(), planner.Config{Models: models, DefaultModel: defaultModel, Events: f.Cfg, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	stopPlanner := plannertest.ServeStoppable(t, p.Run)
	natstest.Eventually(t, waitTimeout, "the planner's catalog", func() bool { _, ok := p.Tool("delete_all"); return ok })
	return &testBundle{srv: f.Srv, nc: f.NC, js: f.JS, cfg: f.Cfg, p: p, ctx: f.Ctx, stopPlanner: stopPlanner}
}

// startExecutor serves one more tool from its own executor (with opts) until the test ends.
func startExecutor(t testing.TB, b *testBundle, def tools.Definition, fn tools.Func, opts ...executor.Option) {
	t.Helper()
	plannertest.StartExecutor(t, b.srv, b.cfg, def, fn, opts...)
	natstest.Eventually(t, waitTimeout, "the catalog to list "+def.Name, func() bool { _, ok := b.p.Tool(def.Name); return ok })
}

const (
	waitTimeout    = plannertest.WaitTimeout
	answerScript   = plannertest.AnswerScript
	approvalScript = plannertest.ApprovalScript
)

// swapPlanner stops the bundle's planner and serves runs with one built from cfg (on the
// bundle's streams, logging nowhere) until the test ends; b.p becomes the new planner.
func (b *testBundle) swapPlanner(t testing.TB, cfg planner.Config) *planner.Planner {
	t.Helper()
	cfg.Events, cfg.Log = b.cfg, zerolog.Nop()
	p, err := planner.New(b.ctx, b.srv.Connect(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	b.stopPlanner()
	plannertest.Serve(t, p.Run)
	b.p = p
	return p
}

// withModels serves the bundle's runs with a planner whose models are the scripts,
// each counted.
func (b *testBundle) withModels(t *testing.T, scripts map[string]string) map[string]*plannertest.KeptModel {
	t.Helper()
	counted := map[string]*plannertest.KeptModel{}
	models := map[string]provider.Model{}
	for name, s := range scripts {
		counted[name] = &plannertest.KeptModel{Model: plannertest.Model(t, s)}
		models[name] = counted[name]
	}
	b.swapPlanner(t, planner.Config{Models: models, DefaultModel: "main"})
	return counted
}

// run starts a run and waits for it to end.
func (b *testBundle) run(t *testing.T, req planner.StartRequest) *planner.Run {
	t.Helper()
	run, err := b.p.Start(b.ctx, req)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	return b.wait(t, run.ID)
}

// wait waits for the run id to end.
func (b *testBundle) wait(t *testing.T, id string) *planner.Run {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	run, err := b.p.Wait(ctx, id)
	if err != nil {
		t.Fatalf("wait for run %s: %v (run: %+v)", id, err, run)
	}
	return run
}

// awaitApproval waits until the run's first call waits for an approval and returns it.
func (b *testBundle) awaitApproval(t *testing.T, runID string) *planner.CallRecord {
	t.Helper()
	var c *planner.CallRecord
	natstest.Eventually(t, waitTimeout, "an approval request", func() bool {
		run, err := b.p.Get(b.ctx, runID)
		if err != nil || len(run.Calls) == 0 {
			return false
		}
		c = run.Calls[0]
		return c.Status == string(planner.CallAwaitingApproval)
	})
	return c
}

// startApproval starts a run of approvalScript and waits until its call of delete_all
// waits for an approval.
func (b *testBundle) startApproval(t *testing.T) (*planner.Run, *planner.CallRecord) {
	t.Helper()
	run, err := b.p.Start(b.ctx, planner.StartRequest{Input: "clean up", Tools: []string{"delete_all"}})
	if err != nil {
		t.Fatal(err)
	}
	return run, b.awaitApproval(t, run.ID)
}

// awaitCallStatus waits until the run's call has status and returns the run.
func (b *testBundle) awaitCallStatus(t *testing.T, runID, callID, status string) *planner.Run {
	t.Helper()
	var run *planner.Run
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

// callID0 is the id of the first call of a run's first step.
func callID0(run string) string { return callID(run, 0, 0) }

// newLongTool serves a plannertest.LongTool named name until the test ends.
func newLongTool(t *testing.T, b *testBundle, name string, idempotent bool) *plannertest.LongTool {
	t.Helper()
	lt, def, fn := plannertest.NewLongTool(name, idempotent)
	startExecutor(t, b, def, fn)
	return lt
}

// wantRefused asserts that the planner answered the call itself, with code and a message
// that says contains.
func wantRefused(t *testing.T, c *planner.CallRecord, code tools.Code, contains string) {
	t.Helper()
	if !c.Local || c.Error == nil || c.Error.Code != code || c.Executor != "" || c.Attempts != 0 {
		t.Fatalf("call %s %s = %+v; want it answered locally with %s", c.ID, c.Name, c, code)
	}
	if !strings.Contains(c.Error.Message, contains) {
		t.Fatalf("call %s: message %q does not say %q", c.ID, c.Error.Message, contains)
	}
}

// callID is the planner's id of call n of a run's step (<run>-<step>-<n>), which the
// tests check events and records against.
func callID(run string, step, n int) string { return fmt.Sprintf("%s-%d-%d", run, step, n) }

// offered returns what run's step offered the model (its last record), or nil.
func offered(r *planner.Run, step int) *planner.StepTools {
	for i := len(r.Offered) - 1; i >= 0; i-- {
		if r.Offered[i].Step == step {
			return &r.Offered[i]
		}
	}
	return nil
}
