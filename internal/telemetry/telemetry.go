// Package telemetry is toolfleet's OpenTelemetry tracing: one setup for every part,
// configured by the standard OTEL_* variables and off unless they ask for it; the spans
// of the GenAI semantic conventions (a run is invoke_agent, a model call chat, a tool's
// execution execute_tool); and the trace context carried from part to part in the
// CloudEvents distributed-tracing extension (ce-traceparent, ce-tracestate), so that one
// trace follows a run from the planner through JetStream to the executor that ran its
// tool.
//
// Tracing is on when OTEL_TRACES_EXPORTER is otlp (or console), or an OTLP endpoint is
// set (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT); OTEL_SDK_DISABLED
// or OTEL_TRACES_EXPORTER=none turn it off. The protocol is
// OTEL_EXPORTER_OTLP_PROTOCOL (http/protobuf, the default, or grpc); sampling is
// OTEL_TRACES_SAMPLER (parentbased_always_on by default); the service name is
// OTEL_SERVICE_NAME, or the part's name. Off, every function here returns at once: no
// span is made, no context read, nothing allocated.
//
// Argument and result content goes into spans only when
// OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT is true: they may hold what users
// would not want in a trace store.
package telemetry

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// scope is the instrumentation scope of every span toolfleet makes.
const scope = "github.com/toolfleet/toolfleet"

var (
	enabled        atomic.Bool
	captureContent atomic.Bool
	tracer         atomic.Pointer[trace.Tracer]
)

// Enabled reports whether tracing is on.
func Enabled() bool { return enabled.Load() }

// Setup turns tracing on when the OTEL_* variables ask for it (see the package doc) for
// the part named service, and returns the function that flushes and stops it (a no-op
// when tracing is off). A variable that asks for something unknown is an error.
func Setup(ctx context.Context, service string) (shutdown func(context.Context) error, err error) {
	noop := func(context.Context) error { return nil }
	exp, err := exporterFromEnv(ctx)
	if err != nil || exp == nil {
		return noop, err
	}
	res, err := resource.New(ctx, resource.WithFromEnv(), resource.WithTelemetrySDK(),
		resource.WithAttributes(serviceName(service)))
	if err != nil {
		return noop, fmt.Errorf("telemetry: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	Use(tp)
	return func(ctx context.Context) error {
		enabled.Store(false)
		return tp.Shutdown(ctx)
	}, nil
}

// Use turns tracing on with tp (tests give an in-memory one) and the W3C propagator.
func Use(tp trace.TracerProvider) {
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t := tp.Tracer(scope)
	tracer.Store(&t)
	captureContent.Store(strings.EqualFold(os.Getenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"), "true"))
	enabled.Store(true)
}

// Off turns tracing off again (for tests that turned it on with Use).
func Off() { enabled.Store(false) }

// CaptureContent reports whether spans may hold arguments and results.
func CaptureContent() bool { return captureContent.Load() }

func exporterFromEnv(ctx context.Context) (sdktrace.SpanExporter, error) {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return nil, nil
	}
	kind := strings.ToLower(strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER")))
	if kind == "" && (os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "") {
		kind = "otlp"
	}
	switch kind {
	case "", "none":
		return nil, nil
	case "console":
		return stdouttrace.New(stdouttrace.WithWriter(io.Writer(os.Stderr)))
	case "otlp":
	default:
		return nil, fmt.Errorf("telemetry: OTEL_TRACES_EXPORTER %q is not supported (otlp, console or none)", kind)
	}
	proto := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch strings.ToLower(proto) {
	case "", "http/protobuf":
		return otlptracehttp.New(ctx)
	case "grpc":
		return otlptracegrpc.New(ctx)
	}
	return nil, fmt.Errorf("telemetry: OTLP protocol %q is not supported (http/protobuf or grpc)", proto)
}

// ContextFrom returns ctx carrying the remote span context of a CloudEvent's
// traceparent and tracestate attributes (ctx itself when tracing is off or there is
// none), so that a span started from it joins the caller's trace.
func ContextFrom(ctx context.Context, traceparent, tracestate string) context.Context {
	if !Enabled() || traceparent == "" {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, &carrier{traceparent: traceparent, tracestate: tracestate})
}

// Carry returns the traceparent and tracestate attributes that pass ctx's span on to
// the next part ("" when tracing is off or ctx has no span).
func Carry(ctx context.Context) (traceparent, tracestate string) {
	if !Enabled() {
		return "", ""
	}
	c := carrier{}
	propagation.TraceContext{}.Inject(ctx, &c)
	return c.traceparent, c.tracestate
}

// carrier maps the W3C headers onto the CloudEvents extension attributes.
type carrier struct{ traceparent, tracestate string }

func (c carrier) Get(key string) string {
	switch key {
	case "traceparent":
		return c.traceparent
	case "tracestate":
		return c.tracestate
	}
	return ""
}

func (c *carrier) Set(key, value string) {
	switch key {
	case "traceparent":
		c.traceparent = value
	case "tracestate":
		c.tracestate = value
	}
}

func (c carrier) Keys() []string { return []string{"traceparent", "tracestate"} }

func start(ctx context.Context, name string, kind trace.SpanKind, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	t := tracer.Load()
	if t == nil {
		return ctx, trace.SpanFromContext(ctx)
	}
	return (*t).Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
}
