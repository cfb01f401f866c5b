package planner

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/trace"

	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/internal/telemetry"
)

// Tracing. A run is an invoke_agent span, started by the replica that starts the run;
// its context is stored in the run, so every model call (a chat span) and every tool
// call (the executor's execute_tool span, through the call's traceparent) of the run,
// whichever replica takes its steps, joins the run's trace. The run span itself ends on
// the replica that started it when that replica sees the run finish; if another replica
// finishes the run (or the starting one restarted), the run span is not exported and its
// children keep their trace id. Off, nothing is stored and nothing is started.

// agentName names toolfleet's agent in spans.
const agentName = "toolfleet"

// startRunSpan starts run's invoke_agent span (a child of the parent run's, for a nested
// run) and stores its context in the run.
func (p *Planner) startRunSpan(ctx context.Context, run *Run, parent *Run) {
	if !telemetry.Enabled() {
		return
	}
	if parent != nil {
		ctx = telemetry.ContextFrom(ctx, parent.TraceParent, parent.TraceState)
	}
	ctx, span := telemetry.StartRun(ctx, agentName, run.ID)
	run.TraceParent, run.TraceState = telemetry.Carry(ctx)
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
	telemetry.End(v.(trace.Span), errType, run.Detail)
}

// chatSpan starts the span of a model call of run under run's trace.
func chatSpan(ctx context.Context, run *Run, model provider.Model) (context.Context, trace.Span) {
	if !telemetry.Enabled() {
		return ctx, nil
	}
	ctx = telemetry.ContextFrom(ctx, run.TraceParent, run.TraceState)
	prov, name, ok := strings.Cut(model.Name(), "/")
	if !ok {
		prov, name = "", model.Name()
	}
	return telemetry.StartChat(ctx, prov, name)
}

// endChat ends a model call's span with its usage or its error.
func endChat(span trace.Span, resp *provider.Response, err error) {
	if span == nil {
		return
	}
	if err != nil {
		telemetry.End(span, "model_error", err.Error())
		return
	}
	telemetry.RecordUsage(span, resp.Usage.InputTokens, resp.Usage.OutputTokens)
	telemetry.End(span, "", "")
}
