package executor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/client"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/executor"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Under a server that syncs every write to disk before acknowledging it, many calls at
// high concurrency through pkg/client all end ok: a slow server delays results, it never
// makes an executor answer error or set a call aside as a dead letter. Five tools with
// 1,000 places each can hold more results at once than the executor's window of
// unacknowledged publishes (4,096). The fleet's own settings (a 30s ack wait): the
// tests' 2s would measure a CPU-starved test process more than its server.
func TestSlowServerCallsAllOK(t *testing.T) {
	if testing.Short() {
		t.Skip("makes 6,000 calls")
	}
	srv := natstest.StartWith(t, func(o *server.Options) { o.SyncAlways = true })
	f := natstest.JetStreamOn(t, srv, events.Config{})
	b := &testBundle{srv: f.Srv, nc: f.NC, js: f.JS, cfg: f.Cfg}
	toolNames := []string{"echo", "echo1", "echo2", "echo3", "echo4"}
	b.start(t, echoRegistry(t, toolNames[1:]...), executor.WithConcurrency(1000))
	for _, name := range toolNames[1:] {
		b.waitServed(t, name)
	}
	c, err := client.New(f.NC)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const n, inFlight = 6000, 2000
	var mu sync.Mutex
	failed := map[string]int{}
	var first error
	sem := make(chan struct{}, inFlight)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			text := fmt.Sprint(i)
			res, err := c.Call(ctx, client.Request{Tool: toolNames[i%len(toolNames)], Arguments: json.RawMessage(`{"text":"` + text + `"}`)})
			if err == nil && res.Status == events.StatusOK && string(res.Output) == `{"text":"`+text+`"}` {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			failed[string(res.Status)]++
			if first == nil {
				first = fmt.Errorf("call %d: status %q, output %s: %v", i, res.Status, res.Output, err)
			}
		})
	}
	wg.Wait()
	if len(failed) > 0 {
		t.Fatalf("calls not ok, by status: %v; the first: %v", failed, first)
	}
	dlq, err := f.JS.Stream(ctx, events.StreamDeadLetters)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := dlq.Info(ctx); err != nil || info.State.Msgs != 0 {
		t.Fatalf("dead letters: %+v, %v; want none", info.State, err)
	}
}

// A server that falls behind takes a call's in-progress acks after its ack wait has
// run out, and delivers the call again while this replica still runs it. The replica
// does not take the copy: the tool runs once, and however often the call is delivered
// meanwhile (up to the max deliver), it is answered ok when the run ends, not given up
// as an error and a dead letter. The late in-progress acks are made exact here: the
// consumer's ack wait is cut after the executor set its keep-alive to the fleet's.
func TestCallDeliveredAgainWhileHeldRunsOnce(t *testing.T) {
	b := setupWith(t, events.Config{})
	release := make(chan struct{})
	var runs runCounter
	reg := tools.NewRegistry()
	slowTool(t, reg, "hold", true, &runs, time.Minute, release)
	b.start(t, reg)
	ctx := context.Background()
	stream := b.cfg.CallStreams()[0]
	cons, err := b.js.Consumer(ctx, stream, events.ConsumerName("hold"))
	if err != nil {
		t.Fatal(err)
	}
	cc := cons.CachedInfo().Config
	cc.AckWait = 300 * time.Millisecond // the executor still keeps it alive every 10s
	if _, err := b.js.UpdateConsumer(ctx, stream, cc); err != nil {
		t.Fatal(err)
	}

	b.call(t, "hold", "held-1", "r1", `{"text":"x"}`)
	natstest.Eventually(t, 10*time.Second, "the call to run", func() bool { return runs.of("held-1") == 1 })
	maxDeliver := b.cfg.WithDefaults().MaxDeliver
	natstest.Eventually(t, 20*time.Second, "the call to be delivered its max deliver times", func() bool {
		info, err := cons.Info(ctx)
		return err == nil && info.Delivered.Consumer >= uint64(maxDeliver)
	})
	close(release)
	res := b.results.one(t, "held-1")
	if res.Status != events.StatusOK || runs.of("held-1") != 1 {
		t.Fatalf("result %s %+v after %d runs; want ok after one", res.Status, res.Error, runs.of("held-1"))
	}
	dlq, err := b.js.Stream(ctx, events.StreamDeadLetters)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := dlq.Info(ctx); err != nil || info.State.Msgs != 0 {
		t.Fatalf("dead letters: %+v, %v; want none", info.State, err)
	}
}
