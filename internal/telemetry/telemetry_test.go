package telemetry

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// Off, nothing is read, made or carried, and nothing is allocated.
func TestOffCostsNothing(t *testing.T) {
	Off()
	ctx := context.Background()
	allocs := testing.AllocsPerRun(1000, func() {
		c, span := StartTool(ctx, "echo", "c1", []byte(`{}`))
		if tp, _ := Carry(c); tp != "" {
			t.Fatal("carried a trace with tracing off")
		}
		_ = ContextFrom(c, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "")
		End(span, "", "")
	})
	if allocs != 0 {
		t.Errorf("%v allocations per call with tracing off", allocs)
	}
}

// A run's span, carried across a hop as the CloudEvents attributes, is the parent of the
// tool's span on the other side: one trace, with the GenAI attributes.
func TestTraceCrossesAHop(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	Use(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	t.Cleanup(Off)
	ctx, run := StartRun(context.Background(), "toolfleet", "run-1")
	tp, ts := Carry(ctx)
	if tp == "" {
		t.Fatal("no traceparent carried")
	}
	remote := ContextFrom(context.Background(), tp, ts) // the executor's side
	_, tool := StartTool(remote, "calculator", "call-1", []byte(`{"expression":"1+1"}`))
	End(tool, "timeout", "ran too long")
	End(run, "", "")

	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans ended, want 2", len(spans))
	}
	toolSpan, runSpan := spans[0], spans[1]
	if toolSpan.Name() != "execute_tool calculator" || runSpan.Name() != "invoke_agent toolfleet" {
		t.Errorf("span names %q, %q", toolSpan.Name(), runSpan.Name())
	}
	if toolSpan.SpanContext().TraceID() != runSpan.SpanContext().TraceID() || toolSpan.Parent().SpanID() != runSpan.SpanContext().SpanID() {
		t.Error("the tool's span is not the run span's child in its trace")
	}
	attrs := map[string]string{}
	for _, a := range toolSpan.Attributes() {
		attrs[string(a.Key)] = a.Value.String()
	}
	for k, want := range map[string]string{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "calculator",
		"gen_ai.tool.call.id": "call-1", "error.type": "timeout"} {
		if attrs[k] != want {
			t.Errorf("%s = %q, want %q", k, attrs[k], want)
		}
	}
	if _, ok := attrs["gen_ai.tool.call.arguments"]; ok {
		t.Error("arguments recorded without content capture")
	}
}

// The OTEL_* variables decide: nothing set is off, an unknown exporter is an error.
func TestSetupFromEnv(t *testing.T) {
	t.Setenv("OTEL_TRACES_EXPORTER", "")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	Off()
	stop, err := Setup(context.Background(), "executor")
	if err != nil || Enabled() {
		t.Fatalf("nothing set: enabled %v, err %v", Enabled(), err)
	}
	_ = stop(context.Background())
	t.Setenv("OTEL_TRACES_EXPORTER", "zipkin")
	if _, err := Setup(context.Background(), "executor"); err == nil {
		t.Error("an unknown exporter was accepted")
	}
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	stop, err = Setup(context.Background(), "executor")
	if err != nil || !Enabled() {
		t.Fatalf("otlp: enabled %v, err %v", Enabled(), err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // nothing listens on the endpoint: do not wait for it
	_ = stop(ctx)
	if Enabled() {
		t.Error("still enabled after shutdown")
	}
}

// BenchmarkToolSpan is what tracing adds to one call in the executor: read the caller's
// trace context, start the execute_tool span, carry it on to the result, end it.
//
//	go test -run '^$' -bench ToolSpan ./internal/telemetry/
func BenchmarkToolSpan(b *testing.B) {
	const parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	for _, mode := range []string{"off", "unsampled", "sampled"} {
		b.Run(mode, func(b *testing.B) {
			Off()
			if mode != "off" {
				sampler := sdktrace.NeverSample()
				if mode == "sampled" {
					sampler = sdktrace.AlwaysSample()
				}
				tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler), sdktrace.WithBatcher(tracetest.NewNoopExporter()))
				Use(tp)
				b.Cleanup(func() { Off(); _ = tp.Shutdown(context.Background()) })
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				c := ContextFrom(ctx, parent, "")
				c, span := StartTool(c, "calculator", "call-1", nil)
				_, _ = Carry(c)
				End(span, "", "")
			}
		})
	}
}
