package executor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/toolfleet/toolfleet/internal/loadgen"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/executor"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// The load harness (internal/loadgen, which `toolfleet demo` uses too): N calls of a no-op tool through the fleet on an embedded JetStream
// with file storage, with 1, 2 and 4 replicas, against the raw pattern with nats.go
// alone (publish to a stream → a shared pull consumer acks on the reply's PubAck and
// publishes the reply to a second stream → a second consumer reads it), measured in the
// same run. raw-N has N worker connections sharing the consumer, as fleet-N has N
// replicas. Each fleet figure is also reported as a ratio to raw-N's and raw-1's:
//
//	go test -run '^$' -bench Fleet -benchtime 5000x ./pkg/executor/
//
// x-raw-calls/s is the fleet's throughput over raw-N's and x-raw1-calls/s over raw-1's
// (target ≥ 0.6); added-p50-µs is the fleet's p50 minus raw-N's (target < 1000 at one
// call in flight; with 256 in flight p50 is mostly queueing, window / throughput).

// baseline holds the raw pattern's figures per window, for the fleet's ratios.
var baseline = struct {
	sync.Mutex
	m map[[2]int]loadFigures // by window and worker count
}{m: map[[2]int]loadFigures{}}

type loadFigures struct{ callsPerSec, p50, p99 float64 }

func BenchmarkFleet(b *testing.B) {
	for _, window := range []int{1, 256} {
		workers := []int{1, 2, 4}
		if window == 1 {
			workers = []int{1}
		}
		for _, n := range workers {
			b.Run(fmt.Sprintf("inflight=%d/raw-%d", window, n), func(b *testing.B) { benchRaw(b, window, n) })
			b.Run(fmt.Sprintf("inflight=%d/fleet-%d", window, n), func(b *testing.B) { benchFleet(b, window, n) })
		}
	}
}

// replyCall reads the call a reply answers from its subject: raw.reply.<call> for the raw
// pattern, a result subject for the fleet.
func replyCall(subject string) (string, bool) {
	if id, ok := strings.CutPrefix(subject, "raw.reply."); ok {
		return id, true
	}
	_, call, _, ok := events.ParseResultSubject(subject)
	return call, ok
}

var payload = `{"text":"` + strings.Repeat("x", 180) + `"}` // a 200-byte body

// drive publishes one call per benchmark iteration through the load generator, which
// reads the replies with an ordered consumer on each of replyStreams and times each from publish
// to stored reply, then waits for every reply.
func drive(b *testing.B, nc *nats.Conn, replyStreams []string, window int, msg func(i int) *nats.Msg) loadFigures {
	ctx := context.Background()
	g, err := loadgen.Start(ctx, nc, loadgen.Config{ReplyStreams: replyStreams, Window: window, StallTimeout: 60 * time.Second,
		CallOf: replyCall})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(g.Stop)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := g.Publish(ctx, msg(i)); err != nil {
			b.Fatal(err)
		}
		i++
	}
	r, err := g.Wait(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if r.Answered != i || r.Doubled != 0 {
		b.Fatalf("%d calls: %d answered, %d lost, %d doubled, %d refused (%v)", i, r.Answered, r.Lost, r.Doubled, r.PublishErrors, g.FirstPublishError())
	}
	f := loadFigures{callsPerSec: r.CallsPerSec(), p50: float64(r.P50.Microseconds()), p99: float64(r.P99.Microseconds())}
	b.ReportMetric(f.callsPerSec, "calls/s")
	b.ReportMetric(f.p50, "p50-µs")
	b.ReportMetric(f.p99, "p99-µs")
	return f
}

func benchServer(b *testing.B) (*natstest.Server, *nats.Conn, jetstream.JetStream) {
	srv := natstest.Start(b)
	nc := srv.Connect()
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	return srv, nc, js
}

func benchRaw(b *testing.B, window, workers int) {
	srv, nc, js := benchServer(b)
	ctx := context.Background()
	cfg := events.DefaultConfig()
	for _, s := range []jetstream.StreamConfig{
		{Name: "RAW_CALLS", Subjects: []string{"raw.call.>"}, Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage, Duplicates: cfg.DuplicateWindow.D()},
		{Name: "RAW_REPLIES", Subjects: []string{"raw.reply.>"}, Storage: jetstream.FileStorage, Duplicates: cfg.DuplicateWindow.D()},
	} {
		if _, err := js.CreateOrUpdateStream(ctx, s); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := js.CreateOrUpdateConsumer(ctx, "RAW_CALLS", jetstream.ConsumerConfig{Durable: "worker",
		AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: 1000, AckWait: 30 * time.Second}); err != nil {
		b.Fatal(err)
	}
	for range workers {
		rawWorker(b, srv, max(window/workers, 16))
	}
	f := drive(b, nc, []string{"RAW_REPLIES"}, window, func(i int) *nats.Msg {
		id := fmt.Sprintf("c%09d", i)
		return &nats.Msg{Subject: "raw.call.noop", Header: nats.Header{nats.MsgIdHdr: []string{id}}, Data: []byte(payload)}
	})
	baseline.Lock()
	baseline.m[[2]int{window, workers}] = f
	baseline.Unlock()
}

func benchFleet(b *testing.B, window, replicas int, opts ...executor.Option) {
	fx := natstest.StartJetStream(b, events.Config{})
	srv, nc, js := fx.Srv, fx.NC, fx.JS
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range replicas {
		reg := tools.NewRegistry()
		must(b, reg.AddFunc(tools.Definition{Name: "noop", Parameters: echoSchema, Safe: true},
			func(ctx context.Context, args json.RawMessage) (any, error) { return true, nil }))
		ex, err := executor.New(srv.Connect(), reg, append([]executor.Option{executor.WithConcurrency(max(window/replicas, 16)),
			executor.WithExecutorID(fmt.Sprintf("bench-%d", i))}, opts...)...)
		if err != nil {
			b.Fatal(err)
		}
		wg.Go(func() { _ = ex.Run(ctx) })
	}
	b.Cleanup(func() { cancel(); wg.Wait() }) // before the connections close (cleanups run last in, first out)
	natstest.Eventually(b, 10*time.Second, "the executors to start", func() bool {
		_, err := js.Consumer(ctx, events.StreamCalls, events.ConsumerName("noop"))
		return err == nil
	})
	f := drive(b, nc, []string{events.StreamResults}, window, func(i int) *nats.Msg {
		m, err := events.NewCall(events.CallOptions{Source: "/bench", ID: fmt.Sprintf("c%09d", i), RunID: "bench"}, events.Call{Tool: "noop", Arguments: json.RawMessage(payload)})
		if err != nil {
			b.Fatal(err)
		}
		return m
	})
	baseline.Lock()
	raw, ok := baseline.m[[2]int{window, replicas}]
	raw1, ok1 := baseline.m[[2]int{window, 1}]
	baseline.Unlock()
	if ok {
		b.ReportMetric(f.callsPerSec/raw.callsPerSec, "x-raw-calls/s")
		b.ReportMetric(f.p50-raw.p50, "added-p50-µs")
	}
	if ok1 && replicas > 1 {
		b.ReportMetric(f.callsPerSec/raw1.callsPerSec, "x-raw1-calls/s")
	}
}

// rawWorker is one worker of the raw pattern on its own connection: reply
// asynchronously, ack when the reply's PubAck arrives.
func rawWorker(b *testing.B, srv *natstest.Server, batch int) {
	wjs, err := jetstream.New(srv.Connect(), jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		b.Fatal(err)
	}
	cons, err := wjs.Consumer(context.Background(), "RAW_CALLS", "worker")
	if err != nil {
		b.Fatal(err)
	}
	// The goroutines awaiting PubAcks end with the benchmark, not after it.
	done := make(chan struct{})
	var acking sync.WaitGroup
	cc, err := cons.Consume(func(m jetstream.Msg) {
		id := m.Headers().Get(nats.MsgIdHdr)
		reply := &nats.Msg{Subject: "raw.reply." + id, Header: nats.Header{nats.MsgIdHdr: []string{id}}, Data: m.Data()}
		f, err := wjs.PublishMsgAsync(reply)
		if err != nil {
			_ = m.Nak()
			return
		}
		acking.Go(func() {
			select {
			case <-f.Ok():
				_ = m.Ack()
			case <-f.Err():
				_ = m.Nak()
			case <-done:
			}
		})
	}, jetstream.PullMaxMessages(batch))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cc.Stop(); close(done); acking.Wait() })
}

// BenchmarkFleetTracing is the fleet at 256 calls in flight with tracing off (no
// provider given, none set globally), on with every span dropped by the sampler, and on
// with every span recorded (and exported to a discarding exporter through the SDK's
// batcher), each against the raw pattern measured just before it:
//
//	go test -run '^$' -bench FleetTracing -benchtime 5000x ./pkg/executor/
func BenchmarkFleetTracing(b *testing.B) {
	for _, mode := range []string{"off", "unsampled", "sampled"} {
		b.Run(mode+"/raw-1", func(b *testing.B) { benchRaw(b, 256, 1) })
		b.Run(mode+"/fleet-1", func(b *testing.B) {
			var opts []executor.Option
			switch mode {
			case "unsampled", "sampled":
				sampler := sdktrace.NeverSample()
				if mode == "sampled" {
					sampler = sdktrace.AlwaysSample()
				}
				tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler), sdktrace.WithBatcher(tracetest.NewNoopExporter()))
				b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
				opts = append(opts, executor.WithTracerProvider(tp))
			}
			benchFleet(b, 256, 1, opts...)
		})
	}
}
