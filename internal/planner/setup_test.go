package planner

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/natstest"
	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// testBundle is a planner on a real embedded JetStream with a catalog and scripted models.
type testBundle struct {
	srv *natstest.Server
	nc  *nats.Conn
	js  jetstream.JetStream
	p   *Planner
	ctx context.Context
}

// testTools are put in the catalog of every test bundle.
var testTools = []tools.Definition{
	{Type: "function", Name: "add", Description: "Add two integers.", Safe: true,
		Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"],"additionalProperties":false}`)},
	{Type: "function", Name: "echo", Description: "Echo the input.", Safe: true,
		Parameters: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)},
	{Type: "function", Name: "fail", Description: "Always fails.", Safe: true,
		Parameters: json.RawMessage(`{"type":"object"}`)},
	{Type: "function", Name: "finish", Description: "Ends the run with its input.", Safe: true, Final: true,
		Parameters: json.RawMessage(`{"type":"object","properties":{"answer":{"type":"string"}}}`)},
	{Type: "function", Name: "delete_all", Description: "Deletes everything.", Safe: false,
		Parameters: json.RawMessage(`{"type":"object","properties":{"where":{"type":"string"}},"required":["where"]}`)},
}

// scripts names scripted models for the bundle: name → YAML script.
func setup(t *testing.T, scripts map[string]string) *testBundle {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	srv := natstest.Start(t)
	nc := srv.Connect()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := events.Config{CatalogTTL: tools.Duration(time.Hour)}
	if err := events.Ensure(ctx, js, cfg); err != nil {
		t.Fatal(err)
	}
	cat, err := events.OpenCatalog(ctx, js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range testTools {
		if err := cat.Put(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	models := map[string]provider.Model{}
	for name, script := range scripts {
		s, err := provider.ParseScript([]byte(script))
		if err != nil {
			t.Fatalf("script %s: %v", name, err)
		}
		m, err := provider.NewScripted(s)
		if err != nil {
			t.Fatal(err)
		}
		models[name] = m
	}
	defaultModel := ""
	if _, ok := scripts["main"]; ok {
		defaultModel = "main"
	}
	p, err := New(ctx, nc, Config{Models: models, DefaultModel: defaultModel, Events: cfg, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("planner did not stop within 10s")
		}
	})
	waitFor(t, "the planner's catalog", func() bool { _, ok := p.cat.get("delete_all"); return ok })
	return &testBundle{srv: srv, nc: nc, js: js, p: p, ctx: ctx}
}

// waitFor polls cond until it holds or 20 seconds pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

const answerScript = `
name: answer
steps:
  - text: hello there
`
