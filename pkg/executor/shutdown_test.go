package executor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/internal/testsupport/opstest"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/executor"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

func sleepRegistry(t testing.TB, d time.Duration, runs *atomic.Int32) *tools.Registry {
	t.Helper()
	reg := tools.NewRegistry()
	must(t, reg.AddFunc(tools.Definition{Name: "nap", Parameters: echoSchema, Safe: true},
		func(ctx context.Context, args json.RawMessage) (any, error) {
			runs.Add(1)
			select {
			case <-time.After(d):
				return "rested", nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}))
	return reg
}

// Stopping under load: Run returns nil, calls in flight finish, the rest stay queued
// for the next replica; every call ends with exactly one result.
func TestGracefulShutdownUnderLoad(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var runs atomic.Int32
	stop := b.start(t, sleepRegistry(t, 20*time.Millisecond, &runs), executor.WithConcurrency(8))
	n := 300
	ids := make([]string, n)
	for i := range n {
		ids[i] = fmt.Sprintf("s%04d", i)
		b.call(t, "nap", ids[i], "r", `{"text":"x"}`)
	}
	natstest.Eventually(t, 10*time.Second, "some calls to run", func() bool { return runs.Load() > 20 })
	if err := stop(); err != nil {
		t.Fatalf("Run returned %v, want nil", err)
	}
	answered := 0
	for _, id := range ids {
		answered += b.results.count(id)
	}
	if answered == n {
		t.Log("every call finished before the stop; the hand-over was not exercised")
	}
	b.start(t, sleepRegistry(t, 20*time.Millisecond, &runs), executor.WithConcurrency(8))
	res := b.results.wait(t, 30*time.Second, ids...)
	for _, id := range ids {
		if res[id].Status != events.StatusOK {
			t.Fatalf("%s: %+v", id, res[id])
		}
	}
	assertOneResultEach(t, b, ids)
}

// A call still running when the grace period ends is cancelled and handed back, and the
// next replica runs it to the end.
func TestShutdownHandsBackLongCalls(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var runs atomic.Int32
	stop := b.start(t, sleepRegistry(t, time.Hour, &runs), executor.WithGracePeriod(100*time.Millisecond))
	b.call(t, "nap", "long", "r", `{"text":"x"}`)
	natstest.Eventually(t, 10*time.Second, "the call to start", func() bool { return runs.Load() == 1 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if n := b.results.count("long"); n != 0 {
		t.Fatalf("a cancelled call got %d results; it should have been handed back", n)
	}
	b.start(t, sleepRegistry(t, 10*time.Millisecond, &runs))
	if r := b.results.one(t, "long"); r.Status != events.StatusOK {
		t.Errorf("handed-back call: %+v %+v", r, r.Error)
	}
}

// Metrics count calls by tool and status, retries and durations.
func TestMetrics(t *testing.T) {
	t.Parallel()
	b := setup(t)
	promReg := prometheus.NewRegistry()
	reg := echoRegistry(t)
	var fails atomic.Int32
	must(t, reg.AddFunc(tools.Definition{Name: "once_broken", Parameters: echoSchema, Safe: true,
		Retry: &tools.RetryPolicy{MaxRetries: intp(1), InitialBackoff: tools.Duration(time.Millisecond)}},
		func(ctx context.Context, args json.RawMessage) (any, error) {
			if fails.Add(1) == 1 {
				return nil, fmt.Errorf("first attempt fails")
			}
			return "ok", nil
		}))
	b.start(t, reg, executor.WithMetrics(promReg))
	b.waitServed(t, "once_broken")
	b.call(t, "echo", "m1", "r", `{"text":"x"}`)
	b.call(t, "echo", "m2", "r", `{}`)
	b.call(t, "once_broken", "m3", "r", `{"text":"x"}`)
	b.results.wait(t, 10*time.Second, "m1", "m2", "m3")
	natstest.Eventually(t, 5*time.Second, "metrics", func() bool {
		got := opstest.Metrics(t, promReg)
		return got[`toolfleet_executor_calls_total{status="ok",tool="echo"}`] == 1 &&
			got[`toolfleet_executor_calls_total{status="invalid",tool="echo"}`] == 1 &&
			got[`toolfleet_executor_calls_total{status="ok",tool="once_broken"}`] == 1 &&
			got[`toolfleet_executor_retries_total{tool="once_broken"}`] == 1 &&
			got[`toolfleet_executor_call_duration_seconds_count{tool="echo"}`] == 2 &&
			got[`toolfleet_executor_in_flight{tool="echo"}`] == 0
	})
}

// Stopping an executor that is still setting up (streams, consumers, catalog) is a clean
// stop: Run returns nil, however early the stop comes.
func TestStopDuringStartupIsClean(t *testing.T) {
	t.Parallel()
	b := setup(t)
	reg := tools.NewRegistry()
	for _, name := range []string{"a", "b", "c", "d"} {
		def := tools.Definition{Type: "function", Name: name, Parameters: json.RawMessage(`{"type":"object"}`)}
		if err := reg.AddFunc(def, func(context.Context, json.RawMessage) (any, error) { return nil, nil }); err != nil {
			t.Fatal(err)
		}
	}
	for _, after := range []time.Duration{0, time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond} {
		ex, err := executor.New(b.srv.Connect(), reg, executor.WithStreamConfig(b.cfg))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(after, cancel)
		if err := ex.Run(ctx); err != nil {
			t.Errorf("stop after %s: Run = %v, want nil", after, err)
		}
	}
}
