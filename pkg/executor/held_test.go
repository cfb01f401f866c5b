package executor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/executor"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// setupWith is setup with the stream settings of cfg.
func setupWith(t testing.TB, cfg events.Config) *testBundle {
	t.Helper()
	f := natstest.StartJetStream(t, cfg)
	b := &testBundle{srv: f.Srv, nc: f.NC, js: f.JS, cfg: f.Cfg}
	b.results = collect(t, f.JS, f.Cfg)
	return b
}

// runCounter counts a tool's runs per call id.
type runCounter struct {
	mu   sync.Mutex
	runs map[string]int
}

func (c *runCounter) add(ctx context.Context) {
	info, _ := tools.CallInfoFrom(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.runs == nil {
		c.runs = map[string]int{}
	}
	c.runs[info.CallID]++
}

func (c *runCounter) of(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runs[id]
}

// started is how many calls ran at least once.
func (c *runCounter) started() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.runs)
}

// slowTool adds tool name to reg: each run is counted in runs, then waits for d or
// until release is closed (nil: d alone) and answers "done".
func slowTool(t testing.TB, reg *tools.Registry, name string, idempotent bool, runs *runCounter, d time.Duration, release <-chan struct{}) {
	t.Helper()
	must(t, reg.AddFunc(tools.Definition{Name: name, Parameters: echoSchema, Safe: true, Idempotent: new(idempotent)},
		func(ctx context.Context, args json.RawMessage) (any, error) {
			runs.add(ctx)
			select {
			case <-time.After(d):
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return "done", nil
		}))
}

// heldByExecutors is how many calls of tool the executors hold (delivered, not acked)
// across the calls streams.
func (b *testBundle) heldByExecutors(t testing.TB, tool string) int {
	t.Helper()
	held := 0
	for _, stream := range b.cfg.CallStreams() {
		c, err := b.js.Consumer(context.Background(), stream, events.ConsumerName(tool))
		must(t, err)
		info, err := c.Info(context.Background())
		must(t, err)
		held += info.NumAckPending
	}
	return held
}

// More calls than slots, each running longer than the ack wait: the calls that wait for
// a slot on the executor are its calls as much as the running ones, and JetStream never
// hands one of them out again. Every call runs once and answers ok — no second run of an
// idempotent tool, no interrupted answer for a non-idempotent one.
func TestCallsWaitingForASlotAreNotRedelivered(t *testing.T) {
	t.Parallel()
	for _, idempotent := range []bool{true, false} {
		t.Run(fmt.Sprintf("idempotent=%t", idempotent), func(t *testing.T) {
			t.Parallel()
			cfg := testConfig()
			cfg.AckWait = tools.Duration(time.Second)
			b := setupWith(t, cfg)
			var runs runCounter
			reg := tools.NewRegistry()
			slowTool(t, reg, "slow", idempotent, &runs, cfg.AckWait.D()*13/10, nil)
			b.start(t, reg, executor.WithConcurrency(2))
			ids := make([]string, 8)
			for i := range ids {
				ids[i] = fmt.Sprintf("slow-%d", i)
				b.call(t, "slow", ids[i], "r", `{"text":"x"}`)
			}
			res := b.results.wait(t, 60*time.Second, ids...)
			for _, id := range ids {
				if r := res[id]; r.Status != events.StatusOK {
					t.Errorf("%s: %s %+v", id, r.Status, r.Error)
				}
				if n := runs.of(id); n != 1 {
					t.Errorf("%s ran %d times", id, n)
				}
			}
			assertOneResultEach(t, b, ids)
		})
	}
}

// Two replicas share a tool's consumer; one is stopped while it runs calls and holds
// others that wait for a slot. The waiting calls are handed back at once (not left to
// run out their ack wait, here longer than the test waits): the other replica runs them
// while the stopped one is still finishing its running calls, and every call runs once.
func TestStoppedReplicaHandsBackWaitingCalls(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.AckWait = tools.Duration(time.Minute)
	b := setupWith(t, cfg)
	var runsA, runsB runCounter
	release := make(chan struct{})
	regA := tools.NewRegistry()
	slowTool(t, regA, "slow", false, &runsA, time.Hour, release)
	stopA := b.start(t, regA, executor.WithConcurrency(2), executor.WithExecutorID("a"), executor.WithGracePeriod(time.Minute))
	ids := make([]string, 8)
	for i := range ids {
		ids[i] = fmt.Sprintf("slow-%d", i)
		b.call(t, "slow", ids[i], "r", `{"text":"x"}`)
	}
	// a runs two calls and holds at least one more waiting for a slot. (Both runs must
	// have begun: held calls alone can all be handed back at a's stop, on a loaded
	// machine, before a's slots start any.)
	natstest.Eventually(t, 10*time.Second, "a to run two calls and hold more beyond its slots", func() bool {
		return runsA.started() == 2 && b.heldByExecutors(t, "slow") > 2
	})
	regB := tools.NewRegistry()
	slowTool(t, regB, "slow", false, &runsB, 0, nil)
	b.start(t, regB, executor.WithConcurrency(2), executor.WithExecutorID("b"))
	stopped := make(chan error, 1)
	go func() { stopped <- stopA() }()

	// While a's two calls still run, b answers every other call.
	var byA []string
	natstest.Eventually(t, 20*time.Second, "b to answer the calls a did not start", func() bool {
		byA = byA[:0]
		for _, id := range ids {
			switch {
			case runsA.of(id) > 0:
				byA = append(byA, id)
			case b.results.count(id) == 0:
				return false
			}
		}
		return true
	})
	if len(byA) != 2 {
		t.Fatalf("a started %v, want two calls", byA)
	}
	close(release)
	if err := <-stopped; err != nil {
		t.Fatalf("stop a: %v", err)
	}
	res := b.results.wait(t, 20*time.Second, ids...)
	for _, id := range ids {
		r := res[id]
		if r.Status != events.StatusOK {
			t.Errorf("%s: %s %+v", id, r.Status, r.Error)
		}
		if n := runsA.of(id) + runsB.of(id); n != 1 {
			t.Errorf("%s ran %d times", id, n)
		}
		want := "b"
		if id == byA[0] || id == byA[1] {
			want = "a"
		}
		if r.Executor != want {
			t.Errorf("%s answered by %s, want %s", id, r.Executor, want)
		}
	}
	assertOneResultEach(t, b, ids)
}
