package executorcli

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/ops"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/internal/testsupport/opstest"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// Run serves on an embedded JetStream until its context ends: the ops server's probes
// and metrics answer, a call gets its result, the start is logged with what it serves,
// and the older ops address variable works with one warning.
func TestRun(t *testing.T) {
	opstest.Env(t, nil)
	srv := natstest.Start(t)
	addr := opstest.FreeAddr(t)
	t.Setenv("TOOLFLEET_METRICS_ADDR", addr)
	c, err := Parse([]string{"-nats-url", srv.URL(), "-builtins", "calculator,echo", "-concurrency", "3", "-executor-id", "ex1"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var log opstest.Log
	c.Ops.LogTo = &log
	stop := opstest.Run(t, func(ctx context.Context) error { return Run(ctx, c) })

	opstest.WaitReady(t, addr)
	nc := srv.Connect()
	sub, err := nc.SubscribeSync("toolfleet.result.r1.*")
	if err != nil {
		t.Fatal(err)
	}
	msg, err := events.NewCall(events.CallOptions{Source: "/test", ID: "c1", RunID: "r1"}, events.Call{Tool: "calculator", Arguments: json.RawMessage(`{"expression":"6*7"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.PublishMsg(msg); err != nil {
		t.Fatal(err)
	}
	if m, err := sub.NextMsg(10 * time.Second); err != nil {
		t.Fatalf("no result: %v", err)
	} else if _, res, err := events.DecodeResult(events.CoreMsg(m)); err != nil || res.Status != events.StatusOK {
		t.Fatalf("result %+v %v", res, err)
	}
	opstest.Serves(t, addr, "toolfleet_executor_calls_total")

	if got := log.Lines(`"message":"executor starting"`, `"tools":["calculator","echo"]`, `"concurrency":3`, `"executor":"ex1"`, `"level":"info"`); len(got) != 1 {
		t.Errorf("start line not logged once with the tools and concurrency:\n%s", log.String())
	}
	if got := log.Lines(`"level":"warn"`, "TOOLFLEET_METRICS_ADDR is deprecated"); len(got) != 1 {
		t.Errorf("deprecation warnings %q, want one", got)
	}
	if err := stop(); err != nil {
		t.Fatalf("Run returned %v", err)
	}
	if strings.Contains(log.String(), `"level":"debug"`) {
		t.Errorf("debug lines at the default level:\n%s", log.String())
	}
}

// The executor's own readiness holds only once it serves its tools: not before Run, and
// from the moment its consumer takes calls.
func TestServing(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	nc := srv.Connect()
	c := Config{Builtins: []string{"echo"}, Concurrency: 1, ExecutorID: "ex2", GracePeriod: time.Second}
	reg, err := c.Registry()
	if err != nil {
		t.Fatal(err)
	}
	ex, err := New(nc, reg, c, ops.NewRegistry(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	serving := Serving(ex)
	if err := serving(); err == nil || !strings.Contains(err.Error(), "not serving") {
		t.Fatalf("before the executor runs: %v", err)
	}
	stop := opstest.Run(t, ex.Run)
	natstest.Eventually(t, 30*time.Second, "the executor to serve", func() bool { return serving() == nil })
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Consumer(context.Background(), events.StreamCalls, events.ConsumerName("echo")); err != nil {
		t.Errorf("ready, but the echo consumer does not exist: %v", err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}
