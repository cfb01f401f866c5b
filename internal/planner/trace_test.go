package planner

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/internal/semconv"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// The trace context of a caller that traces: a span of its own, across a hop.
const (
	callerTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan   = "00f067aa0ba902b7"
	callerParent = "00-" + callerTrace + "-" + callerSpan + "-01"
	callerState  = "vendor=opaque"
)

const delegateScript = `
steps:
  - calls: [{name: run_agent, arguments: {task: add them, tools: [add], model: child}}]
  - text: delegated
`

const addScript = `
steps:
  - calls: [{name: add, arguments: {a: 1, b: 2}}]
  - text: the sum is 3
`

// tracedRun starts a run under the caller's trace context, that hands its work to a
// nested run which calls add, and returns the finished run, the nested one, and the
// events published on the run's subjects while it ran.
func tracedRun(t *testing.T, b *testBundle) (run, child *Run, runEvents *nats.Subscription) {
	t.Helper()
	runEvents, err := b.nc.SubscribeSync("toolfleet.event.run.>")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = runEvents.Unsubscribe() })
	ctx := events.ContextWithTrace(b.ctx, callerParent, callerState)
	started, err := b.p.Start(ctx, StartRequest{Input: "delegate", Tools: []string{AgentToolName, "add"}})
	if err != nil {
		t.Fatal(err)
	}
	run = b.wait(t, started.ID)
	child = b.wait(t, childID(callID0(run.ID)))
	if run.Termination != TerminationCompleted || child.Termination != TerminationCompleted || len(child.Calls) != 1 {
		t.Fatalf("run %s (%s), nested run %s (%s) with %d calls", run.ID, run.Termination, child.ID, child.Termination, len(child.Calls))
	}
	return run, child, runEvents
}

// storedResultMsg is the result message the executor stored for a call of a run.
func (b *testBundle) storedResultMsg(t *testing.T, runID, callID string) *nats.Msg {
	t.Helper()
	subject, err := events.ResultSubject("", runID, callID)
	if err != nil {
		t.Fatal(err)
	}
	s, err := b.js.Stream(b.ctx, b.cfg.ResultStream(subject))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := s.GetLastMsgForSubject(b.ctx, subject)
	if err != nil {
		t.Fatal(err)
	}
	return &nats.Msg{Subject: raw.Subject, Header: raw.Header, Data: raw.Data}
}

// With no tracer provider given and none set globally, or a no-op one given (as the
// programs do with tracing off), a run started under a caller's trace context carries
// it, unchanged, to its nested run, its calls (and so their results, through an
// executor that does not trace either) and its run events.
func TestRunTraceContextCarriedWithTracingOff(t *testing.T) {
	for name, tp := range map[string]trace.TracerProvider{"no provider": nil, "no-op provider": noop.NewTracerProvider()} {
		t.Run(name, func(t *testing.T) {
			b := setup(t, nil)
			b.swapPlanner(t, Config{Models: map[string]provider.Model{"main": scriptedModel(t, delegateScript),
				"child": scriptedModel(t, addScript)}, DefaultModel: "main", TracerProvider: tp})
			run, child, runEvents := tracedRun(t, b)
			for _, r := range []*Run{run, child} {
				if r.TraceParent != callerParent || r.TraceState != callerState {
					t.Errorf("run %s stores trace context %q, %q; want the caller's", r.ID, r.TraceParent, r.TraceState)
				}
			}
			res := b.storedResultMsg(t, child.ID, child.Calls[0].ID)
			if p, s := res.Header.Get(events.HeaderTraceParent), res.Header.Get(events.HeaderTraceState); p != callerParent || s != callerState {
				t.Errorf("the nested run's call's result carries %q, %q; want the caller's", p, s)
			}
			m, err := runEvents.NextMsg(waitTimeout)
			if err != nil {
				t.Fatal(err)
			}
			if p := m.Header.Get(events.HeaderTraceParent); p != callerParent {
				t.Errorf("run event %s carries traceparent %q; want the caller's", m.Subject, p)
			}
		})
	}
}

// A planner given a tracer provider makes a run's invoke_agent span a child of Start's
// context's span, a chat span per model call under it, and a nested run's span under
// its parent's; the run stores its span's context, which its calls carry to the
// executor. Nothing global is set.
func TestPlannerTracerProvider(t *testing.T) {
	b := setup(t, nil)
	rec := tracetest.NewSpanRecorder()
	b.swapPlanner(t, Config{Models: map[string]provider.Model{"main": scriptedModel(t, delegateScript), "child": scriptedModel(t, addScript)},
		DefaultModel: "main", TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))})
	run, child, _ := tracedRun(t, b)

	runSpans := map[string]sdktrace.ReadOnlySpan{}
	var chats []sdktrace.ReadOnlySpan
	natstest.Eventually(t, waitTimeout, "both runs' spans to end", func() bool {
		runSpans, chats = map[string]sdktrace.ReadOnlySpan{}, nil
		for _, s := range rec.Ended() {
			switch spanAttr(s, semconv.KeyOperationName) {
			case semconv.OpInvokeAgent:
				runSpans[spanAttr(s, semconv.KeyConversationID)] = s
			case semconv.OpChat:
				chats = append(chats, s)
			}
		}
		return runSpans[run.ID] != nil && runSpans[child.ID] != nil
	})
	top, nested := runSpans[run.ID], runSpans[child.ID]
	if top.Name() != "invoke_agent toolfleet" || top.SpanContext().TraceID().String() != callerTrace ||
		top.Parent().SpanID().String() != callerSpan || !top.Parent().IsRemote() {
		t.Errorf("run span %q in trace %s under %s; want the caller's span's child", top.Name(), top.SpanContext().TraceID(), top.Parent().SpanID())
	}
	if nested.Parent().SpanID() != top.SpanContext().SpanID() {
		t.Error("the nested run's span is not its parent run's child")
	}
	if !strings.Contains(run.TraceParent, top.SpanContext().SpanID().String()) || run.TraceState != callerState {
		t.Errorf("the run stores %q, %q; want its span's context", run.TraceParent, run.TraceState)
	}
	if len(chats) != 4 {
		t.Errorf("%d chat spans, want 4 (two model calls per run)", len(chats))
	}
	for _, c := range chats {
		if c.Parent().SpanID() != top.SpanContext().SpanID() && c.Parent().SpanID() != nested.SpanContext().SpanID() ||
			spanAttr(c, semconv.KeyRequestModel) == "" || c.Name() != "chat "+spanAttr(c, semconv.KeyRequestModel) {
			t.Errorf("chat span %q (model %q) is not under a run span", c.Name(), spanAttr(c, semconv.KeyRequestModel))
		}
	}
	res := b.storedResultMsg(t, child.ID, child.Calls[0].ID)
	if p := res.Header.Get(events.HeaderTraceParent); p != child.TraceParent {
		t.Errorf("the call's result carries %q; want the nested run's span's %q (the executor does not trace)", p, child.TraceParent)
	}
}

func spanAttr(s sdktrace.ReadOnlySpan, key attribute.Key) string {
	for _, a := range s.Attributes() {
		if a.Key == key {
			return a.Value.String()
		}
	}
	return ""
}
