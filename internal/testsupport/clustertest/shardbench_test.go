package clustertest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/loadgen"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/internal/testsupport/nettest"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/executor"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// BenchmarkShards measures the fleet against the raw JetStream pattern shard for shard,
// on a cluster of nats-server processes: P shards, each shard's calls and results streams
// placed on their own node (server tag node:<n>, R1), executors (workers for raw) on
// their own connections spread over the nodes, and one load generator per node. The raw
// pattern is the same on P stream pairs: a shared pull consumer per calls stream, the
// reply published asynchronously and the call acked on its PubAck, the replies read by
// ordered consumers.
//
// Settings from the environment (for a many-core machine; the defaults suit 2 cores):
//
//	TOOLFLEET_BENCH_SHARDS    shard counts, e.g. "1,2,4" (default "1,2")
//	TOOLFLEET_BENCH_REPLICAS  executor replicas (raw workers), e.g. "4" or "1,2,4,8" (default "2")
//	TOOLFLEET_BENCH_R         stream replicas: "1" (default; shards on separate nodes) or
//	                          "1,3": R1 on one node against R3 on three, P = 1
//	TOOLFLEET_BENCH_WINDOW    calls in flight in all (default 1024)
//	TOOLFLEET_BENCH_CONCURRENCY  each executor's concurrency (default: executor.DefaultConcurrency)
//	TOOLFLEET_NATS_SERVER     a nats-server binary (default: built from the module)
//	TOOLFLEET_BENCH_SERVER_PROFILE  a folder: each node's CPU profile of the first
//	                          seconds of each case's load goes there (<case>-n<i>.pprof)
//
// Between the two runs a third, contract: the raw workers on the fleet's wire. Its
// calls and results are the fleet's events (the same ce-* headers and bodies, the
// result's once-only header), on the fleet's streams and consumers (the two-subject
// filter), but its workers run nothing: each reads the call's ids from its headers and
// publishes a fixed result event. contract ÷ raw is what the event contract costs;
// fleet ÷ contract is what the executor costs on top of it.
//
// Reported: calls/s, p50-µs, the CPU and server traffic per call (see costs); for
// contract and fleet x-raw (against raw at the same P and replicas, run just before);
// for the fleet x-contract, and x-P1 (against the fleet at P = 1).
func BenchmarkShards(b *testing.B) {
	bin := buildNATSServer(b)
	window := envInts(b, "TOOLFLEET_BENCH_WINDOW", "1024")[0]
	shards := envInts(b, "TOOLFLEET_BENCH_SHARDS", "1,2")
	replicas := envInts(b, "TOOLFLEET_BENCH_REPLICAS", "2")
	raw, contract := map[string]float64{}, map[string]float64{}
	fleetP1 := map[int]float64{}
	rs := envInts(b, "TOOLFLEET_BENCH_R", "1")
	// One topology for every P: as many nodes as the most shards (at least 3, a JetStream
	// cluster's smallest); with R3 compared, R1 runs on one node alone.
	nodes := max(slices.Max(shards), 3)
	for _, r := range rs {
		for _, p := range shards {
			if r > 1 && p > 1 {
				continue
			}
			for _, e := range replicas {
				for _, kind := range []string{"raw", "contract", "fleet"} {
					name := fmt.Sprintf("R=%d/P=%d/replicas=%d/%s", r, p, e, kind)
					b.Run(name, func(b *testing.B) {
						sc := shardCase{bin: bin, shards: p, streamReplicas: r, replicas: e, window: window, nodes: nodes}
						if slices.Contains(rs, 3) {
							sc.nodes = r
						}
						perSec, p50 := sc.run(b, kind)
						b.ReportMetric(perSec, "calls/s")
						b.ReportMetric(float64(p50.Microseconds()), "p50-µs")
						key := fmt.Sprintf("%d/%d/%d", r, p, e)
						switch kind {
						case "raw":
							raw[key] = perSec
							return
						case "contract":
							contract[key] = perSec
						default:
							if base := contract[key]; base > 0 {
								b.ReportMetric(perSec/base, "x-contract")
							}
						}
						if base := raw[key]; base > 0 {
							b.ReportMetric(perSec/base, "x-raw")
						}
						if kind == "contract" {
							return
						}
						if p == 1 {
							fleetP1[e] = perSec
						} else if base := fleetP1[e]; base > 0 {
							b.ReportMetric(perSec/base, "x-P1")
						}
					})
				}
			}
		}
	}
}

type shardCase struct {
	bin                              string
	shards, streamReplicas, replicas int
	window                           int
	nodes                            int
	c                                *cluster
	monitor                          []int // each node's monitoring port (see costs)
	prof                             []int // each node's profiling port
}

// run starts the case's cluster and parts and drives b.N calls through it.
func (sc shardCase) run(b *testing.B, kind string) (perSec float64, p50 time.Duration) {
	cfg := events.Config{Shards: sc.shards, Replicas: sc.streamReplicas}
	for range sc.nodes {
		sc.monitor = append(sc.monitor, nettest.FreePort(b))
		sc.prof = append(sc.prof, nettest.FreePort(b))
	}
	sc.c = startNodes(b, sc.bin, sc.nodes, func(i int) string {
		conf := fmt.Sprintf("server_tags: [\"node:%d\"]\nhttp_port: %d\nprof_port: %d\n", i, sc.monitor[i], sc.prof[i])
		if kind != "raw" {
			conf += cfg.MappingsConf()
		}
		return conf
	})
	admin := sc.c.connect(b, "bench-admin", 0)
	js, err := jetstream.New(admin)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	waitJetStream(b, ctx, js)
	var streams []string
	var msg func(g, n int, id string) *nats.Msg
	callOf := func(subject string) (string, bool) { // raw: raw.reply.<shard>.<g>.<seq>
		t := strings.Split(subject, ".")
		return t[len(t)-2] + "." + t[len(t)-1], len(t) == 5
	}
	if kind != "raw" {
		streams = cfg.ResultStreams()
		if kind == "fleet" {
			sc.startFleet(b, ctx, js, cfg)
		} else {
			sc.startContract(b, ctx, js, cfg)
		}
		callOf = nil
		msg = func(g, _ int, id string) *nats.Msg {
			m, err := events.NewCall(events.CallOptions{Source: "/bench", ID: id, RunID: fmt.Sprintf("g%d", g)},
				events.Call{Tool: "noop", Arguments: json.RawMessage(`{"text":"` + strings.Repeat("x", 180) + `"}`)})
			if err != nil {
				b.Fatal(err)
			}
			return m
		}
	} else {
		streams = sc.startRaw(b, ctx, js)
		msg = func(_, n int, id string) *nats.Msg {
			return &nats.Msg{Subject: "raw.call." + strconv.Itoa(n), Header: nats.Header{nats.MsgIdHdr: []string{id}},
				Data: []byte(`{"text":"` + strings.Repeat("x", 180) + `"}`)}
		}
	}
	return sc.drive(b, streams, kind, callOf, msg)
}

// placed is sc's placement of shard n's streams: its own node, with R1.
func (sc shardCase) placed(n int) *jetstream.Placement {
	if sc.streamReplicas > 1 {
		return nil
	}
	return &jetstream.Placement{Tags: []string{fmt.Sprintf("node:%d", n%sc.nodes)}}
}

// createFleetStreams creates the fleet's streams, each shard on its node.
func (sc shardCase) createFleetStreams(b *testing.B, ctx context.Context, js jetstream.JetStream, cfg events.Config) {
	shardOf := map[string]int{}
	for n, name := range cfg.CallStreams() {
		shardOf[name] = n
		shardOf[cfg.ResultStreams()[n]] = n
	}
	for _, s := range cfg.Streams() {
		n, ok := shardOf[s.Name]
		if !ok {
			n = sc.nodes - 1 // events, dead letters, payloads: out of shard 0's way
		}
		s.Placement = sc.placed(n)
		if _, err := js.CreateOrUpdateStream(ctx, s); err != nil {
			b.Fatalf("stream %s: %v", s.Name, err)
		}
	}
}

// startContract creates the fleet's streams and its consumers of the tool noop, and
// starts raw workers that answer each call with a result event: the fleet's wire with
// nothing run. Like the raw workers, each publishes asynchronously and acks on the
// PubAck, on its own connection.
func (sc shardCase) startContract(b *testing.B, ctx context.Context, js jetstream.JetStream, cfg events.Config) {
	sc.createFleetStreams(b, ctx, js, cfg)
	cc, err := cfg.CallConsumer("noop")
	if err != nil {
		b.Fatal(err)
	}
	for _, name := range cfg.CallStreams() {
		if _, err := js.CreateOrUpdateConsumer(ctx, name, cc); err != nil {
			b.Fatal(err)
		}
	}
	for i := range sc.replicas {
		sc.worker(b, i, cfg.CallStreams(), cc.Durable, func(m jetstream.Msg) (*nats.Msg, error) {
			h := m.Headers()
			return events.NewResult("/contract", events.Result{Tool: "noop", CallID: h.Get(events.HeaderID),
				RunID: h.Get(events.HeaderRunID), Status: "ok", Output: json.RawMessage("true"), Attempts: 1}, 1)
		})
	}
}

// startFleet creates the fleet's streams (each shard on its node) and starts the
// executors, each on its own connection to its own node.
func (sc shardCase) startFleet(b *testing.B, ctx context.Context, js jetstream.JetStream, cfg events.Config) {
	sc.createFleetStreams(b, ctx, js, cfg)
	conns := make([]*nats.Conn, sc.replicas) // connected first: closed after the executors stop
	for i := range conns {
		conns[i] = sc.c.connect(b, fmt.Sprintf("executor-%d", i), i%sc.nodes)
	}
	runCtx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	b.Cleanup(func() { stop(); wg.Wait() })
	exited := make(chan error, sc.replicas) // an executor that stopped before the load: why
	for i, nc := range conns {
		reg := tools.NewRegistry()
		err := reg.AddFunc(tools.Definition{Name: "noop", Parameters: json.RawMessage(`{"type":"object"}`), Safe: true},
			func(ctx context.Context, args json.RawMessage) (any, error) { return true, nil })
		if err != nil {
			b.Fatal(err)
		}
		ex, err := executor.New(nc, reg, executor.WithStreamConfig(cfg),
			executor.WithExecutorID(fmt.Sprintf("ex%d", i)), benchConcurrency(b),
			executor.WithLogger(zerolog.New(zerolog.NewTestWriter(b)).Level(zerolog.WarnLevel).With().Timestamp().Str("executor", fmt.Sprint(i)).Logger()))
		if err != nil {
			b.Fatal(err)
		}
		wg.Go(func() {
			if err := ex.Run(runCtx); runCtx.Err() == nil {
				exited <- fmt.Errorf("executor %d stopped: %v", i, err)
			}
		})
	}
	var lastErr error
	defer func() {
		if b.Failed() {
			b.Logf("last look at the consumers: %v", lastErr)
		}
	}()
	natstest.Eventually(b, time.Minute, "the executors' consumers", func() bool {
		select {
		case err := <-exited:
			b.Fatal(err)
		default:
		}
		for _, name := range cfg.CallStreams() {
			// Each look on its own clock: a request lost while the cluster's routes settle
			// is never answered, and would use up the whole wait.
			actx, cancel := context.WithTimeout(ctx, 2*time.Second)
			info, err := js.Consumer(actx, name, events.ConsumerName("noop"))
			cancel()
			if err != nil || len(info.CachedInfo().Name) == 0 {
				lastErr = fmt.Errorf("consumer on %s: %v", name, err)
				return false
			}
		}
		return true
	})
}

// startRaw creates the raw pattern's stream pairs and starts its workers; it returns
// the replies streams.
func (sc shardCase) startRaw(b *testing.B, ctx context.Context, js jetstream.JetStream) []string {
	var replies []string
	for n := range sc.shards {
		for _, s := range []jetstream.StreamConfig{
			{Name: fmt.Sprintf("RAW_CALLS_%d", n), Subjects: []string{fmt.Sprintf("raw.call.%d", n)}, Retention: jetstream.WorkQueuePolicy},
			{Name: fmt.Sprintf("RAW_REPLIES_%d", n), Subjects: []string{fmt.Sprintf("raw.reply.%d.>", n)}},
		} {
			s.Storage, s.Replicas, s.Duplicates, s.Placement = jetstream.FileStorage, sc.streamReplicas, 2*time.Minute, sc.placed(n)
			if _, err := js.CreateOrUpdateStream(ctx, s); err != nil {
				b.Fatalf("stream %s: %v", s.Name, err)
			}
		}
		replies = append(replies, fmt.Sprintf("RAW_REPLIES_%d", n))
		if _, err := js.CreateOrUpdateConsumer(ctx, fmt.Sprintf("RAW_CALLS_%d", n), jetstream.ConsumerConfig{Durable: "worker",
			AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: 1000, AckWait: 30 * time.Second, Replicas: sc.streamReplicas}); err != nil {
			b.Fatal(err)
		}
	}
	var calls []string
	for n := range sc.shards {
		calls = append(calls, fmt.Sprintf("RAW_CALLS_%d", n))
	}
	for i := range sc.replicas {
		sc.worker(b, i, calls, "worker", func(m jetstream.Msg) (*nats.Msg, error) {
			id := m.Headers().Get(nats.MsgIdHdr)
			n := strings.TrimPrefix(m.Subject(), "raw.call.")
			return &nats.Msg{Subject: "raw.reply." + n + "." + id, Header: nats.Header{nats.MsgIdHdr: []string{id}}, Data: m.Data()}, nil
		})
	}
	return replies
}

// worker consumes consumer on each of the streams on its own connection and answers each
// message with reply's: published asynchronously, the message acked on the PubAck.
func (sc shardCase) worker(b *testing.B, i int, streams []string, consumer string, reply func(jetstream.Msg) (*nats.Msg, error)) {
	wjs, err := jetstream.New(sc.c.connect(b, fmt.Sprintf("worker-%d", i), i%sc.nodes), jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	var acking sync.WaitGroup
	for _, stream := range streams {
		cons, err := wjs.Consumer(context.Background(), stream, consumer)
		if err != nil {
			b.Fatal(err)
		}
		cc, err := cons.Consume(func(m jetstream.Msg) {
			r, err := reply(m)
			if err != nil {
				_ = m.Term()
				return
			}
			f, err := wjs.PublishMsgAsync(r)
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
		}, jetstream.PullMaxMessages(max(256/len(streams), 16)))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(cc.Stop)
	}
	b.Cleanup(func() { close(done); acking.Wait() })
}

// drive publishes b.N calls from one load generator per node (its own connection, its
// share of the window), calls spread over the shards, and waits for every reply.
func (sc shardCase) drive(b *testing.B, streams []string, kind string, callOf func(string) (string, bool),
	msg func(g, shard int, id string) *nats.Msg) (float64, time.Duration) {
	gens := sc.nodes
	ctx := context.Background()
	type genResult struct {
		r   loadgen.Report
		err error
	}
	out := make([]genResult, gens)
	var gs []*loadgen.Generator
	for g := range gens {
		filter := fmt.Sprintf("toolfleet.result.g%d.*", g)
		if kind == "raw" {
			filter = fmt.Sprintf("raw.reply.*.g%d.*", g)
		}
		nc := sc.c.connect(b, fmt.Sprintf("load-%d", g), g)
		var gen *loadgen.Generator
		// A fresh cluster can leave the first API requests unanswered while its routes
		// settle: try again, as any part of the fleet does at start.
		for try := 1; ; try++ {
			var err error
			gen, err = loadgen.Start(ctx, nc, loadgen.Config{ReplyStreams: streams,
				ReplyFilter: filter, Window: max(sc.window/gens, 16), StallTimeout: 60 * time.Second, CallOf: callOf})
			if err == nil {
				break
			}
			if try == 5 {
				b.Fatal(err)
			}
			b.Logf("generator %d, try %d: %v", g, try, err)
		}
		b.Cleanup(gen.Stop)
		gs = append(gs, gen)
	}
	before := sc.c.snapshot(b, sc.monitor)
	profiled := sc.profileServers(b, kind)
	b.ResetTimer()
	var wg sync.WaitGroup
	for g, gen := range gs {
		wg.Go(func() {
			for i := g; i < b.N; i += gens {
				sep := "-"
				if kind == "raw" {
					sep = "."
				}
				if err := gen.Publish(ctx, msg(g, i%sc.shards, fmt.Sprintf("g%d%s%09d", g, sep, i))); err != nil {
					out[g].err = err
					return
				}
			}
			out[g].r, out[g].err = gen.Wait(ctx)
		})
	}
	wg.Wait()
	b.StopTimer()
	sc.c.snapshot(b, sc.monitor).report(b, before, b.N)
	profiled()
	var answered int
	var elapsed, p50 time.Duration
	for g, o := range out {
		if o.err != nil {
			b.Fatalf("generator %d: %v", g, o.err)
		}
		if o.r.Lost != 0 || o.r.Doubled != 0 || o.r.PublishErrors != 0 {
			b.Fatalf("generator %d: %d answered, %d lost, %d doubled, %d refused", g, o.r.Answered, o.r.Lost, o.r.Doubled, o.r.PublishErrors)
		}
		answered += o.r.Answered
		elapsed = max(elapsed, o.r.Elapsed)
		p50 = max(p50, o.r.P50)
	}
	return float64(answered) / elapsed.Seconds(), p50
}

func waitJetStream(b *testing.B, ctx context.Context, js jetstream.JetStream) {
	natstest.Eventually(b, time.Minute, "JetStream", func() bool {
		actx, cancel := context.WithTimeout(ctx, time.Second) // unanswered until a meta leader
		defer cancel()
		_, err := js.AccountInfo(actx)
		return err == nil
	})
}

func envInts(b *testing.B, name, def string) []int {
	v := os.Getenv(name)
	if v == "" {
		v = def
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			b.Fatalf("%s: %q is not a list of positive numbers", name, v)
		}
		out = append(out, n)
	}
	return out
}

// benchConcurrency is the executors' concurrency: TOOLFLEET_BENCH_CONCURRENCY, or the default.
func benchConcurrency(b *testing.B) executor.Option {
	return executor.WithConcurrency(envInts(b, "TOOLFLEET_BENCH_CONCURRENCY", strconv.Itoa(executor.DefaultConcurrency()))[0])
}
