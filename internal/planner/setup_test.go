package planner

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/pickerservice"
	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
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

// testTools are served by a real executor in every test bundle.
var testTools = []struct {
	def tools.Definition
	fn  tools.Func
}{
	{tools.Definition{Type: "function", Name: "add", Description: "Add two integers.", Safe: true,
		Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"],"additionalProperties":false}`)},
		func(_ context.Context, args json.RawMessage) (any, error) {
			var in struct{ A, B int }
			if err := json.Unmarshal(args, &in); err != nil {
				return nil, err
			}
			return map[string]int{"sum": in.A + in.B}, nil
		}},
	{tools.Definition{Type: "function", Name: "echo", Description: "Echo the input.", Safe: true,
		Parameters: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)},
		func(_ context.Context, args json.RawMessage) (any, error) { return args, nil }},
	{tools.Definition{Type: "function", Name: "fail", Description: "Always fails.", Safe: true,
		Parameters: json.RawMessage(`{"type":"object"}`), Retry: &tools.RetryPolicy{MaxRetries: new(int)}},
		func(context.Context, json.RawMessage) (any, error) { return nil, errors.New("the disk is on fire") }},
	{tools.Definition{Type: "function", Name: "finish", Description: "Ends the run with its input.", Safe: true, Final: true,
		Parameters: json.RawMessage(`{"type":"object","properties":{"answer":{"type":"string"}}}`)},
		func(_ context.Context, args json.RawMessage) (any, error) { return args, nil }},
	{tools.Definition{Type: "function", Name: "delete_all", Description: "Deletes everything.", Safe: false,
		Parameters: json.RawMessage(`{"type":"object","properties":{"where":{"type":"string"}},"required":["where"]}`)},
		func(_ context.Context, args json.RawMessage) (any, error) {
			return map[string]any{"deleted": args}, nil
		}},
	{tools.Definition{Type: "function", Name: "slow", Description: "Waits until cancelled.", Safe: true,
		Parameters: json.RawMessage(`{"type":"object"}`), Timeout: tools.Duration(time.Minute)},
		func(ctx context.Context, _ json.RawMessage) (any, error) { <-ctx.Done(); return nil, ctx.Err() }},
}

// scripts names scripted models for the bundle: name → YAML script.
func setup(t testing.TB, scripts map[string]string) *testBundle {
	t.Helper()
	return setupOn(t, natstest.Start(t), scripts)
}

// setupOn is setup on a server the test started.
func setupOn(t testing.TB, srv *natstest.Server, scripts map[string]string) *testBundle {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	fx := natstest.JetStreamOn(t, srv, events.Config{AckWait: tools.Duration(5 * time.Second)})
	srv, nc, js, cfg := fx.Srv, fx.NC, fx.JS, fx.Cfg
	reg := tools.NewRegistry()
	for _, tt := range testTools {
		if err := reg.AddFunc(tt.def, tt.fn); err != nil {
			t.Fatal(err)
		}
	}
	ex, err := executor.New(srv.Connect(), reg, executor.WithStreamConfig(cfg), executor.WithLogger(zerolog.Nop()))
	if err != nil {
		t.Fatal(err)
	}
	serve(t, ex.Run)
	if len(scripts) == 0 {
		scripts = map[string]string{"main": answerScript}
	}
	models := map[string]provider.Model{}
	for name, script := range scripts {
		models[name] = scriptedModel(t, script)
	}
	defaultModel := ""
	if _, ok := scripts["main"]; ok {
		defaultModel = "main"
	}
	p, err := New(ctx, srv.Connect(), Config{Models: models, DefaultModel: defaultModel, Events: cfg, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(runCtx) }()
	var once sync.Once
	stopPlanner := func() {
		once.Do(func() {
			stop()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Error("planner did not stop within 10s")
			}
		})
	}
	t.Cleanup(stopPlanner)
	natstest.Eventually(t, waitTimeout, "the planner's catalog", func() bool { _, ok := p.cat.get("delete_all"); return ok })
	return &testBundle{srv: srv, nc: nc, js: js, cfg: cfg, p: p, ctx: ctx, stopPlanner: stopPlanner}
}

// startExecutor serves one more tool from its own executor (with opts) until the test ends.
func startExecutor(t testing.TB, b *testBundle, def tools.Definition, fn tools.Func, opts ...executor.Option) {
	t.Helper()
	reg := tools.NewRegistry()
	if err := reg.AddFunc(def, fn); err != nil {
		t.Fatal(err)
	}
	opts = append([]executor.Option{executor.WithStreamConfig(b.cfg), executor.WithLogger(zerolog.Nop())}, opts...)
	ex, err := executor.New(b.srv.Connect(), reg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	serve(t, ex.Run)
	natstest.Eventually(t, waitTimeout, "the catalog to list "+def.Name, func() bool { _, ok := b.p.cat.get(def.Name); return ok })
}

// waitTimeout bounds the planner tests' waits (natstest.Eventually).
const waitTimeout = 20 * time.Second

const answerScript = `
name: answer
steps:
  - text: hello there
`

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
	b.p = p
	return p
}

// startPicker runs the picker service on the bundle's server until the test ends.
func startPicker(t testing.TB, b *testBundle) {
	t.Helper()
	svc, err := pickerservice.New(b.srv.Connect(), pickerservice.WithLogger(zerolog.Nop()))
	if err != nil {
		t.Fatal(err)
	}
	serve(t, svc.Run)
}

// serve runs run in the background until the test ends, then cancels its context and
// waits for it to return.
func serve(t testing.TB, run func(context.Context) error) {
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	t.Cleanup(func() { stop(); <-done })
}

// scriptedModel is the scripted model of a YAML script.
func scriptedModel(t testing.TB, script string) provider.Model {
	t.Helper()
	s, err := provider.ParseScript([]byte(script))
	if err != nil {
		t.Fatalf("script %q: %v", script, err)
	}
	m, err := provider.NewScripted(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
