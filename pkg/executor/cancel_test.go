package executor_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/executor"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// slowTools serves "slow" (idempotent) and "slow_charge" (not idempotent): each reports
// on started when it begins, then waits for its context to end or for release to be
// closed, and counts its runs and the runs that saw their context end.
type slowTools struct {
	reg      *tools.Registry
	started  chan string // tenant/call id of each run, as it begins
	release  chan struct{}
	runs     atomic.Int32
	sawEnd   atomic.Int32
	mu       sync.Mutex
	finished map[string]bool
}

func newSlowTools(t testing.TB) *slowTools {
	t.Helper()
	s := &slowTools{reg: tools.NewRegistry(), started: make(chan string, 16), release: make(chan struct{}), finished: map[string]bool{}}
	for _, d := range []tools.Definition{
		{Name: "slow", Parameters: json.RawMessage(`{"type":"object"}`), Safe: true},
		{Name: "slow_charge", Parameters: json.RawMessage(`{"type":"object"}`), Safe: true, Idempotent: new(false)},
	} {
		must(t, s.reg.AddFunc(d, func(ctx context.Context, _ json.RawMessage) (any, error) {
			info, _ := tools.CallInfoFrom(ctx)
			s.runs.Add(1)
			s.started <- info.Tenant + "/" + info.CallID
			select {
			case <-ctx.Done():
				s.sawEnd.Add(1)
				return nil, ctx.Err()
			case <-s.release:
				s.mu.Lock()
				s.finished[info.Tenant+"/"+info.CallID] = true
				s.mu.Unlock()
				return "done", nil
			}
		}))
	}
	return s
}

func (s *slowTools) awaitStart(t testing.TB, want string) {
	t.Helper()
	select {
	case got := <-s.started:
		if got != want {
			t.Fatalf("started %s, want %s", got, want)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("%s did not start", want)
	}
}

func (b *testBundle) cancel(t testing.TB, sender events.Identity, tool, callID string) {
	t.Helper()
	m, err := events.NewCancel("/test", sender, tool, callID, events.Cancel{RunID: "r", Reason: "run canceled", By: "ann"})
	if err != nil {
		t.Fatal(err)
	}
	b.publish(t, m)
}

func (b *testBundle) callAs(t testing.TB, caller events.Identity, tool, callID string) {
	t.Helper()
	m, err := events.NewCall(events.CallOptions{Source: "/test", ID: callID, RunID: "r", Caller: caller},
		events.Call{Tool: tool, Arguments: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	b.publish(t, m)
}

func wantCanceled(t testing.TB, r events.Result, status events.Status, code tools.Code) {
	t.Helper()
	if r.Status != status || r.Error == nil || r.Error.Code != code {
		t.Fatalf("result %+v (error %+v), want %s / %s", r, r.Error, status, code)
	}
	var shown tools.ErrorOutput
	if err := json.Unmarshal(r.Output, &shown); err != nil || shown.Error == nil || shown.Error.Code != code {
		t.Errorf("output %s is not the model's error shape with code %s", r.Output, code)
	}
}

// A running call's context ends when its cancel is published: an idempotent tool's
// result says canceled, a non-idempotent one's interrupted (its effect may be half
// done).
func TestCancelRunningCall(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := newSlowTools(t)
	b.start(t, s.reg)
	b.waitServed(t, "slow_charge")

	b.call(t, "slow", "long-1", "r", `{}`)
	s.awaitStart(t, "/long-1")
	b.cancel(t, events.Identity{}, "slow", "long-1")
	r := b.results.one(t, "long-1")
	wantCanceled(t, r, events.StatusCanceled, tools.CodeCanceled)
	if r.Attempts != 1 {
		t.Errorf("attempts %d, want 1", r.Attempts)
	}

	b.call(t, "slow_charge", "long-2", "r", `{}`)
	s.awaitStart(t, "/long-2")
	b.cancel(t, events.Identity{}, "slow_charge", "long-2")
	wantCanceled(t, b.results.one(t, "long-2"), events.StatusInterrupted, tools.CodeInterrupted)
	natstest.Eventually(t, 10*time.Second, "both tools see their context end", func() bool { return s.sawEnd.Load() == 2 })
}

// A cancel published before its call is delivered answers the call canceled without
// running it: whether the executor hears the cancel (it is running) or finds it stored
// (it started after the cancel).
func TestCancelBeforeDelivery(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := newSlowTools(t)
	// Stored before any executor runs: found by the look-up.
	b.cancel(t, events.Identity{}, "slow", "early-1")
	b.call(t, "slow", "early-1", "r", `{}`)
	b.start(t, s.reg)
	wantCanceled(t, b.results.one(t, "early-1"), events.StatusCanceled, tools.CodeCanceled)
	// Published while the executor runs, before the call: heard, and stored.
	b.cancel(t, events.Identity{}, "slow_charge", "early-2")
	b.call(t, "slow_charge", "early-2", "r", `{}`)
	r := b.results.one(t, "early-2")
	wantCanceled(t, r, events.StatusCanceled, tools.CodeCanceled)
	if r.Attempts != 0 || s.runs.Load() != 0 {
		t.Errorf("attempts %d, runs %d: a call canceled before delivery must not run", r.Attempts, s.runs.Load())
	}
	// A second executor, started now, finds the cancels stored too.
	b.start(t, s.reg)
	b.cancel(t, events.Identity{}, "slow", "early-3")
	b.call(t, "slow", "early-3", "r", `{}`)
	wantCanceled(t, b.results.one(t, "early-3"), events.StatusCanceled, tools.CodeCanceled)
	if n := s.runs.Load(); n != 0 {
		t.Errorf("%d runs of canceled calls", n)
	}
}

// A cancel after the call finished changes nothing: its result stays the one stored,
// and no second result appears.
func TestCancelAfterCompletion(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := newSlowTools(t)
	close(s.release) // every run finishes at once
	b.start(t, s.reg)
	b.call(t, "slow", "done-1", "r", `{}`)
	if r := b.results.one(t, "done-1"); r.Status != events.StatusOK {
		t.Fatalf("result %+v", r)
	}
	b.cancel(t, events.Identity{}, "slow", "done-1")
	// The call re-published after its cancel is still answered once, by its first result.
	b.call(t, "slow", "done-1", "r", `{}`)
	b.call(t, "slow", "done-2", "r", `{}`) // a later call, to know the executor went past both
	b.results.one(t, "done-2")
	time.Sleep(200 * time.Millisecond)
	if n := b.results.count("done-1"); n != 1 {
		t.Errorf("%d results of a call canceled after it finished, want 1", n)
	}
	if r := b.results.one(t, "done-1"); r.Status != events.StatusOK {
		t.Errorf("result changed to %+v", r)
	}
}

// A tenant's cancel does not reach another tenant's call of the same id.
func TestCancelIsTenants(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := newSlowTools(t)
	b.start(t, s.reg)
	acme, globex := events.Identity{Tenant: "acme", Role: "user"}, events.Identity{Tenant: "globex", Role: "user"}
	b.callAs(t, acme, "slow", "same")
	s.awaitStart(t, "acme/same")
	b.cancel(t, globex, "slow", "same")            // globex cancels its own "same" (not running)
	b.cancel(t, events.Identity{}, "slow", "same") // and an anonymous caller its own
	// The canceled globex call is answered canceled when it comes, without running.
	b.callAs(t, globex, "slow", "same")
	natstest.Eventually(t, 15*time.Second, "globex's call answered", func() bool { return b.results.count("same") == 1 })
	close(s.release)
	natstest.Eventually(t, 15*time.Second, "acme's call answered", func() bool { return b.results.count("same") == 2 })
	b.results.mu.Lock()
	byTenant := map[string]events.Status{}
	for _, r := range b.results.byID["same"] {
		byTenant[r.Caller.Tenant] = r.Status
	}
	b.results.mu.Unlock()
	if byTenant["acme"] != events.StatusOK || byTenant["globex"] != events.StatusCanceled {
		t.Errorf("statuses by tenant %v; want acme ok (another tenant's cancel), globex canceled", byTenant)
	}
	if s.runs.Load() != 1 {
		t.Errorf("%d runs, want 1 (acme's)", s.runs.Load())
	}
}

// A call parked for approval is answered canceled when its cancel comes, and an
// approval arriving after it runs nothing.
func TestCancelParkedCall(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var written sync.Map
	b.start(t, writeRegistry(t, &written), executor.WithApprovalTimeout(time.Minute))
	requests := subscribe(t, b, "toolfleet.event.approval.requested.write_file.*")
	b.call(t, "write_file", "parked-1", "r", `{"path":"a","text":"b"}`)
	req := awaitRequest(t, requests)
	b.cancel(t, events.Identity{}, "write_file", "parked-1")
	wantCanceled(t, b.results.one(t, "parked-1"), events.StatusCanceled, tools.CodeCanceled)
	b.answer(t, req, events.ApprovalAnswer{Decision: events.DecisionApprove, By: "ann"})
	time.Sleep(300 * time.Millisecond)
	if _, ran := written.Load("parked-1"); ran || b.results.count("parked-1") != 1 {
		t.Errorf("a canceled parked call ran (%v) or was answered %d times", ran, b.results.count("parked-1"))
	}
}

// A cancel heard while a call waits to be retried ends the wait: the call is answered
// canceled after its first attempt, not tried again.
func TestCancelDuringBackoff(t *testing.T) {
	t.Parallel()
	b := setup(t)
	failed := make(chan struct{}, 4)
	reg := tools.NewRegistry()
	must(t, reg.AddFunc(tools.Definition{Name: "flaky", Parameters: json.RawMessage(`{"type":"object"}`), Safe: true,
		Retry: &tools.RetryPolicy{MaxRetries: new(1), InitialBackoff: tools.Duration(time.Minute), MaxBackoff: tools.Duration(time.Minute)}},
		func(context.Context, json.RawMessage) (any, error) {
			failed <- struct{}{}
			return nil, errors.New("upstream down")
		}))
	b.start(t, reg)
	b.call(t, "flaky", "f1", "r", `{}`)
	<-failed
	b.cancel(t, events.Identity{}, "flaky", "f1")
	r := b.results.one(t, "f1")
	wantCanceled(t, r, events.StatusCanceled, tools.CodeCanceled)
	if r.Attempts != 1 {
		t.Errorf("attempts %d, want 1: a canceled call is not tried again", r.Attempts)
	}
}
