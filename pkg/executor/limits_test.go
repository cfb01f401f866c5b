package executor_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/executor"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// callWithArgs publishes a call of tool with args, made with identity caller.
func (b *testBundle) callWithArgs(t testing.TB, caller events.Identity, tool, callID, args string) {
	t.Helper()
	m, err := events.NewCall(events.CallOptions{Source: "/test", ID: callID, RunID: "limits", Caller: caller},
		events.Call{Tool: tool, Arguments: json.RawMessage(args)})
	if err != nil {
		t.Fatal(err)
	}
	b.publish(t, m)
}

// startReady runs an executor like start, and returns once it serves its tools (start
// returns once any replica serves them).
func (b *testBundle) startReady(t testing.TB, reg *tools.Registry, opts ...executor.Option) {
	t.Helper()
	opts = append([]executor.Option{executor.WithStreamConfig(b.cfg), executor.WithGracePeriod(5 * time.Second)}, opts...)
	ex, err := executor.New(b.srv.Connect(), reg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = ex.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-ex.Ready():
	case <-time.After(15 * time.Second):
		t.Fatal("executor not ready within 15s")
	}
}

// A rate limit holds for the fleet, not per replica: 30 calls of a 5 calls/s tool (burst
// 5) over two replicas all run, once each, and the k-th start comes no earlier than
// (k-5)/5 s after the calls were published — so the 30 take at least 5s. The bound holds
// by construction (each start waits for its reservation), so a slow machine only makes
// the run longer.
func TestRateLimitHoldsAcrossReplicas(t *testing.T) {
	b := setup(t)
	const rate, burst, n = 5.0, 5, 30
	var mu sync.Mutex
	var starts []time.Time
	newReg := func() *tools.Registry {
		reg := tools.NewRegistry()
		must(t, reg.AddFunc(tools.Definition{Name: "metered", Parameters: echoSchema, Safe: true,
			RateLimit: &tools.RateLimit{PerSecond: rate, Burst: burst}},
			func(ctx context.Context, args json.RawMessage) (any, error) {
				mu.Lock()
				starts = append(starts, time.Now())
				mu.Unlock()
				return true, nil
			}))
		return reg
	}
	b.startReady(t, newReg(), executor.WithConcurrency(4), executor.WithExecutorID("r1"))
	b.startReady(t, newReg(), executor.WithConcurrency(4), executor.WithExecutorID("r2"))
	published := time.Now()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("rate-%02d", i)
		b.call(t, "metered", ids[i], "limits", `{"text":"x"}`)
	}
	res := b.results.wait(t, 60*time.Second, ids...)
	byExecutor := map[string]int{}
	for _, id := range ids {
		r := res[id]
		if r.Status != events.StatusOK {
			t.Errorf("%s: %s %+v", id, r.Status, r.Error)
		}
		if c := b.results.count(id); c != 1 {
			t.Errorf("%s answered %d times", id, c)
		}
		byExecutor[r.Executor]++
	}
	mu.Lock()
	defer mu.Unlock()
	if len(starts) != n {
		t.Fatalf("the tool ran %d times for %d calls", len(starts), n)
	}
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	interval := time.Duration(float64(time.Second) / rate)
	for k, s := range starts {
		if earliest := published.Add(time.Duration(k+1-burst) * interval); s.Before(earliest.Add(-time.Millisecond)) {
			t.Errorf("start %d came %s after publishing; the rate allows it no earlier than %s", k+1,
				s.Sub(published), earliest.Sub(published))
		}
	}
	t.Logf("%d calls at %g/s (burst %d) over 2 replicas %v: last start %s after publishing",
		n, rate, burst, byExecutor, starts[n-1].Sub(published).Round(time.Millisecond))
}

// A call whose start is further away than its tool lets it wait is answered rate_limited
// at once, with the wait as retry_after_ms; it never runs and nothing is lost.
func TestRateLimitedAnswer(t *testing.T) {
	b := setup(t)
	var mu sync.Mutex
	runs := 0
	reg := tools.NewRegistry()
	must(t, reg.AddFunc(tools.Definition{Name: "slowrate", Parameters: echoSchema, Safe: true,
		RateLimit: &tools.RateLimit{PerSecond: 0.1}, LimitWait: tools.Duration(time.Second)},
		func(ctx context.Context, args json.RawMessage) (any, error) {
			mu.Lock()
			runs++
			mu.Unlock()
			return true, nil
		}))
	b.start(t, reg, executor.WithConcurrency(8))
	ids := []string{"sr-1", "sr-2", "sr-3", "sr-4"}
	for _, id := range ids {
		b.call(t, "slowrate", id, "limits", `{"text":"x"}`)
	}
	res := b.results.wait(t, 30*time.Second, ids...)
	ok, limited := 0, 0
	for _, id := range ids {
		r := res[id]
		switch {
		case r.Status == events.StatusOK:
			ok++
		case r.Error != nil && r.Error.Code == tools.CodeRateLimited:
			limited++
			if r.Error.RetryAfterMS <= 0 || r.Error.RetryAfterMS > 10_000 || r.Attempts != 0 || r.Status != events.StatusError {
				t.Errorf("%s: refused as %+v, status %s, attempts %d; want retry_after_ms in (0, 10000], no attempt", id, r.Error, r.Status, r.Attempts)
			}
		default:
			t.Errorf("%s: %s %+v", id, r.Status, r.Error)
		}
		if c := b.results.count(id); c != 1 {
			t.Errorf("%s answered %d times", id, c)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if ok != 1 || limited != 3 || runs != 1 {
		t.Errorf("%d ok, %d rate_limited, %d runs; want 1, 3 and 1 (one call per 10s, a wait of 1s at most)", ok, limited, runs)
	}
	// On the wire: the result's error carries the code and retry_after_ms.
	for _, id := range ids {
		if r := res[id]; r.Error != nil && r.Error.Code == tools.CodeRateLimited {
			b.results.mu.Lock()
			body := string(b.results.raw[id][0].Data)
			b.results.mu.Unlock()
			if !strings.Contains(body, `"code":"rate_limited"`) || !strings.Contains(body, `"retry_after_ms":`) {
				t.Errorf("result body %s lacks the code or retry_after_ms", body)
			}
			break
		}
	}
}

// runningCounter counts the calls of each tenant running at once and remembers the most.
type runningCounter struct {
	mu       sync.Mutex
	now, top map[string]int
}

func (c *runningCounter) enter(tenant string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now[tenant]++
	c.top[tenant] = max(c.top[tenant], c.now[tenant])
}

func (c *runningCounter) leave(tenant string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now[tenant]--
}

func (c *runningCounter) get(m map[string]int, tenant string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return m[tenant]
}

// A tenant's cap holds across the fleet and leaves room for the others: with a cap of 2,
// tenant A's 8 calls (which block until the test lets them go) never have more than 2
// running across both replicas, and tenant B's calls run and finish while A's wait.
func TestTenantCapAcrossReplicas(t *testing.T) {
	b := setup(t)
	gate := make(chan struct{})
	counter := &runningCounter{now: map[string]int{}, top: map[string]int{}}
	newReg := func() *tools.Registry {
		reg := tools.NewRegistry()
		must(t, reg.AddFunc(tools.Definition{Name: "capped", Parameters: echoSchema, Safe: true, MaxInFlightPerTenant: 2},
			func(ctx context.Context, args json.RawMessage) (any, error) {
				info, _ := tools.CallInfoFrom(ctx)
				tenant := info.Tenant
				counter.enter(tenant)
				defer counter.leave(tenant)
				if tenant == "a" {
					select {
					case <-gate:
					case <-ctx.Done():
						return nil, ctx.Err()
					}
				} else {
					time.Sleep(20 * time.Millisecond)
				}
				return tenant, nil
			}))
		return reg
	}
	b.startReady(t, newReg(), executor.WithConcurrency(4), executor.WithExecutorID("r1"))
	b.startReady(t, newReg(), executor.WithConcurrency(4), executor.WithExecutorID("r2"))
	a, bb := events.Identity{Tenant: "a", Role: "user"}, events.Identity{Tenant: "b", Role: "user"}
	var aIDs, bIDs []string
	for i := range 8 {
		id := fmt.Sprintf("a-%d", i)
		aIDs = append(aIDs, id)
		b.callWithArgs(t, a, "capped", id, `{"text":"x"}`)
	}
	for i := range 4 {
		id := fmt.Sprintf("b-%d", i)
		bIDs = append(bIDs, id)
		b.callWithArgs(t, bb, "capped", id, `{"text":"x"}`)
	}
	// B's calls finish while A's are held at the gate.
	for id, r := range b.results.wait(t, 30*time.Second, bIDs...) {
		if r.Status != events.StatusOK {
			t.Errorf("%s: %s %+v", id, r.Status, r.Error)
		}
	}
	defer func() {
		if t.Failed() {
			b.results.mu.Lock()
			t.Logf("results %v now %v top %v", b.results.byID, counter.now, counter.top)
			b.results.mu.Unlock()
		}
	}()
	for i := 0; i < 100 && counter.get(counter.now, "a") != 2; i++ {
		time.Sleep(100 * time.Millisecond)
	}
	if counter.get(counter.now, "a") != 2 {
		t.Fatal("tenant a does not have 2 calls running")
	}
	for _, id := range aIDs {
		if b.results.count(id) != 0 {
			t.Errorf("%s answered before the gate opened", id)
		}
	}
	close(gate)
	res := b.results.wait(t, 30*time.Second, aIDs...)
	waited := 0
	for _, id := range aIDs {
		r := res[id]
		if r.Status != events.StatusOK {
			t.Errorf("%s: %s %+v", id, r.Status, r.Error)
		}
		if c := b.results.count(id); c != 1 {
			t.Errorf("%s answered %d times", id, c)
		}
		if r.LimitWaitMS > 0 {
			waited++
		}
	}
	if top := counter.get(counter.top, "a"); top > 2 {
		t.Errorf("tenant a had %d calls running at once; the cap is 2", top)
	}
	if top := counter.get(counter.top, "b"); top > 2 {
		t.Errorf("tenant b had %d calls running at once; the cap is 2", top)
	}
	if waited == 0 {
		t.Errorf("no call of tenant a shows a wait for its limit (limit_wait_ms)")
	}
}

// A replica that dies holding a tenant slot does not keep it: its lease runs out and the
// call, redelivered to another replica, runs there, answered once.
func TestTenantSlotOfADeadReplicaIsFreed(t *testing.T) {
	b := setup(t)
	hang := make(chan struct{})
	defer close(hang)
	started := make(chan string, 4)
	newReg := func(block bool) *tools.Registry {
		reg := tools.NewRegistry()
		must(t, reg.AddFunc(tools.Definition{Name: "solo", Parameters: echoSchema, Safe: true, MaxInFlightPerTenant: 1},
			func(ctx context.Context, args json.RawMessage) (any, error) {
				info, _ := tools.CallInfoFrom(ctx)
				started <- info.CallID
				if block {
					<-hang // the dead replica's tool never finishes on its own
				}
				return true, nil
			}))
		return reg
	}
	deadNC := b.srv.Connect()
	stopDead := b.startOn(t, deadNC, newReg(true), executor.WithExecutorID("dead"), executor.WithLimitLease(2*time.Second),
		executor.WithGracePeriod(0))
	a := events.Identity{Tenant: "a", Role: "user"}
	b.callWithArgs(t, a, "solo", "first", `{"text":"x"}`)
	select {
	case id := <-started:
		if id != "first" {
			t.Fatalf("started %s", id)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the first call did not start")
	}
	deadNC.Close() // the replica is cut off: no renewals, no release, no ack
	b.start(t, newReg(false), executor.WithExecutorID("alive"), executor.WithLimitLease(2*time.Second))
	b.callWithArgs(t, a, "solo", "second", `{"text":"x"}`)
	res := b.results.wait(t, 60*time.Second, "first", "second")
	for id, r := range res {
		if r.Status != events.StatusOK || r.Executor != "alive" {
			t.Errorf("%s: %s by %s %+v", id, r.Status, r.Executor, r.Error)
		}
	}
	_ = stopDead()
	for _, id := range []string{"first", "second"} {
		if c := b.results.count(id); c != 1 {
			t.Errorf("%s answered %d times", id, c)
		}
	}
}

// Tools without limits pay nothing: no limits bucket exists unless a served tool declares
// a limit.
func TestNoLimitsNoBucket(t *testing.T) {
	b := setup(t)
	b.start(t, echoRegistry(t))
	b.call(t, "echo", "plain", "limits", `{"text":"x"}`)
	b.results.one(t, "plain")
	if _, err := b.js.KeyValue(context.Background(), events.BucketLimits); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Errorf("limits bucket with no limited tool: %v, want not found", err)
	}
}

// A call waiting for a tenant slot when its executor stops is handed back, not lost: it
// is answered once, by whichever replica runs it.
func TestWaitingCallSurvivesShutdown(t *testing.T) {
	b := setup(t)
	gate := make(chan struct{})
	started := make(chan string, 4)
	newReg := func() *tools.Registry {
		reg := tools.NewRegistry()
		must(t, reg.AddFunc(tools.Definition{Name: "single", Parameters: echoSchema, Safe: true, MaxInFlightPerTenant: 1},
			func(ctx context.Context, args json.RawMessage) (any, error) {
				info, _ := tools.CallInfoFrom(ctx)
				started <- info.CallID
				if info.CallID == "held" {
					<-gate
				}
				return true, nil
			}))
		return reg
	}
	stop1 := b.start(t, newReg(), executor.WithExecutorID("r1"))
	a := events.Identity{Tenant: "a", Role: "user"}
	b.callWithArgs(t, a, "single", "held", `{"text":"x"}`)
	if id := <-started; id != "held" {
		t.Fatalf("started %s", id)
	}
	b.callWithArgs(t, a, "single", "waiting", `{"text":"x"}`)
	b.startReady(t, newReg(), executor.WithExecutorID("r2"))
	stopped := make(chan error, 1)
	go func() { stopped <- stop1() }() // "waiting" is handed back; "held" runs on in the grace period
	time.Sleep(500 * time.Millisecond) // let r1 see the stop first (either order is correct)
	close(gate)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	for id, r := range b.results.wait(t, 30*time.Second, "held", "waiting") {
		if r.Status != events.StatusOK {
			t.Errorf("%s: %s %+v", id, r.Status, r.Error)
		}
		t.Logf("%s answered by %s after waiting %d ms for its limit", id, r.Executor, r.LimitWaitMS)
	}
	for _, id := range []string{"held", "waiting"} {
		if c := b.results.count(id); c != 1 {
			t.Errorf("%s answered %d times", id, c)
		}
	}
}
