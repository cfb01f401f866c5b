package events

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
)

// Trace context. An event carries the W3C trace context of whoever sent it in the
// CloudEvents distributed-tracing extension (traceparent, tracestate; see [Event]).
// These two functions map it to and from a context.Context, where OpenTelemetry keeps
// the current span, so that a span started under [ContextWithTrace]'s context joins the
// sender's trace and [TraceFromContext] passes a span on to the next event. They need no
// tracer and touch no global: with no span in the context, a caller's trace context
// still travels through unchanged.

// ContextWithTrace returns ctx carrying the remote span context of an event's
// traceparent and tracestate; ctx itself when traceparent is empty or not a valid W3C
// traceparent.
func ContextWithTrace(ctx context.Context, traceParent, traceState string) context.Context {
	if traceParent == "" {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, &traceCarrier{parent: traceParent, state: traceState})
}

// TraceFromContext returns the traceparent and tracestate that pass ctx's span context
// on to an event (set them with [SetTrace] or [CallOptions]); "" when ctx has no valid
// span context.
func TraceFromContext(ctx context.Context) (traceParent, traceState string) {
	c := traceCarrier{}
	propagation.TraceContext{}.Inject(ctx, &c)
	return c.parent, c.state
}

// traceCarrier maps the W3C header names onto the extension attributes.
type traceCarrier struct{ parent, state string }

func (c *traceCarrier) Get(key string) string {
	switch key {
	case "traceparent":
		return c.parent
	case "tracestate":
		return c.state
	}
	return ""
}

func (c *traceCarrier) Set(key, value string) {
	switch key {
	case "traceparent":
		c.parent = value
	case "tracestate":
		c.state = value
	}
}

func (c *traceCarrier) Keys() []string { return []string{"traceparent", "tracestate"} }
