package planner

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/internal/semconv"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// Tracing. A run is an invoke_agent span of the planner's own tracer
// (Config.TracerProvider), started by the replica that starts the run under the trace
// of Start's context or of the parent run; its context is stored in the run, so every
// model call (a chat span) and every tool call (the executor's execute_tool span,
// through the call's traceparent) of the run, whichever replica takes its steps, joins
// the run's trace. The run span itself ends on the replica that started it when that
// replica sees the run finish; if another replica finishes the run (or the starting one
// restarted), the run span is not exported and its children keep their trace id. A span
// that is not recorded (a no-op provider, a run not sampled) is not kept, but the run
// still stores the trace context it started under, so its calls, run events and hook
// requests carry the caller's trace whether or not this planner traces.

// agentName names toolfleet's agent in spans.
const agentName = "toolfleet"

// newTracer is the planner's tracer, from cfg's provider or the global one; nil for a
// no-op provider, whose spans the planner then does not even start.
func newTracer(cfg Config) trace.Tracer {
	tp := cfg.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if _, ok := tp.(noop.TracerProvider); ok {
		return nil
	}
	return tp.Tracer(semconv.Scope)
}

// startRunSpan starts run's invoke_agent span under ctx's trace (the parent run's, for
// a nested run) and stores the trace context its calls and events carry in the run.
func (p *Planner) startRunSpan(ctx context.Context, run *Run, parent *Run) {
	if parent != nil {
		ctx = events.ContextWithTrace(ctx, parent.TraceParent, parent.TraceState)
	}
	if p.tracer == nil {
		run.TraceParent, run.TraceState = events.TraceFromContext(ctx)
		return
	}
	ctx, span := p.tracer.Start(ctx, semconv.OpInvokeAgent+" "+agentName, trace.WithSpanKind(trace.SpanKindInternal))
	// The span's context, recorded or not: a sampler's "no" travels on with it, and a
	// no-op tracer's span is the parent's, whose context then passes through.
	run.TraceParent, run.TraceState = events.TraceFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(semconv.KeyOperationName.String(semconv.OpInvokeAgent), semconv.KeyAgentName.String(agentName),
		semconv.KeyConversationID.String(run.ID))
	p.runSpans.Store(run.ID, span)
}

// finished is told once of each run whose end this replica stored: it counts the
// termination and ends the run's span if this replica holds it.
func (p *Planner) finished(run *Run) {
	p.m.runFinished(run.Termination)
	v, ok := p.runSpans.LoadAndDelete(run.ID)
	if !ok {
		return
	}
	errType := ""
	if run.Termination != TerminationCompleted && run.Termination != TerminationFinalTool {
		errType = string(run.Termination)
	}
	endSpan(v.(trace.Span), errType, run.Detail)
}

// chatSpan starts the span of a model call of run under run's trace; nil when it is not
// recorded.
func (p *Planner) chatSpan(ctx context.Context, run *Run, model provider.Model) (context.Context, trace.Span) {
	if p.tracer == nil {
		return ctx, nil
	}
	ctx = events.ContextWithTrace(ctx, run.TraceParent, run.TraceState)
	prov, name, ok := strings.Cut(model.Name(), "/")
	if !ok {
		prov, name = "", model.Name()
	}
	sctx, span := p.tracer.Start(ctx, semconv.OpChat+" "+name, trace.WithSpanKind(trace.SpanKindClient))
	if !span.IsRecording() {
		return ctx, nil
	}
	span.SetAttributes(semconv.KeyOperationName.String(semconv.OpChat), semconv.KeyProviderName.String(prov),
		semconv.KeyRequestModel.String(name))
	return sctx, span
}

// endChat ends a model call's span with its usage or its error.
func endChat(span trace.Span, resp *provider.Response, err error) {
	if span == nil {
		return
	}
	if err != nil {
		endSpan(span, "model_error", err.Error())
		return
	}
	span.SetAttributes(semconv.KeyUsageInputTokens.Int(resp.Usage.InputTokens), semconv.KeyUsageOutput.Int(resp.Usage.OutputTokens))
	endSpan(span, "", "")
}

// endSpan ends span; errorType, when set (an error code such as "timeout"), marks it
// failed with error.type as the conventions ask.
func endSpan(span trace.Span, errorType, message string) {
	if errorType != "" {
		span.SetAttributes(semconv.KeyErrorType.String(errorType))
		span.SetStatus(codes.Error, message)
	}
	span.End()
}
