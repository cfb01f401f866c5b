package planner

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/internal/testsupport/plannertest"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/executor"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// testBundle is a planner on a real embedded JetStream with a catalog and scripted models.
type testBundle struct {
	srv *natstest.Server
	nc  *nats.Conn
	js  jetstream.JetStream
	cfg events.Config
	p   *Planner
	ctx context.Context
	// stopPlanner stops the bundle's planner from serving (it can still start and read
	// runs), for tests where other planners take the steps.
	stopPlanner func()
}

// scripts names scripted models for the bundle: name → YAML script.
func setup(t testing.TB, scripts map[string]string) *testBundle {
	t.Helper()
	return setupOn(t, natstest.Start(t), scripts)
}

// setupOn is setup on a server the test started.
func setupOn(t testing.TB, srv *natstest.Server, scripts map[string]string) *testBundle {
	t.Helper()
	f := plannertest.StartFleet(t, srv)
	models, defaultModel := plannertest.Models(t, scripts)
	p, err := New(f.Ctx, f.Srv.Connect(), Config{Models: models, DefaultModel: defaultModel, Events: f.Cfg, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	stopPlanner := plannertest.ServeStoppable(t, p.Run)
	waitForFleetTools(t, p)
	return &testBundle{srv: f.Srv, nc: f.NC, js: f.JS, cfg: f.Cfg, p: p, ctx: f.Ctx, stopPlanner: stopPlanner}
}

// startExecutor serves one more tool from its own executor (with opts) until the test ends.
func startExecutor(t testing.TB, b *testBundle, def tools.Definition, fn tools.Func, opts ...executor.Option) {
	t.Helper()
	plannertest.StartExecutor(t, b.srv, b.cfg, def, fn, opts...)
	natstest.Eventually(t, waitTimeout, "the catalog to list "+def.Name, func() bool { _, ok := b.p.cat.get(def.Name); return ok })
}

// waitTimeout bounds the planner tests' waits (natstest.Eventually).
const waitTimeout = plannertest.WaitTimeout

// swapPlanner stops the bundle's planner and serves runs with one built from cfg (on the
// bundle's streams, logging nowhere) until the test ends; b.p becomes the new planner.
func (b *testBundle) swapPlanner(t testing.TB, cfg Config) *Planner {
	t.Helper()
	cfg.Events, cfg.Log = b.cfg, zerolog.Nop()
	p, err := New(b.ctx, b.srv.Connect(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	b.stopPlanner()
	serve(t, p.Run)
	waitForFleetTools(t, p)
	b.p = p
	return p
}

// waitForFleetTools waits until p's catalog lists every tool of the test fleet: each
// executor entry lands on its own, so one tool listed says nothing of the others.
func waitForFleetTools(t testing.TB, p *Planner) {
	t.Helper()
	for _, tt := range plannertest.Tools {
		natstest.Eventually(t, waitTimeout, "the planner's catalog to list "+tt.Def.Name, func() bool { _, ok := p.cat.get(tt.Def.Name); return ok })
	}
}

// startPicker runs the picker service on the bundle's server until the test ends.
func startPicker(t testing.TB, b *testBundle) { plannertest.StartPicker(t, b.srv) }

// serve runs run in the background until the test ends, then cancels its context and
// waits for it to return.
func serve(t testing.TB, run func(context.Context) error) { plannertest.Serve(t, run) }

// scriptedModel is the scripted model of a YAML script.
func scriptedModel(t testing.TB, script string) provider.Model { return plannertest.Model(t, script) }
