package executor

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// BenchmarkToolSpan is what tracing adds to one call in the executor: read the caller's
// trace context, start the execute_tool span, carry it on to the result, end it. "off"
// is an executor given no provider while none is set globally; "noop" one given a
// no-op provider.
//
//	go test -run '^$' -bench ToolSpan ./pkg/executor/
func BenchmarkToolSpan(b *testing.B) {
	const parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	def := &tools.Definition{Name: "calculator"}
	ce := events.CallEvent{Event: events.Event{ID: "call-1", TraceParent: parent}}
	for _, mode := range []string{"off", "noop", "unsampled", "sampled"} {
		b.Run(mode, func(b *testing.B) {
			o := defaultOptions()
			switch mode {
			case "noop":
				o.tracerProvider = noop.NewTracerProvider()
			case "unsampled", "sampled":
				sampler := sdktrace.NeverSample()
				if mode == "sampled" {
					sampler = sdktrace.AlwaysSample()
				}
				tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler), sdktrace.WithBatcher(tracetest.NewNoopExporter()))
				b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
				o.tracerProvider = tp
			}
			ex := &Executor{o: o, tracer: newTracer(o)}
			ctx := context.Background()
			m := &nats.Msg{Header: nats.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				j := job{ce: ce, def: def, res: events.Result{CallID: "call-1"}, trace: traced{parent: ce.TraceParent}}
				ex.startSpan(ctx, &j)
				j.carryTrace(m)
				j.endSpan(nil)
			}
		})
	}
}
