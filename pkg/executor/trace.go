package executor

import (
	"context"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolfleet/toolfleet/internal/telemetry"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Tracing. When telemetry is on, each call's handling is one execute_tool span, a child
// of the caller's span (the call's traceparent/tracestate), and the result carries the
// span's context back. The tool runs under the span's context, so its own spans nest in
// it. When telemetry is off, none of this costs more than a flag read.

// traced is the span of a call being handled; zero when tracing is off.
type traced struct {
	ctx  context.Context
	span trace.Span
}

// startSpan starts j's execute_tool span under the caller's trace and returns the
// context the call runs under.
func (ex *Executor) startSpan(ctx context.Context, j *job) context.Context {
	if !telemetry.Enabled() {
		return ctx
	}
	ctx = telemetry.ContextFrom(ctx, j.ce.TraceParent, j.ce.TraceState)
	ctx, span := telemetry.StartTool(ctx, j.def.Name, j.res.CallID, j.ce.Call.Arguments)
	if m := j.res.NoSchemaMode; m != "" { // unvalidated arguments: the trace says under which mode
		span.SetAttributes(telemetry.KeyToolNoSchemaMode.String(string(m)))
	}
	j.trace = traced{ctx: ctx, span: span}
	return ctx
}

// carryTrace puts the span's context on the result message rm.
func (j *job) carryTrace(rm *nats.Msg) {
	if j.trace.span == nil {
		return
	}
	parent, state := telemetry.Carry(j.trace.ctx)
	events.SetTrace(rm, parent, state)
}

// endSpan ends j's span once (a call handed back or parked ends it without an error).
func (j *job) endSpan(failure *tools.Error) {
	if j.trace.span == nil {
		return
	}
	if failure != nil {
		telemetry.End(j.trace.span, string(failure.Code), failure.Message)
	} else {
		telemetry.RecordResult(j.trace.span, j.res.Output)
		telemetry.End(j.trace.span, "", "")
	}
	j.trace.span = nil
}
