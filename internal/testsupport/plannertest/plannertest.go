// Package plannertest holds what the planner's tests and its HTTP API's tests share: a
// fleet on a real embedded JetStream whose executor serves the test tools ([Tools]),
// scripted models ([Model], [KeptModel]), the scripts several tests run, and helpers
// that serve a part until the test ends ([Serve], [ServeStoppable]).
//
// It does not import the planner: the planner's own tests (package planner, which reach
// its internals) import it, and Go allows no import cycle. Each of the two test packages
// starts its planner on a [Fleet] in its own setup (setup_test.go).
package plannertest

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
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
	"github.com/toolfleet/toolfleet/pkg/toolsfile"
)

// WaitTimeout bounds the planner tests' waits (natstest.Eventually).
const WaitTimeout = 20 * time.Second

// AnswerScript answers at once, without a call.
const AnswerScript = `
name: answer
steps:
  - text: hello there
`

// ApprovalScript calls delete_all, which waits for an approval, then answers "deleted",
// or "not allowed" when the call was denied.
const ApprovalScript = `
steps:
  - calls: [{name: delete_all, arguments: {where: staging}}]
  - when: {error: true, contains: denied}
    text: not allowed
  - text: deleted
`

// StopScript calls add, then echo ("the treasure is here") and add at once, then add
// again, and answers "the end": for stop conditions.
const StopScript = `
steps:
  - calls: [{name: add, arguments: {a: 1, b: 1}}]
  - calls: [{name: echo, arguments: {text: the treasure is here}}, {name: add, arguments: {a: 2, b: 3}}]
  - calls: [{name: add, arguments: {a: 3, b: 3}}]
  - text: the end
`

// Tools are served by a real executor in every fleet.
var Tools = []struct {
	Def tools.Definition
	Fn  tools.Func
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

// Fleet is JetStream on a test's server with the toolfleet streams, and an executor
// serving [Tools] on it until the test ends.
type Fleet struct {
	Srv *natstest.Server
	NC  *nats.Conn
	JS  jetstream.JetStream
	Cfg events.Config
	// Ctx ends with the test, or after 60 seconds.
	Ctx context.Context
}

// StartFleet sets up JetStream on srv (a short ack wait) and serves [Tools] from an
// executor (with opts: e.g. the operator roles its planner has) until the test ends.
func StartFleet(t testing.TB, srv *natstest.Server, opts ...executor.Option) *Fleet {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	fx := natstest.JetStreamOn(t, srv, events.Config{AckWait: tools.Duration(5 * time.Second)})
	reg := tools.NewRegistry()
	for _, tt := range Tools {
		if err := reg.AddFunc(tt.Def, tt.Fn); err != nil {
			t.Fatal(err)
		}
	}
	opts = append([]executor.Option{executor.WithStreamConfig(fx.Cfg), executor.WithLogger(zerolog.Nop())}, opts...)
	ex, err := executor.New(fx.Srv.Connect(), reg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	Serve(t, ex.Run)
	return &Fleet{Srv: fx.Srv, NC: fx.NC, JS: fx.JS, Cfg: fx.Cfg, Ctx: ctx}
}

// StartExecutor serves one more tool from its own executor (with opts) on srv's streams
// of cfg until the test ends. The caller waits for its planner's catalog to list it.
func StartExecutor(t testing.TB, srv *natstest.Server, cfg events.Config, def tools.Definition, fn tools.Func, opts ...executor.Option) {
	t.Helper()
	reg := tools.NewRegistry()
	if err := reg.AddFunc(def, fn); err != nil {
		t.Fatal(err)
	}
	opts = append([]executor.Option{executor.WithStreamConfig(cfg), executor.WithLogger(zerolog.Nop())}, opts...)
	ex, err := executor.New(srv.Connect(), reg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	Serve(t, ex.Run)
}

// StartToolsFile writes file (a tools file's JSON) in dir and serves its tools from an
// executor of its own, "file" (with opts), on srv's streams of cfg until the test ends or
// stop is called. The caller waits for its planner's catalog to list them.
func StartToolsFile(t testing.TB, ctx context.Context, srv *natstest.Server, cfg events.Config, dir string, file map[string]any,
	opts ...executor.Option) (stop func()) {
	t.Helper()
	data, err := json.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "tools.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := toolsfile.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	reg := tools.NewRegistry()
	servers, err := f.Start(ctx, reg, zerolog.Nop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(servers.Close)
	opts = append([]executor.Option{executor.WithStreamConfig(cfg), executor.WithLogger(zerolog.Nop()), executor.WithExecutorID("file")}, opts...)
	ex, err := executor.New(srv.Connect(), reg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return ServeStoppable(t, ex.Run)
}

// StartPicker runs the picker service on srv until the test ends.
func StartPicker(t testing.TB, srv *natstest.Server) {
	t.Helper()
	svc, err := pickerservice.New(srv.Connect(), pickerservice.WithLogger(zerolog.Nop()))
	if err != nil {
		t.Fatal(err)
	}
	Serve(t, svc.Run)
}

// Serve runs run in the background until the test ends, then cancels its context and
// waits for it to return.
func Serve(t testing.TB, run func(context.Context) error) {
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	t.Cleanup(func() { stop(); <-done })
}

// ServeStoppable runs run in the background until the test ends or stop is called,
// whichever comes first; stop cancels its context and waits (at most 10s) for it to
// return. For a planner that other planners take over from, an executor that stops.
func ServeStoppable(t testing.TB, run func(context.Context) error) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Error("the part did not stop within 10s")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// Model is the scripted model of a YAML script.
func Model(t testing.TB, script string) provider.Model {
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

// Models are the scripted models of scripts (name → YAML script; none: "main" answering
// with [AnswerScript]), and the default model: "main" when there is one.
func Models(t testing.TB, scripts map[string]string) (models map[string]provider.Model, defaultModel string) {
	t.Helper()
	if len(scripts) == 0 {
		scripts = map[string]string{"main": AnswerScript}
	}
	models = map[string]provider.Model{}
	for name, script := range scripts {
		models[name] = Model(t, script)
	}
	if _, ok := scripts["main"]; ok {
		defaultModel = "main"
	}
	return models, defaultModel
}

// StoredResult reads the result the executor stored for a call of a run.
func StoredResult(t testing.TB, ctx context.Context, js jetstream.JetStream, cfg events.Config, runID, callID string) events.Result {
	t.Helper()
	subject, err := events.ResultSubject("", runID, callID)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, cfg.ResultStream(subject))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := s.GetLastMsgForSubject(ctx, subject)
	if err != nil {
		t.Fatal(err)
	}
	_, res, err := events.DecodeResult(events.StoredMsg(raw))
	if err != nil {
		t.Fatal(err)
	}
	return res
}
