package executor

import (
	"context"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/toolfleet/toolfleet/internal/semconv"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Tracing. Each call's handling is one execute_tool span of the executor's own tracer
// (WithTracerProvider, else the global provider as it was at New), a child of the
// caller's span (the call's traceparent/tracestate). The tool runs under the span's
// context, so its own spans nest in it, and what the executor publishes for the call
// (result, approval request, run events, policy request) carries the span's context. A
// span that is not recorded (a no-op provider, a call not sampled) adds nothing: the
// call's own trace context travels on unchanged, so a caller always finds its trace id
// on its result.

// WithTracerProvider makes the executor trace each call it handles with a tracer of
// tp: an execute_tool span with the OpenTelemetry GenAI attributes (README, "Tracing and
// metrics"). Default: the global provider (otel.GetTracerProvider) as it is when [New]
// runs, a no-op one unless the program set another; a nil tp is that default too.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) error {
		o.tracerProvider = tp
		return nil
	}
}

// WithTraceContent makes execute_tool spans record the call's arguments and the tool's
// result (gen_ai.tool.call.arguments, gen_ai.tool.call.result). Default off: they may
// hold what users would not want in a trace store. The programs turn it on with
// OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true.
func WithTraceContent(capture bool) Option {
	return func(o *options) error {
		o.traceContent = capture
		return nil
	}
}

// newTracer is the executor's tracer, from the provider of its options; nil for a no-op
// provider, whose spans the executor then does not even start.
func newTracer(o options) trace.Tracer {
	tp := o.tracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if _, ok := tp.(noop.TracerProvider); ok {
		return nil
	}
	return tp.Tracer(semconv.Scope)
}

// traced is the trace of a call being handled.
type traced struct {
	// span is the call's execute_tool span while it is recorded; nil otherwise.
	span trace.Span
	// parent and state are the trace context to put on what is published for the call:
	// the call's own (newJob), replaced by the span's when one is recorded.
	parent, state string
	// content says whether the span records the result (WithTraceContent).
	content bool
}

// startSpan starts j's execute_tool span under the caller's trace and returns the
// context the call runs under. What is published for the call then carries the span's
// context, recorded or not (a sampler's "no" travels on with it); a no-op tracer's span
// is the caller's, whose trace context then passes through as it came, at no cost.
func (ex *Executor) startSpan(ctx context.Context, j *job) context.Context {
	if ex.tracer == nil { // a no-op provider: nothing to start, the trace passes through
		return ctx
	}
	ctx = events.ContextWithTrace(ctx, j.ce.TraceParent, j.ce.TraceState)
	sctx, span := ex.tracer.Start(ctx, semconv.OpExecuteTool+" "+j.def.Name, trace.WithSpanKind(trace.SpanKindInternal))
	if sc := span.SpanContext(); sc.IsValid() && sc.SpanID() != trace.SpanContextFromContext(ctx).SpanID() {
		j.trace.parent, j.trace.state = events.TraceFromContext(sctx)
	}
	if !span.IsRecording() {
		return sctx
	}
	span.SetAttributes(semconv.KeyOperationName.String(semconv.OpExecuteTool), semconv.KeyToolName.String(j.def.Name),
		semconv.KeyToolCallID.String(j.res.CallID), semconv.KeyToolType.String(semconv.ToolTypeFunction))
	if ex.o.traceContent && j.ce.Call.Arguments != nil {
		span.SetAttributes(semconv.KeyToolCallArgs.String(string(j.ce.Call.Arguments)))
	}
	if m := j.res.NoSchemaMode; m != "" { // unvalidated arguments: the trace says under which mode
		span.SetAttributes(semconv.KeyToolNoSchemaMode.String(string(m)))
	}
	j.trace.span, j.trace.content = span, ex.o.traceContent
	return sctx
}

// carryTrace puts the call's trace context on m, a message published for it.
func (j *job) carryTrace(m *nats.Msg) {
	events.SetTrace(m, j.trace.parent, j.trace.state)
}

// untrustedTrace keeps of a refused call's trace context only what is a valid W3C
// trace context: the call did not decode, so its values were not checked.
func (j *job) untrustedTrace() {
	j.trace.parent, j.trace.state = events.TraceFromContext(events.ContextWithTrace(context.Background(), j.trace.parent, j.trace.state))
}

// traceEvent records a step of the call's handling on its span, if it is recorded.
func (j *job) traceEvent(name string, attrs ...attribute.KeyValue) {
	if j.trace.span != nil {
		j.trace.span.AddEvent(name, trace.WithAttributes(attrs...))
	}
}

// endSpan ends j's span once (a call handed back or parked ends it without an error):
// a failure marks it with error.type, the failure's code, as the conventions ask.
func (j *job) endSpan(failure *tools.Error) {
	span := j.trace.span
	if span == nil {
		return
	}
	j.trace.span = nil
	if failure != nil {
		span.SetAttributes(semconv.KeyErrorType.String(string(failure.Code)))
		span.SetStatus(codes.Error, failure.Message)
	} else if j.trace.content {
		span.SetAttributes(semconv.KeyToolCallResult.String(string(j.res.Output)))
	}
	span.End()
}
