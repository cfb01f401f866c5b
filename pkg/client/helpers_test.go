package client_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/executor"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// serveTool starts an embedded JetStream with a real executor serving one tool (a
// schema of any object, safe) and returns the fixture and a context that ends with the
// test or after timeout; the executor stops when the test ends.
func serveTool(t *testing.T, name string, fn tools.Func, timeout time.Duration) (*natstest.JetStream, context.Context) {
	t.Helper()
	f := natstest.StartJetStream(t, events.Config{})
	reg := tools.NewRegistry()
	if err := reg.AddFunc(tools.Definition{Name: name, Parameters: json.RawMessage(`{"type":"object"}`), Safe: true}, fn); err != nil {
		t.Fatal(err)
	}
	ex, err := executor.New(f.Srv.Connect(), reg, executor.WithStreamConfig(f.Cfg))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	done := make(chan error, 1)
	go func() { done <- ex.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	<-ex.Ready()
	return f, ctx
}
