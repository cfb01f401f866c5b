package executor_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/toolfleet/toolfleet/internal/semconv"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/executor"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// The caller's trace context, as a client that traces would send it.
const (
	callerTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerParent = "00-" + callerTrace + "-00f067aa0ba902b7-01"
	callerState  = "vendor=opaque"
)

// plainCall is a call as any NATS client writes it, ce-* headers by hand, with the
// caller's trace context.
func plainCall(tool, id, args string) *nats.Msg {
	m := nats.NewMsg("toolfleet.call." + tool)
	m.Header.Set("ce-specversion", "1.0")
	m.Header.Set("ce-id", id)
	m.Header.Set("ce-type", events.TypeCall)
	m.Header.Set("ce-source", "/plain-client")
	m.Header.Set("ce-runid", "run-traced")
	m.Header.Set("ce-traceparent", callerParent)
	m.Header.Set("ce-tracestate", callerState)
	m.Header.Set("Nats-Msg-Id", id)
	m.Data = []byte(`{"arguments":` + args + `}`)
	return m
}

// traceRegistry serves echo (safe) and write_file (waits for approval).
func traceRegistry(t *testing.T) *tools.Registry {
	t.Helper()
	reg := echoRegistry(t)
	must(t, reg.AddFunc(tools.Definition{Name: "write_file", Parameters: echoSchema},
		func(context.Context, json.RawMessage) (any, error) { return "written", nil }))
	return reg
}

// With no tracer provider given and none set globally, or a no-op one given (as the
// programs do with tracing off), an executor makes no span and still carries a call's
// trace context, unchanged, onto everything it publishes for the call: a call published
// with ce-traceparent by a plain NATS client gets its result, its approval request and
// its run events in the caller's trace.
func TestTraceContextCarriedWithTracingOff(t *testing.T) {
	t.Parallel()
	for name, tp := range map[string]trace.TracerProvider{"no provider": nil, "no-op provider": noop.NewTracerProvider()} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			b.start(t, traceRegistry(t), executor.WithStartedAfter(0), executor.WithTracerProvider(tp))
			runEvents := subscribe(t, b, "toolfleet.event.run.run-traced.>")
			approvals := subscribe(t, b, "toolfleet.event.approval.requested.write_file.*")

			if err := b.nc.PublishMsg(plainCall("echo", "plain-1", `{"text":"hi"}`)); err != nil {
				t.Fatal(err)
			}
			if err := b.nc.PublishMsg(plainCall("write_file", "plain-2", `{"text":"hi"}`)); err != nil {
				t.Fatal(err)
			}
			if r := b.results.one(t, "plain-1"); r.Status != events.StatusOK {
				t.Fatalf("result %+v", r)
			}
			b.results.mu.Lock()
			res := b.results.raw["plain-1"][0]
			b.results.mu.Unlock()
			assertCallerTrace(t, "the result", res)
			m, err := approvals.NextMsg(10 * time.Second)
			if err != nil {
				t.Fatalf("no approval request: %v", err)
			}
			assertCallerTrace(t, "the approval request", m)
			m, err = runEvents.NextMsg(10 * time.Second)
			if err != nil {
				t.Fatalf("no run event: %v", err)
			}
			assertCallerTrace(t, "the run event", m)
		})
	}
}

// assertCallerTrace checks that m carries the caller's trace context byte for byte: no
// span of the executor's came in between.
func assertCallerTrace(t *testing.T, what string, m *nats.Msg) {
	t.Helper()
	if p, s := m.Header.Get(events.HeaderTraceParent), m.Header.Get(events.HeaderTraceState); p != callerParent || s != callerState {
		t.Errorf("%s carries traceparent %q, tracestate %q; want the caller's %q, %q", what, p, s, callerParent, callerState)
	}
}

// A user's own executor, given a tracer provider, makes one execute_tool span per call
// with the GenAI attributes, a child of the caller's span, whose context its result
// carries; the global provider is not touched. Without WithTraceContent no argument or
// result goes into a span; with it, both do. A failing call's span has error.type.
func TestTracerProviderGiven(t *testing.T) {
	t.Parallel()
	global := otel.GetTracerProvider()
	for _, content := range []bool{false, true} {
		t.Run(map[bool]string{false: "no content", true: "content"}[content], func(t *testing.T) {
			t.Parallel()
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			b := setup(t)
			b.start(t, echoRegistry(t), executor.WithTracerProvider(tp), executor.WithTraceContent(content))
			b.publish(t, plainCall("echo", "ok", `{"text":"hi"}`))
			b.publish(t, plainCall("echo", "bad", `{"text":7}`))
			rs := b.results.wait(t, 15*time.Second, "ok", "bad")
			if rs["ok"].Status != events.StatusOK || rs["bad"].Status != events.StatusInvalid {
				t.Fatalf("results %+v", rs)
			}
			spans := map[string]sdktrace.ReadOnlySpan{}
			natstest.Eventually(t, 10*time.Second, "two execute_tool spans", func() bool {
				for _, s := range rec.Ended() {
					spans[attrOf(s, semconv.KeyToolCallID)] = s
				}
				return spans["ok"] != nil && spans["bad"] != nil
			})
			ok, bad := spans["ok"], spans["bad"]
			if ok.Name() != "execute_tool echo" || ok.SpanKind() != trace.SpanKindInternal {
				t.Errorf("span %q of kind %s", ok.Name(), ok.SpanKind())
			}
			for k, want := range map[string]string{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "echo",
				"gen_ai.tool.call.id": "ok", "gen_ai.tool.type": "function"} {
				if got := attrOf(ok, attribute.Key(k)); got != want {
					t.Errorf("%s = %q, want %q", k, got, want)
				}
			}
			if ok.SpanContext().TraceID().String() != callerTrace || ok.Parent().SpanID().String() != "00f067aa0ba902b7" || !ok.Parent().IsRemote() {
				t.Errorf("span in trace %s under %s; want the caller's span across the hop", ok.SpanContext().TraceID(), ok.Parent().SpanID())
			}
			b.results.mu.Lock()
			res := b.results.raw["ok"][0]
			b.results.mu.Unlock()
			want := "00-" + callerTrace + "-" + ok.SpanContext().SpanID().String() + "-01"
			if p, s := res.Header.Get(events.HeaderTraceParent), res.Header.Get(events.HeaderTraceState); p != want || s != callerState {
				t.Errorf("the result carries %q, %q; want the span's %q, %q", p, s, want, callerState)
			}
			if got := attrOf(bad, semconv.KeyErrorType); got != string(rs["bad"].Error.Code) {
				t.Errorf("error.type of the failed call = %q, want %q", got, rs["bad"].Error.Code)
			}
			args, result := attrOf(ok, semconv.KeyToolCallArgs), attrOf(ok, semconv.KeyToolCallResult)
			if content && (args != `{"text":"hi"}` || !strings.Contains(result, "hi")) || !content && (args != "" || result != "") {
				t.Errorf("content %v: arguments %q, result %q in the span", content, args, result)
			}
		})
	}
	if otel.GetTracerProvider() != global {
		t.Error("the global tracer provider changed")
	}
}

// The provider is the executor's own: two executors in one process, one traced, one
// not, each serving its tool, record only the traced one's calls.
func TestTracerProviderIsPerExecutor(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	b := setup(t)
	b.start(t, echoRegistry(t), executor.WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))))
	quiet := tools.NewRegistry()
	must(t, quiet.AddFunc(tools.Definition{Name: "quiet", Parameters: echoSchema, Safe: true},
		func(context.Context, json.RawMessage) (any, error) { return "ok", nil }))
	b.start(t, quiet)
	b.publish(t, plainCall("echo", "traced", `{"text":"hi"}`))
	b.publish(t, plainCall("quiet", "untraced", `{"text":"hi"}`))
	b.results.wait(t, 15*time.Second, "traced", "untraced")
	natstest.Eventually(t, 10*time.Second, "the traced call's span", func() bool { return len(rec.Ended()) > 0 })
	for _, s := range rec.Ended() {
		if id := attrOf(s, semconv.KeyToolCallID); id != "traced" {
			t.Errorf("span %q of call %q recorded by the other executor's provider", s.Name(), id)
		}
	}
	b.results.mu.Lock()
	res := b.results.raw["untraced"][0]
	b.results.mu.Unlock()
	assertCallerTrace(t, "the untraced executor's result", res)
}

func attrOf(s sdktrace.ReadOnlySpan, key attribute.Key) string {
	for _, a := range s.Attributes() {
		if a.Key == key {
			return a.Value.String()
		}
	}
	return ""
}
