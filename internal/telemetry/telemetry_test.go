package telemetry

import (
	"context"
	"testing"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace/noop"
)

// The OTEL_* variables decide: nothing set is a no-op provider, an unknown exporter or
// protocol is an error before anything starts, an OTLP endpoint an exporting provider.
func TestSetupFromEnv(t *testing.T) {
	t.Setenv("OTEL_TRACES_EXPORTER", "")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "")
	tr, err := Setup(context.Background(), "executor")
	if err != nil || tr.On() {
		t.Fatalf("nothing set: on %v, err %v", tr.On(), err)
	}
	if _, ok := tr.Provider.(noop.TracerProvider); !ok {
		t.Errorf("nothing set: provider %T, want a no-op one", tr.Provider)
	}
	tr.Stop(zerolog.Nop())

	t.Setenv("OTEL_TRACES_EXPORTER", "zipkin")
	if err := CheckEnv(); err == nil {
		t.Error("CheckEnv accepted an unknown exporter")
	}
	if _, err := Setup(context.Background(), "executor"); err == nil {
		t.Error("an unknown exporter was accepted")
	}
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "thrift")
	if err := CheckEnv(); err == nil {
		t.Error("CheckEnv accepted an unknown protocol")
	}

	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
	tr, err = Setup(context.Background(), "executor")
	if err != nil || !tr.On() || !tr.CaptureContent {
		t.Fatalf("otlp: on %v, capture %v, err %v", tr.On(), tr.CaptureContent, err)
	}
	_, span := tr.Provider.Tracer("test").Start(context.Background(), "s")
	if !span.IsRecording() {
		t.Error("otlp: the provider does not record spans")
	}
	span.End()
	tr.Stop(zerolog.Nop()) // nothing listens on the endpoint: the flush gives up within its bound
}
