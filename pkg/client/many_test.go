package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/internal/natstest"
	"github.com/toolfleet/toolfleet/pkg/client"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/executor"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// A long-lived client makes many calls: more than the server's consumers per stream
// (1,000 by default) within minutes. Each call's wait must leave nothing behind on the
// server that outlives it for long, or the calls after the thousandth fail.
func TestManyCallsLeaveNoConsumersBehind(t *testing.T) {
	if testing.Short() {
		t.Skip("makes 1,200 calls")
	}
	t.Parallel()
	f := natstest.StartJetStream(t, events.Config{})
	reg := tools.NewRegistry()
	if err := reg.AddFunc(tools.Definition{Name: "echo", Parameters: json.RawMessage(`{"type":"object"}`), Safe: true},
		func(_ context.Context, args json.RawMessage) (any, error) { return args, nil }); err != nil {
		t.Fatal(err)
	}
	ex, err := executor.New(f.Srv.Connect(), reg, executor.WithStreamConfig(f.Cfg))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- ex.Run(ctx) }()
	defer func() { cancel(); <-done }()
	<-ex.Ready()
	c, err := client.New(f.NC)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1200 {
		args := json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))
		res, err := c.Call(ctx, client.Request{Tool: "echo", Arguments: args})
		if err != nil || string(res.Output) != string(args) {
			t.Fatalf("call %d: %s, %v", i, res.Output, err)
		}
	}
}
