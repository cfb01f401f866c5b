package toolfleetcli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/toolfleet/toolfleet/internal/semconv"
	"github.com/toolfleet/toolfleet/internal/telemetry"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// The demo's agent run, traced with an in-memory exporter: one trace runs from the run's
// invoke_agent span through each model call's chat span and, across the JetStream hop,
// each tool's execute_tool span in the executor, with the GenAI attributes; the planner's
// metrics count the run, its steps and its tokens. The fleet's parts trace with the
// provider the fleet hands them; nothing global is set.
func TestRunIsOneTrace(t *testing.T) {
	t.Setenv("TOOLFLEET_MODEL", "")
	rec := tracetest.NewSpanRecorder()
	tracing := &telemetry.Tracing{Provider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))}
	sandbox := t.TempDir()
	if err := os.WriteFile(filepath.Join(sandbox, "orders.txt"), []byte("order 1: 17 widgets\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	metrics := prometheus.NewRegistry()
	f, err := Start(ctx, Options{SandboxRoot: sandbox, Metrics: metrics, Tracing: tracing})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	run, err := agentRun(ctx, f, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if run.TraceParent == "" {
		t.Fatal("the run stores no trace context")
	}

	var runSpan sdktrace.ReadOnlySpan
	var byName map[string][]sdktrace.ReadOnlySpan
	// The run's span ends when the replica that stored its end is told of it, which may
	// be just after Wait saw the run done.
	natstest.EventuallyNil(t, 30*time.Second, "the invoke_agent span of run "+run.ID, func() error {
		byName = map[string][]sdktrace.ReadOnlySpan{}
		ended := rec.Ended()
		for _, s := range ended {
			op := attr(s, "gen_ai.operation.name")
			byName[op] = append(byName[op], s)
			if op == semconv.OpInvokeAgent && attr(s, "gen_ai.conversation.id") == run.ID {
				runSpan = s
			}
		}
		if runSpan == nil {
			return fmt.Errorf("%d spans ended, none of them", len(ended))
		}
		return nil
	})
	trace, parent := runSpan.SpanContext().TraceID(), runSpan.SpanContext().SpanID()
	if n := len(byName[semconv.OpChat]); n != run.Step+1 && n != run.Step {
		t.Errorf("%d chat spans for a run of %d steps", n, run.Step)
	}
	for _, s := range byName[semconv.OpChat] {
		if s.SpanContext().TraceID() != trace || s.Parent().SpanID() != parent || !strings.HasPrefix(s.Name(), "chat ") {
			t.Errorf("chat span %q is not the run span's child", s.Name())
		}
	}
	executed := map[string]bool{}
	for _, c := range run.Calls {
		if c.Status == string(events.StatusOK) {
			executed[c.ID] = true
		}
	}
	for _, s := range byName[semconv.OpExecuteTool] {
		id := attr(s, "gen_ai.tool.call.id")
		if s.SpanContext().TraceID() != trace || s.Parent().SpanID() != parent || !s.Parent().IsRemote() {
			t.Errorf("execute_tool span of %s is not the run span's child across the hop", id)
		}
		if s.Name() != "execute_tool "+attr(s, "gen_ai.tool.name") {
			t.Errorf("span name %q, tool %q", s.Name(), attr(s, "gen_ai.tool.name"))
		}
		delete(executed, id)
	}
	if len(executed) > 0 {
		t.Errorf("calls run by the executor without an execute_tool span: %v", executed)
	}
	t.Logf("run %s: %d chat spans, %d execute_tool spans, %d calls", run.ID, len(byName[semconv.OpChat]), len(byName[semconv.OpExecuteTool]), len(run.Calls))
	if len(byName[semconv.OpExecuteTool]) == 0 {
		t.Error("no execute_tool span")
	}
	if got := testutil.ToFloat64(mustCounter(t, metrics, "toolfleet_planner_runs_finished_total")); got != 1 {
		t.Errorf("runs finished = %v, want 1", got)
	}
}

func attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, a := range s.Attributes() {
		if string(a.Key) == key {
			return a.Value.String()
		}
	}
	return ""
}

// mustCounter returns the sum of every series of the counter name in reg.
func mustCounter(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
			c := prometheus.NewCounter(prometheus.CounterOpts{Name: name})
			c.Add(sum)
			return c
		}
	}
	t.Fatalf("no metric %s", name)
	return nil
}
