package executor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/executor"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// BenchmarkFleetConcurrency is the fleet at 256 calls in flight with one and two
// replicas, each running the no-op tool at a given -concurrency (c=default is
// executor.DefaultConcurrency()), against the raw pattern measured just before it in the
// same run (x-raw-calls/s):
//
//	go test -run '^$' -bench FleetConcurrency -benchtime 3000x ./pkg/executor/
func BenchmarkFleetConcurrency(b *testing.B) {
	for _, c := range []int{4, 16, 64, 256, 0} {
		name := fmt.Sprint(c)
		if c == 0 {
			name = fmt.Sprintf("default(%d)", executor.DefaultConcurrency())
		}
		for _, n := range []int{1, 2} {
			b.Run(fmt.Sprintf("c=%s/raw-%d", name, n), func(b *testing.B) { benchRaw(b, 256, n) })
			b.Run(fmt.Sprintf("c=%s/fleet-%d", name, n), func(b *testing.B) { benchFleetConcurrency(b, 256, n, c) })
		}
	}
}

// benchFleetConcurrency is benchFleet with each replica's concurrency set to c (0: the
// default).
func benchFleetConcurrency(b *testing.B, window, replicas, c int) {
	fx := natstest.StartJetStream(b, events.Config{})
	srv, nc, js := fx.Srv, fx.NC, fx.JS
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range replicas {
		reg := tools.NewRegistry()
		must(b, reg.AddFunc(tools.Definition{Name: "noop", Parameters: echoSchema, Safe: true},
			func(ctx context.Context, args json.RawMessage) (any, error) { return true, nil }))
		opts := []executor.Option{executor.WithExecutorID(fmt.Sprintf("bench-%d", i))}
		if c > 0 {
			opts = append(opts, executor.WithConcurrency(c))
		}
		ex, err := executor.New(srv.Connect(), reg, opts...)
		if err != nil {
			b.Fatal(err)
		}
		wg.Go(func() { _ = ex.Run(ctx) })
	}
	b.Cleanup(func() { cancel(); wg.Wait() })
	natstest.Eventually(b, 10*time.Second, "the executors to start", func() bool {
		_, err := js.Consumer(ctx, events.StreamCalls, events.ConsumerName("noop"))
		return err == nil
	})
	f := drive(b, nc, []string{events.StreamResults}, window, func(i int) *nats.Msg {
		m, err := events.NewCall(events.CallOptions{Source: "/bench", ID: fmt.Sprintf("c%09d", i), RunID: "bench"},
			events.Call{Tool: "noop", Arguments: json.RawMessage(payload)})
		if err != nil {
			b.Fatal(err)
		}
		return m
	})
	baseline.Lock()
	raw, ok := baseline.m[[2]int{window, replicas}]
	baseline.Unlock()
	if ok {
		b.ReportMetric(f.callsPerSec/raw.callsPerSec, "x-raw-calls/s")
	}
}
