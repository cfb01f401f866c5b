// Package telemetry sets up tracing for toolfleet's programs from the standard OTEL_*
// variables: [Setup] returns a tracer provider that the program hands to each part it
// runs (executor.WithTracerProvider, planner.Config.TracerProvider). The parts are
// libraries and never read these variables or any global switch; a program that embeds
// them does the same as the programs do, with a provider of its own.
//
// Tracing is on when OTEL_TRACES_EXPORTER is otlp (or console), or an OTLP endpoint is
// set (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT); OTEL_SDK_DISABLED
// or OTEL_TRACES_EXPORTER=none turn it off, and the provider is then a no-op one. The
// protocol is OTEL_EXPORTER_OTLP_PROTOCOL (http/protobuf, the default, or grpc); sampling
// is OTEL_TRACES_SAMPLER (parentbased_always_on by default); the service name is the
// part's name. Argument and result content goes into spans only when
// OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT is true ([Tracing].CaptureContent):
// they may hold what users would not want in a trace store.
//
// This package links the OTLP exporters; the parts' packages do not import it.
package telemetry

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Tracing is a program's tracing as the OTEL_* variables ask for it.
type Tracing struct {
	// Provider is what the program hands to its parts: an SDK provider exporting as
	// asked, or a no-op one when tracing is off.
	Provider trace.TracerProvider
	// CaptureContent says whether spans may hold tool arguments and results.
	CaptureContent bool
	// shutdown flushes and stops an SDK provider; nil when tracing is off.
	shutdown func(context.Context) error
}

// On reports whether spans are exported.
func (t *Tracing) On() bool { return t.shutdown != nil }

// Off is tracing switched off: a no-op provider, nothing to flush.
func Off() *Tracing { return &Tracing{Provider: noop.NewTracerProvider()} }

// CheckEnv reports a variable that asks for something unknown, before anything starts.
func CheckEnv() error {
	_, err := exporterKind()
	return err
}

// Setup returns the tracing of the part named service as the OTEL_* variables ask for
// it (see the package doc). Stop it once the part stopped. A variable that asks for
// something unknown is an error.
func Setup(ctx context.Context, service string) (*Tracing, error) {
	exp, err := exporterFromEnv(ctx)
	if err != nil || exp == nil {
		return Off(), err
	}
	res, err := resource.New(ctx, resource.WithFromEnv(), resource.WithTelemetrySDK(),
		resource.WithAttributes(attribute.String("service.name", service)))
	if err != nil {
		return Off(), fmt.Errorf("telemetry: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return &Tracing{Provider: tp, shutdown: tp.Shutdown,
		CaptureContent: strings.EqualFold(os.Getenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"), "true")}, nil
}

// Stop flushes the spans not exported yet, for up to 5 seconds, and stops exporting;
// a failure is logged on log. It does nothing when tracing is off.
func (t *Tracing) Stop(log zerolog.Logger) {
	if t == nil || t.shutdown == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := t.shutdown(ctx); err != nil {
		log.Warn().Err(err).Msg("flush traces")
	}
}

// exporterKind is the exporter the variables ask for: "", "console" or "otlp".
func exporterKind() (string, error) {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return "", nil
	}
	kind := strings.ToLower(strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER")))
	if kind == "" && (os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "") {
		kind = "otlp"
	}
	switch kind {
	case "", "none":
		return "", nil
	case "console":
		return kind, nil
	case "otlp":
	default:
		return "", fmt.Errorf("telemetry: OTEL_TRACES_EXPORTER %q is not supported (otlp, console or none)", kind)
	}
	switch strings.ToLower(otlpProtocol()) {
	case "", "http/protobuf", "grpc":
		return kind, nil
	}
	return "", fmt.Errorf("telemetry: OTLP protocol %q is not supported (http/protobuf or grpc)", otlpProtocol())
}

func otlpProtocol() string {
	if p := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"); p != "" {
		return p
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
}

func exporterFromEnv(ctx context.Context) (sdktrace.SpanExporter, error) {
	kind, err := exporterKind()
	switch {
	case err != nil || kind == "":
		return nil, err
	case kind == "console":
		return stdouttrace.New(stdouttrace.WithWriter(io.Writer(os.Stderr)))
	case strings.EqualFold(otlpProtocol(), "grpc"):
		return otlptracegrpc.New(ctx)
	}
	return otlptracehttp.New(ctx)
}
