package executor_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/executor"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

func intp(n int) *int           { return &n }
func floatp(f float64) *float64 { return &f }

// A failing tool is retried per its policy; the result counts the attempts, and the
// attempts are spaced by at least the backoff.
func TestRetriesWithBackoff(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var mu sync.Mutex
	var starts []time.Time
	var attemptsSeen []int
	reg := tools.NewRegistry()
	policy := &tools.RetryPolicy{MaxRetries: intp(3), InitialBackoff: tools.Duration(80 * time.Millisecond),
		Multiplier: 2, Jitter: floatp(0)}
	must(t, reg.AddFunc(tools.Definition{Name: "flaky", Parameters: echoSchema, Safe: true, Retry: policy},
		func(ctx context.Context, args json.RawMessage) (any, error) {
			info, _ := tools.CallInfoFrom(ctx)
			mu.Lock()
			defer mu.Unlock()
			starts = append(starts, time.Now())
			attemptsSeen = append(attemptsSeen, info.Attempt)
			if len(starts) < 3 {
				return nil, errors.New("upstream unavailable")
			}
			return "ok", nil
		}))
	must(t, reg.AddFunc(tools.Definition{Name: "broken", Parameters: echoSchema, Safe: true,
		Retry: &tools.RetryPolicy{MaxRetries: intp(2), InitialBackoff: tools.Duration(10 * time.Millisecond)}},
		func(ctx context.Context, args json.RawMessage) (any, error) { return nil, errors.New("always broken") }))
	must(t, reg.AddFunc(tools.Definition{Name: "refuses", Parameters: echoSchema, Safe: true},
		func(ctx context.Context, args json.RawMessage) (any, error) {
			return nil, tools.Errorf(tools.CodeInvalidInput, "text must be a city")
		}))
	b.start(t, reg)
	b.call(t, "flaky", "c1", "r", `{"text":"x"}`)
	b.call(t, "broken", "c2", "r", `{"text":"x"}`)
	b.call(t, "refuses", "c3", "r", `{"text":"x"}`)
	res := b.results.wait(t, 15*time.Second, "c1", "c2", "c3")

	if r := res["c1"]; r.Status != events.StatusOK || r.Attempts != 3 || string(r.Output) != `"ok"` {
		t.Errorf("flaky: %+v", r)
	}
	mu.Lock()
	if len(starts) != 3 || attemptsSeen[0] != 1 || attemptsSeen[2] != 3 {
		t.Fatalf("flaky ran %d times with attempts %v", len(starts), attemptsSeen)
	}
	for i, want := range []time.Duration{80 * time.Millisecond, 160 * time.Millisecond} {
		if gap := starts[i+1].Sub(starts[i]); gap < want {
			t.Errorf("retry %d came %s after the previous attempt, before its backoff of %s", i+1, gap, want)
		}
	}
	mu.Unlock()
	// Each attempt is on the result's timeline, in order, the failed ones with their code.
	if s := res["c1"].AttemptSpans; len(s) != 3 || s[0].Code != tools.CodeToolFailed || s[1].Code != tools.CodeToolFailed ||
		s[2].Code != "" || s[1].StartedAt.Before(s[0].FinishedAt) || !s[0].StartedAt.Equal(res["c1"].StartedAt) {
		t.Errorf("flaky's attempt spans: %+v", s)
	}
	if s := res["c3"].AttemptSpans; s != nil {
		t.Errorf("a call run once has no attempt spans: %+v", s)
	}
	if r := res["c2"]; r.Status != events.StatusError || r.Attempts != 3 || r.Error.Code != tools.CodeToolFailed ||
		!strings.Contains(r.Error.Message, "always broken") {
		t.Errorf("broken: %+v %+v", r, r.Error)
	}
	if r := res["c3"]; r.Status != events.StatusInvalid || r.Attempts != 1 {
		t.Errorf("invalid input is final at once: %+v", r)
	}
}

// A tool running past its timeout is cut off with status timeout.
func TestTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t)
	reg := tools.NewRegistry()
	must(t, reg.AddFunc(tools.Definition{Name: "slow", Parameters: echoSchema, Safe: true,
		Timeout: tools.Duration(100 * time.Millisecond), Retry: &tools.RetryPolicy{MaxRetries: intp(1), InitialBackoff: tools.Duration(10 * time.Millisecond)}},
		func(ctx context.Context, args json.RawMessage) (any, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}))
	b.start(t, reg)
	b.call(t, "slow", "c1", "r", `{"text":"x"}`)
	r := b.results.one(t, "c1")
	if r.Status != events.StatusTimeout || r.Error.Code != tools.CodeTimeout || r.Attempts != 2 {
		t.Errorf("result %+v %+v", r, r.Error)
	}
	// A call whose own deadline has passed is not run.
	m, _ := events.NewCall(events.CallOptions{Source: "/test", ID: "c2", RunID: "r"}, events.Call{Tool: "slow", Arguments: json.RawMessage(`{"text":"x"}`)})
	m.Header.Set(events.HeaderDeadline, time.Now().Add(-time.Second).UTC().Format(time.RFC3339Nano))
	b.publish(t, m)
	if r := b.results.one(t, "c2"); r.Status != events.StatusTimeout || r.Attempts != 0 ||
		!strings.Contains(r.Error.Message, "deadline") {
		t.Errorf("expired call: %+v %+v", r, r.Error)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Every kind of bad input gets a clear answer (or, when no caller can be addressed, a
// dead letter), and the executor keeps serving.
func TestBadInputs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.MaxMsgSize = 1024
	reg := echoRegistry(t)
	must(t, reg.AddFunc(tools.Definition{Name: "panics", Parameters: echoSchema, Safe: true,
		Retry: &tools.RetryPolicy{MaxRetries: intp(0)}},
		func(ctx context.Context, args json.RawMessage) (any, error) { panic("boom") }))
	b.start(t, reg)
	b.waitServed(t, "panics")
	dlq := subscribe(t, b, "toolfleet.dlq.>")

	raw := func(id, typ, body string) *nats.Msg {
		m := nats.NewMsg("toolfleet.call.echo")
		m.Header.Set("ce-specversion", "1.0")
		if id != "" {
			m.Header.Set("ce-id", id)
		}
		if typ != "" {
			m.Header.Set("ce-type", typ)
		}
		m.Header.Set("ce-source", "/test")
		m.Header.Set("ce-runid", "bad")
		m.Data = []byte(body)
		return m
	}
	tests := []struct {
		name   string
		msg    *nats.Msg
		status events.Status
		code   tools.Code
		text   string
	}{
		{"malformed arguments", raw("b1", events.TypeCall, `{"arguments":"{\"text\": "}`), events.StatusInvalid, tools.CodeInvalidInput, ""},
		{"schema violation", raw("b2", events.TypeCall, `{"arguments":{"text":5}}`), events.StatusInvalid, tools.CodeInvalidInput, ""},
		{"missing required", raw("b3", events.TypeCall, `{"arguments":{}}`), events.StatusInvalid, tools.CodeInvalidInput, ""},
		{"body not JSON", raw("b4", events.TypeCall, `text: hi`), events.StatusInvalid, tools.CodeInvalidEvent, "not valid JSON"},
		{"missing type", raw("b5", "", `{"arguments":{"text":"x"}}`), events.StatusInvalid, tools.CodeInvalidEvent, "ce-type"},
		{"wrong type", raw("b6", events.TypeResult, `{"arguments":{"text":"x"}}`), events.StatusInvalid, tools.CodeInvalidEvent, "carries"},
		{"oversized", raw("b7", events.TypeCall, `{"arguments":{"text":"`+strings.Repeat("x", 4000)+`"}}`), events.StatusInvalid, tools.CodeInputTooLarge, "exceeds the limit"},
		{"tool mismatch", raw("b8", events.TypeCall, `{"tool":"other","arguments":{"text":"x"}}`), events.StatusInvalid, tools.CodeInvalidEvent, "names tool"},
	}
	for _, tt := range tests {
		b.publish(t, tt.msg)
	}
	b.call(t, "panics", "b9", "bad", `{"text":"x"}`)
	for _, tt := range tests {
		r := b.results.one(t, tt.msg.Header.Get("ce-id"))
		if r.Status != tt.status || r.Error == nil || r.Error.Code != tt.code || !strings.Contains(r.Error.Message, tt.text) {
			t.Errorf("%s: result %+v, error %+v; want %s/%s mentioning %q", tt.name, r, r.Error, tt.status, tt.code, tt.text)
		}
		if r.Attempts != 0 {
			t.Errorf("%s: the tool ran (%d attempts)", tt.name, r.Attempts)
		}
	}
	if r := b.results.one(t, "b2"); len(r.Error.Violations) == 0 {
		t.Errorf("schema violation without violations: %+v", r.Error)
	}
	if r := b.results.one(t, "b9"); r.Status != events.StatusError || r.Error.Code != tools.CodeToolPanic || !strings.Contains(r.Error.Message, "boom") {
		t.Errorf("panic: %+v %+v", r, r.Error)
	}

	// No call id: nobody to answer, so a dead letter with the reason and the message.
	b.publish(t, raw("", events.TypeCall, `{"arguments":{"text":"x"}}`))
	plain := nats.NewMsg("toolfleet.call.echo")
	plain.Data = []byte(`{"text":"no headers at all"}`)
	b.publish(t, plain)
	// The two are handled concurrently: their dead letters may come in either order.
	reasons := map[string]string{}
	for range 2 {
		m, err := dlq.NextMsg(15 * time.Second)
		if err != nil {
			t.Fatalf("dead letters so far %v; a second is missing: %v", reasons, err)
		}
		e, err := events.Decode(events.CoreMsg(m), 0)
		if err != nil {
			t.Fatal(err)
		}
		var dl events.DeadLetter
		must(t, e.DataAs(&dl))
		if dl.Subject != "toolfleet.call.echo" || len(dl.Body) == 0 {
			t.Errorf("dead letter %+v", dl)
		}
		reasons[string(dl.Body)] = dl.Reason
	}
	for body, want := range map[string]string{`{"arguments":{"text":"x"}}`: "ce-id is missing", `{"text":"no headers at all"}`: "ce-specversion"} {
		if !strings.Contains(reasons[body], want) {
			t.Errorf("dead letter of %s: reason %q, want it to mention %s", body, reasons[body], want)
		}
	}
	// Still serving.
	b.call(t, "echo", "after", "r", `{"text":"still here"}`)
	if r := b.results.one(t, "after"); r.Status != events.StatusOK {
		t.Errorf("after bad input: %+v", r)
	}
}

func subscribe(t testing.TB, b *testBundle, subject string) *nats.Subscription {
	t.Helper()
	sub, err := b.nc.SubscribeSync(subject)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return sub
}

// A call of a tool no executor serves is answered no_such_tool after the configured
// time, and removed from the work queue; a call of a served tool is left alone.
func TestNoSuchTool(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start(t, echoRegistry(t), executor.WithNoSuchToolTimeout(300*time.Millisecond))
	b.call(t, "ghost", "g1", "r", `{"text":"x"}`)
	b.call(t, "echo", "e1", "r", `{"text":"x"}`)
	r := b.results.one(t, "g1")
	if r.Status != events.StatusNoSuchTool || r.Error.Code != tools.CodeNoSuchTool || !strings.Contains(r.Error.Message, `"ghost"`) {
		t.Errorf("result %+v %+v", r, r.Error)
	}
	if r := b.results.one(t, "e1"); r.Status != events.StatusOK {
		t.Errorf("served tool: %+v", r)
	}
	natstest.Eventually(t, 10*time.Second, "the ghost call to leave the work queue", func() bool {
		return b.callsLeft(t) == 0
	})
}

// A non-idempotent call cut off by a crash is not run again: the replica that gets the
// redelivery answers interrupted.
func TestNonIdempotentNotRunTwice(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var runs atomic.Int32
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	newReg := func() *tools.Registry {
		reg := tools.NewRegistry()
		must(t, reg.AddFunc(tools.Definition{Name: "charge_card", Parameters: echoSchema, Safe: true, Idempotent: new(false)},
			func(ctx context.Context, args json.RawMessage) (any, error) {
				runs.Add(1)
				select {
				case <-release:
				case <-ctx.Done():
				}
				return "charged", nil
			}))
		return reg
	}
	crashing := b.srv.Connect()
	b.startOn(t, crashing, newReg(), executor.WithExecutorID("doomed"))
	b.call(t, "charge_card", "pay1", "r", `{"text":"10 EUR"}`)
	natstest.Eventually(t, 10*time.Second, "the first run", func() bool { return runs.Load() == 1 })
	crashing.Close() // the replica vanishes mid-call: no ack, no result
	b.start(t, newReg(), executor.WithExecutorID("survivor"))
	r := b.results.one(t, "pay1")
	if r.Status != events.StatusInterrupted || r.Error.Code != tools.CodeInterrupted || r.Executor != "survivor" {
		t.Errorf("result %+v %+v", r, r.Error)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("non-idempotent tool ran %d times", n)
	}
}

// A call that keeps being delivered without completing is dead-lettered on its last
// delivery, and its caller still gets a result.
func TestMaxDeliverDeadLetters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.MaxDeliver = 2
	b.cfg.AckWait = tools.Duration(time.Second)
	ctx := context.Background()
	cc, _ := b.cfg.CallConsumer("echo")
	if err := jsutil.Ensure(ctx, b.js, b.cfg); err != nil {
		t.Fatal(err)
	}
	var conss []jetstream.Consumer // one per calls stream (shard)
	for _, stream := range b.cfg.CallStreams() {
		cons, err := b.js.CreateOrUpdateConsumer(ctx, stream, cc)
		if err != nil {
			t.Fatal(err)
		}
		conss = append(conss, cons)
	}
	dlq := subscribe(t, b, "toolfleet.dlq.echo")
	b.call(t, "echo", "poison", "r", `{"text":"x"}`)
	// First delivery taken by a "replica" that dies without acking.
	natstest.Eventually(t, 10*time.Second, "the first delivery", func() bool {
		for _, cons := range conss {
			batch, err := cons.Fetch(1, jetstream.FetchMaxWait(100*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			for range batch.Messages() {
				return true
			}
		}
		return false
	})
	b.start(t, echoRegistry(t))
	r := b.results.one(t, "poison")
	if r.Status != events.StatusError || r.Error.Code != tools.CodeInternal || !strings.Contains(r.Error.Message, "delivered 2 times") {
		t.Errorf("result %+v %+v", r, r.Error)
	}
	m, err := dlq.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_, dlr, _ := decodeDeadLetter(t, m)
	if dlr.CallID != "poison" || dlr.Deliveries != 2 || !strings.Contains(string(dlr.Body), `"text":"x"`) {
		t.Errorf("dead letter %+v", dlr)
	}
}

func decodeDeadLetter(t *testing.T, m *nats.Msg) (events.Event, events.DeadLetter, error) {
	t.Helper()
	e, err := events.Decode(events.CoreMsg(m), 0)
	if err != nil {
		t.Fatal(err)
	}
	var dl events.DeadLetter
	must(t, e.DataAs(&dl))
	return e, dl, nil
}
