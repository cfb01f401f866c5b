package executor_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/executor"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// testBundle is one embedded JetStream with the toolfleet streams, a client, and a
// collector of every result.
type testBundle struct {
	srv     *natstest.Server
	nc      *nats.Conn
	js      jetstream.JetStream
	cfg     events.Config
	results *collector
}

// testConfig keeps redelivery and catalog expiry short so that crash paths finish
// within a test's time.
// TOOLFLEET_TEST_SHARDS=P runs the tests on P shards (calls mapped by the server, results
// on their shards): the fleet must behave the same, and callers must not see it.
func testConfig() events.Config {
	return events.Config{AckWait: tools.Duration(2 * time.Second), CatalogTTL: tools.Duration(3 * time.Second), MaxDeliver: 5,
		Shards: natstest.TestShards()}
}

func setup(t testing.TB) *testBundle {
	t.Helper()
	f := natstest.StartJetStream(t, testConfig())
	b := &testBundle{srv: f.Srv, nc: f.NC, js: f.JS, cfg: f.Cfg}
	b.results = collect(t, f.JS, f.Cfg)
	return b
}

// start runs an executor on its own connection until the test ends; stop cancels it and
// returns Run's error.
func (b *testBundle) start(t testing.TB, reg *tools.Registry, opts ...executor.Option) (stop func() error) {
	t.Helper()
	return b.startOn(t, b.srv.Connect(), reg, opts...)
}

func (b *testBundle) startOn(t testing.TB, nc *nats.Conn, reg *tools.Registry, opts ...executor.Option) (stop func() error) {
	t.Helper()
	opts = append([]executor.Option{executor.WithStreamConfig(b.cfg), executor.WithGracePeriod(5 * time.Second)}, opts...)
	ex, err := executor.New(nc, reg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ex.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(30 * time.Second):
				runErr = errors.New("executor did not stop within 30s")
			}
		})
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	b.waitServed(t, reg.Definitions()[0].Name)
	return stop
}

// waitServed waits until the tool's consumer exists on every calls stream (shard), i.e.
// an executor serves it.
func (b *testBundle) waitServed(t testing.TB, tool string) {
	t.Helper()
	natstest.Eventually(t, 10*time.Second, "consumer of "+tool, func() bool {
		for _, stream := range b.cfg.CallStreams() {
			if _, err := b.js.Consumer(context.Background(), stream, events.ConsumerName(tool)); err != nil {
				return false
			}
		}
		return true
	})
}

// call publishes a call the way the planner does, retrying through a server restart (the
// call id deduplicates the retries).
func (b *testBundle) call(t testing.TB, tool, callID, runID string, args string) {
	t.Helper()
	m, err := events.NewCall(events.CallOptions{Source: "/test", ID: callID, RunID: runID}, events.Call{Tool: tool, Arguments: json.RawMessage(args)})
	if err != nil {
		t.Fatal(err)
	}
	b.publish(t, m)
}

func (b *testBundle) publish(t testing.TB, m *nats.Msg) {
	t.Helper()
	// Tried again while it fails: a test may publish while its server restarts.
	natstest.EventuallyNil(t, 30*time.Second, "JetStream to take a publish on "+m.Subject, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := b.js.PublishMsg(ctx, m)
		return err
	})
}

// collector reads every result stored in the results stream, with an ordered consumer
// that survives server restarts.
type collector struct {
	mu   sync.Mutex
	byID map[string][]events.Result
	raw  map[string][]*nats.Msg
	errs []error
}

func collect(t testing.TB, js jetstream.JetStream, cfg events.Config) *collector {
	t.Helper()
	c := &collector{byID: map[string][]events.Result{}, raw: map[string][]*nats.Msg{}}
	for _, stream := range cfg.ResultStreams() {
		c.consume(t, js, stream)
	}
	return c
}

// consume adds the results of stream (one results shard) to c.
func (c *collector) consume(t testing.TB, js jetstream.JetStream, stream string) {
	t.Helper()
	cons, err := js.OrderedConsumer(context.Background(), stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		nm := &nats.Msg{Subject: m.Subject(), Header: m.Headers(), Data: m.Data()}
		_, r, err := events.DecodeResult(events.CoreMsg(nm))
		c.mu.Lock()
		defer c.mu.Unlock()
		if err != nil {
			c.errs = append(c.errs, fmt.Errorf("result on %s does not decode: %w", m.Subject(), err))
			return
		}
		c.byID[r.CallID] = append(c.byID[r.CallID], r)
		c.raw[r.CallID] = append(c.raw[r.CallID], nm)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cc.Stop)
}

// wait waits for a result of each id and returns the first of each.
func (c *collector) wait(t testing.TB, timeout time.Duration, ids ...string) map[string]events.Result {
	t.Helper()
	natstest.Eventually(t, timeout, fmt.Sprintf("results of %d calls", len(ids)), func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, id := range ids {
			if len(c.byID[id]) == 0 {
				return false
			}
		}
		return true
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, err := range c.errs {
		t.Error(err)
	}
	out := make(map[string]events.Result, len(ids))
	for _, id := range ids {
		out[id] = c.byID[id][0]
	}
	return out
}

func (c *collector) one(t testing.TB, id string) events.Result {
	t.Helper()
	return c.wait(t, 15*time.Second, id)[id]
}

func (c *collector) count(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byID[id])
}

var echoSchema = json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false}`)

// echoRegistry serves echo, a safe idempotent tool returning its text, plus extra tools.
func echoRegistry(t testing.TB, names ...string) *tools.Registry {
	t.Helper()
	reg := tools.NewRegistry()
	for _, name := range append([]string{"echo"}, names...) {
		err := reg.AddFunc(tools.Definition{Name: name, Description: "Returns its text.", Parameters: echoSchema, Safe: true},
			func(ctx context.Context, args json.RawMessage) (any, error) {
				var a struct{ Text string }
				_ = json.Unmarshal(args, &a)
				return map[string]string{"text": a.Text}, nil
			})
		if err != nil {
			t.Fatal(err)
		}
	}
	return reg
}
