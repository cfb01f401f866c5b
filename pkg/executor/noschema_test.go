package executor_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/toolfleet/toolfleet/internal/semconv"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/internal/testsupport/opstest"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/executor"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Tools without a schema run as their noSchemaMode says: read-only (declared read-only)
// and full run, human-approval parks until approved; a read-only tool that does not
// declare itself read-only is refused at registration. Results and the "call answered"
// log say validated:false and the mode.
func TestNoSchemaModes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	reg := echoRegistry(t)
	var ran sync.Map
	run := func(ctx context.Context, args json.RawMessage) (any, error) {
		info, _ := tools.CallInfoFrom(ctx)
		ran.Store(info.CallID, info.Tool)
		return map[string]string{"ran": info.Tool}, nil
	}
	err := reg.AddFunc(tools.Definition{Name: "undeclared", AllowNoSchema: true, NoSchemaMode: tools.NoSchemaReadOnly, Safe: true}, run)
	wantMessage := `add "read-only" to its capabilities (capabilities: ["read-only"])`
	var te *tools.Error
	if !errors.As(err, &te) || te.Code != tools.CodeInvalidDefinition || !strings.Contains(te.Message, wantMessage) {
		t.Fatalf("read-only tool without the capability: err = %v, want invalid_definition saying %s", err, wantMessage)
	}
	for _, def := range []tools.Definition{
		{Name: "lookup", AllowNoSchema: true, NoSchemaMode: tools.NoSchemaReadOnly, Capabilities: []string{tools.CapabilityReadOnly}, Safe: true},
		{Name: "shell", AllowNoSchema: true, NoSchemaMode: tools.NoSchemaHumanApproval, Safe: true},
		{Name: "anything", AllowNoSchema: true, NoSchemaMode: tools.NoSchemaFull, Safe: true},
	} {
		must(t, reg.AddFunc(def, run))
	}
	var logs opstest.Log
	b.start(t, reg, executor.WithLogger(zerolog.New(&logs).Level(zerolog.DebugLevel)), executor.WithApprovalTimeout(time.Minute))
	for _, name := range []string{"lookup", "shell", "anything"} {
		b.waitServed(t, name)
	}
	requests := subscribe(t, b, "toolfleet.event.approval.requested.shell.*")

	b.call(t, "echo", "c-echo", "r-noschema", `{"text":"hi"}`)
	b.call(t, "lookup", "c-lookup", "r-noschema", `{"anything":1}`)
	b.call(t, "anything", "c-full", "r-noschema", `{"anything":2}`)
	b.call(t, "shell", "c-shell", "r-noschema", `{"cmd":"ls"}`)

	req := awaitRequest(t, requests)
	if req.CallID != "c-shell" || req.Validated {
		t.Fatalf("approval request %+v, want call c-shell with validated false", req)
	}
	if _, done := ran.Load("c-shell"); done || b.results.count("c-shell") != 0 {
		t.Fatal("the human-approval call ran or was answered before its approval")
	}
	b.answer(t, req, events.ApprovalAnswer{Decision: events.DecisionApprove, By: "ann"})

	got := b.results.wait(t, 15*time.Second, "c-echo", "c-lookup", "c-full", "c-shell")
	tests := []struct {
		id   string
		mode tools.NoSchemaMode
	}{
		{"c-echo", ""},
		{"c-lookup", tools.NoSchemaReadOnly},
		{"c-full", tools.NoSchemaFull},
		{"c-shell", tools.NoSchemaHumanApproval},
	}
	for _, tt := range tests {
		res := got[tt.id]
		if res.Status != events.StatusOK {
			t.Errorf("%s: status %s (%v), want ok", tt.id, res.Status, res.Error)
		}
		if res.Validated != (tt.mode == "") || res.NoSchemaMode != tt.mode {
			t.Errorf("%s: validated %v, no_schema_mode %q; want validated %v, mode %q", tt.id, res.Validated, res.NoSchemaMode, tt.mode == "", tt.mode)
		}
		b.results.mu.Lock()
		raw := string(b.results.raw[tt.id][0].Data)
		b.results.mu.Unlock()
		if inRaw := strings.Contains(raw, `"no_schema_mode":"`+string(tt.mode)+`"`); inRaw != (tt.mode != "") {
			t.Errorf("%s: result body %s; want no_schema_mode %q on the wire only for a tool without a schema", tt.id, raw, tt.mode)
		}
	}
	if res := got["c-shell"]; res.Approval == nil || res.Approval.By != "anonymous" || res.Approval.ClaimedBy != "ann" {
		t.Errorf("c-shell: approval %+v, want the anonymous answerer's (claimed: ann)", res.Approval)
	}

	// The "call answered" log lines carry the mode (and only for tools without a schema).
	answered := map[string]map[string]any{}
	natstest.Eventually(t, 10*time.Second, "call answered log lines", func() bool {
		for _, line := range logs.Lines(`"call answered"`) {
			var l map[string]any
			if json.Unmarshal([]byte(line), &l) == nil {
				answered[l["call_id"].(string)] = l
			}
		}
		return len(answered) == len(tests)
	})
	for _, tt := range tests {
		l := answered[tt.id]
		mode, _ := l["no_schema_mode"].(string)
		if l["validated"] != (tt.mode == "") || mode != string(tt.mode) {
			t.Errorf("%s: log line %v; want validated %v and no_schema_mode %q", tt.id, l, tt.mode == "", tt.mode)
		}
	}
}

// The execute_tool span of a call of a tool without a schema carries its noSchemaMode;
// a validated call's does not.
func TestNoSchemaModeInTrace(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	b := setup(t)
	reg := echoRegistry(t)
	must(t, reg.AddFunc(tools.Definition{Name: "anything", AllowNoSchema: true, NoSchemaMode: tools.NoSchemaFull, Safe: true},
		func(context.Context, json.RawMessage) (any, error) { return "ok", nil }))
	b.start(t, reg, executor.WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))))
	b.waitServed(t, "anything")
	b.call(t, "echo", "t-echo", "r-trace", `{"text":"hi"}`)
	b.call(t, "anything", "t-full", "r-trace", `{}`)
	b.results.wait(t, 15*time.Second, "t-echo", "t-full")

	modes := map[string]string{}
	natstest.Eventually(t, 10*time.Second, "two execute_tool spans", func() bool {
		for _, s := range rec.Ended() {
			var id, mode string
			for _, a := range s.Attributes() {
				switch a.Key {
				case semconv.KeyToolCallID:
					id = a.Value.AsString()
				case semconv.KeyToolNoSchemaMode:
					mode = a.Value.AsString()
				}
			}
			if id != "" {
				modes[id] = mode
			}
		}
		_, echo := modes["t-echo"]
		_, full := modes["t-full"]
		return echo && full
	})
	if modes["t-echo"] != "" || modes["t-full"] != string(tools.NoSchemaFull) {
		t.Errorf("span no_schema_mode attributes %v; want none for t-echo, full for t-full", modes)
	}
}
