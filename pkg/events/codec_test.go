package events_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolfleet/toolfleet/internal/testsupport/eventstest"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

func sampleEvents(t testing.TB) []struct {
	subject string
	event   events.Event
} {
	t.Helper()
	now := time.Date(2026, 3, 4, 5, 6, 7, 891234567, time.UTC)
	call, _ := events.CallSubject(events.Identity{}, "get_weather")
	res, _ := events.ResultSubject("", "run_1", "call_1")
	step, _ := events.RunEventSubject("", "run_1", "step")
	return []struct {
		subject string
		event   events.Event
	}{
		{call, events.Event{ID: "call_1", Type: events.TypeCall, Source: "/toolfleet/planner",
			Data: json.RawMessage(`{"tool":"get_weather","arguments":{"city":"Oslo"}}`)}},
		{call, events.Event{ID: "call_2", Type: events.TypeCall, Source: "/me", Time: now, RunID: "run-9",
			Attempt: 3, Deadline: now.Add(time.Minute), TraceParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", TraceState: "rojo=00f067aa0ba902b7",
			Subject: "weather", Data: json.RawMessage(`{"tool":"get_weather","arguments":"{\"city\":\"Oslo\"}"}`)}},
		{res, events.Event{ID: "call_1", Type: events.TypeResult, Source: "/toolfleet/executor/a", Time: now,
			RunID: "run_1", Attempt: 1, Data: json.RawMessage(`{"status":"ok","output":{"t":21}}`)}},
		{step, events.Event{ID: "ev1", Type: events.RunType("step"), Source: "/toolfleet/planner", RunID: "run_1",
			Data: json.RawMessage(`{"run_id":"run_1","step":2}`)}},
	}
}

// The lean encoder and the SDK write the same headers and body, and each decoder reads
// the other's messages to the same event.
func TestEncodeLeanEqualsSDK(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, s := range sampleEvents(t) {
		t.Run(s.event.ID+"_"+s.event.Type, func(t *testing.T) {
			lean, err := events.Encode(s.subject, s.event)
			if err != nil {
				t.Fatal(err)
			}
			sdk, err := eventstest.EncodeSDK(ctx, s.subject, s.event)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(lean.Header, sdk.Header) {
				t.Errorf("headers differ\nlean: %v\nsdk:  %v", lean.Header, sdk.Header)
			}
			if string(lean.Data) != string(sdk.Data) {
				t.Errorf("bodies differ: %s vs %s", lean.Data, sdk.Data)
			}
			for name, m := range map[string]*nats.Msg{"lean": lean, "sdk": sdk} {
				got, err := events.Decode(events.CoreMsg(m), 0)
				if err != nil {
					t.Fatalf("lean decode of %s message: %v", name, err)
				}
				assertSameEvent(t, s.event, got)
				ce, err := eventstest.DecodeSDK(ctx, m, 0)
				if err != nil {
					t.Fatalf("SDK decode of %s message: %v", name, err)
				}
				fromSDK, err := eventstest.FromSDK(ce)
				if err != nil {
					t.Fatal(err)
				}
				assertSameEvent(t, s.event, fromSDK)
			}
		})
	}
}

func assertSameEvent(t *testing.T, want, got events.Event) {
	t.Helper()
	want.Time, got.Time = want.Time.UTC(), got.Time.UTC()
	want.Deadline, got.Deadline = want.Deadline.UTC(), got.Deadline.UTC()
	if !reflect.DeepEqual(want, got) {
		t.Errorf("decoded event differs\nwant %+v\ngot  %+v", want, got)
	}
}

func validCallMsg() *nats.Msg {
	m := nats.NewMsg("toolfleet.call.echo")
	m.Header.Set("ce-specversion", "1.0")
	m.Header.Set("ce-id", "c1")
	m.Header.Set("ce-type", events.TypeCall)
	m.Header.Set("ce-source", "/test")
	m.Header.Set("ce-runid", "r1")
	m.Data = []byte(`{"arguments":{"text":"hi"}}`)
	return m
}

// Every malformed input is refused by both decoders, with a code and a message that
// says what is wrong.
func TestDecodeRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		mutate  func(m *nats.Msg)
		code    tools.Code
		message string
	}{
		{"no headers", func(m *nats.Msg) { m.Header = nil }, tools.CodeInvalidEvent, "ce-specversion"},
		{"no specversion", func(m *nats.Msg) { m.Header.Del("ce-specversion") }, tools.CodeInvalidEvent, "ce-specversion"},
		{"no id", func(m *nats.Msg) { m.Header.Del("ce-id") }, tools.CodeInvalidEvent, "id"},
		{"no type", func(m *nats.Msg) { m.Header.Del("ce-type") }, tools.CodeInvalidEvent, "type"},
		{"no source", func(m *nats.Msg) { m.Header.Del("ce-source") }, tools.CodeInvalidEvent, "source"},
		{"wrong type for subject", func(m *nats.Msg) { m.Header.Set("ce-type", events.TypeResult) }, tools.CodeInvalidEvent, "carries"},
		{"body not JSON", func(m *nats.Msg) { m.Data = []byte(`{"arguments":`) }, tools.CodeInvalidEvent, "not valid JSON"},
		{"empty body", func(m *nats.Msg) { m.Data = nil }, tools.CodeInvalidEvent, "empty"},
		{"oversized", func(m *nats.Msg) { m.Data = []byte(`"` + strings.Repeat("x", 2000) + `"`) }, tools.CodeInputTooLarge, "exceeds the limit of 1024 bytes"},
		{"msg id differs", func(m *nats.Msg) { m.Header.Set("Nats-Msg-Id", "other") }, tools.CodeInvalidEvent, "differs from the event id"},
		{"content type", func(m *nats.Msg) { m.Header.Set("ce-datacontenttype", "text/xml") }, tools.CodeInvalidEvent, "content type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := validCallMsg()
			tt.mutate(m)
			_, err := events.Decode(events.CoreMsg(m), 1024)
			assertCode(t, "lean", err, tt.code, tt.message)
			_, err = eventstest.DecodeSDK(context.Background(), m, 1024)
			assertCode(t, "sdk", err, tt.code, "")
		})
	}
	// Lean-only checks the SDK does not make (it treats extensions as opaque strings).
	lean := []struct {
		name, header, value, message string
	}{
		{"bad attempt", "ce-attempt", "two", "not a positive integer"},
		{"bad deadline", "ce-deadline", "tomorrow", "not an RFC 3339 time"},
		{"id with a control character", "ce-id", "a\x01b", "control character"},
		{"id not UTF-8", "ce-id", "a\xffb", "not valid UTF-8"},
		{"id too long", "ce-id", strings.Repeat("x", events.MaxIDBytes+1), "the limit is 1024 bytes"},
		{"run id with a control character", "ce-runid", "r\x7f", "run id"},
		{"spec 0.3", "ce-specversion", "0.3", "unsupported CloudEvents version"},
	}
	for _, tt := range lean {
		t.Run(tt.name, func(t *testing.T) {
			m := validCallMsg()
			m.Header.Set(tt.header, tt.value)
			e, err := events.Decode(events.CoreMsg(m), 0)
			assertCode(t, "lean", err, tools.CodeInvalidEvent, tt.message)
			if tt.header == "ce-id" && e.ID != tt.value {
				t.Errorf("refused id not kept for the answer: got %q", e.ID)
			}
		})
	}
}

func assertCode(t *testing.T, who string, err error, code tools.Code, message string) {
	t.Helper()
	var te *tools.Error
	if !errors.As(err, &te) {
		t.Fatalf("%s: got %v, want a *tools.Error with code %s", who, err, code)
	}
	if te.Code != code {
		t.Errorf("%s: code %s, want %s (%v)", who, te.Code, code, err)
	}
	if message != "" && !strings.Contains(te.Message, message) {
		t.Errorf("%s: message %q does not mention %q", who, te.Message, message)
	}
}

// A call that fails to decode still yields its id, run id and tool, so that its caller
// can be answered.
func TestDecodeCallKeepsAddress(t *testing.T) {
	t.Parallel()
	m := validCallMsg()
	m.Data = []byte(`{"arguments": nope}`)
	ce, err := events.DecodeCall(events.CoreMsg(m), 0)
	if err == nil {
		t.Fatal("want an error")
	}
	if ce.ID != "c1" || ce.RunIDOrSelf() != "r1" || ce.Call.Tool != "echo" {
		t.Errorf("address lost: id %q run %q tool %q", ce.ID, ce.RunIDOrSelf(), ce.Call.Tool)
	}

	m = validCallMsg()
	m.Data = []byte(`{"tool":"other","arguments":{}}`)
	if _, err := events.DecodeCall(events.CoreMsg(m), 0); !errors.Is(err, tools.ErrInvalidEvent) {
		t.Errorf("tool mismatch: got %v", err)
	}
	m = validCallMsg()
	m.Data = []byte(`{"tool":"echo"}`)
	ce, err = events.DecodeCall(events.CoreMsg(m), 0)
	if err != nil || string(ce.Call.Arguments) != "{}" {
		t.Errorf("missing arguments: got %s, %v; want {}", ce.Call.Arguments, err)
	}
	m = validCallMsg()
	m.Data = []byte(`{"arguments":[1,2]}`)
	if _, err := events.DecodeCall(events.CoreMsg(m), 0); err != nil {
		t.Errorf("arguments are kept as received (an array is for hydrate to refuse): %v", err)
	}
}

func TestEncodeRefusesWhatDecodeRefuses(t *testing.T) {
	t.Parallel()
	good := events.Event{ID: "c1", Type: events.TypeCall, Source: "/x", Data: json.RawMessage(`{}`)}
	tests := []struct {
		name    string
		subject string
		mutate  func(e *events.Event)
	}{
		{"bad id", "toolfleet.call.echo", func(e *events.Event) { e.ID = "a\nb" }},
		{"no type", "toolfleet.call.echo", func(e *events.Event) { e.Type = "" }},
		{"no source", "toolfleet.call.echo", func(e *events.Event) { e.Source = "" }},
		{"wrong subject", "toolfleet.result.r.c1", func(e *events.Event) {}},
		{"bad run", "toolfleet.call.echo", func(e *events.Event) { e.RunID = "r\x00" }},
		{"no data", "toolfleet.call.echo", func(e *events.Event) { e.Data = nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := good
			tt.mutate(&e)
			if _, err := events.Encode(tt.subject, e); !errors.Is(err, tools.ErrInvalidEvent) {
				t.Errorf("Encode: got %v, want invalid_event", err)
			}
			if _, err := eventstest.EncodeSDK(context.Background(), tt.subject, e); !errors.Is(err, tools.ErrInvalidEvent) {
				t.Errorf("EncodeSDK: got %v, want invalid_event", err)
			}
		})
	}
}

func TestStatusOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		code tools.Code
		want events.Status
	}{
		{tools.CodeInvalidInput, events.StatusInvalid},
		{tools.CodeInputTooLarge, events.StatusInvalid},
		{tools.CodeInvalidEvent, events.StatusInvalid},
		{tools.CodeDenied, events.StatusDenied},
		{tools.CodeTimeout, events.StatusTimeout},
		{tools.CodeNoSuchTool, events.StatusNoSuchTool},
		{tools.CodeInterrupted, events.StatusInterrupted},
		{tools.CodeCanceled, events.StatusCanceled},
		{tools.CodeToolFailed, events.StatusError},
		{tools.CodeToolPanic, events.StatusError},
		{tools.CodeInternal, events.StatusError},
	}
	for _, tt := range tests {
		if got := events.StatusOf(&tools.Error{Code: tt.code}); got != tt.want {
			t.Errorf("StatusOf(%s) = %s, want %s", tt.code, got, tt.want)
		}
	}
	if got := events.StatusOf(nil); got != events.StatusOK {
		t.Errorf("StatusOf(nil) = %s", got)
	}
}

func TestNewApprovalAnswer(t *testing.T) {
	t.Parallel()
	m, err := events.NewApprovalAnswer("/human", events.Identity{}, "write_file", "c1", events.ApprovalAnswer{Decision: events.DecisionDeny, Reason: "no"})
	if err != nil {
		t.Fatal(err)
	}
	e, err := events.Decode(events.CoreMsg(m), 0)
	if err != nil {
		t.Fatal(err)
	}
	var a events.ApprovalAnswer
	if err := e.DataAs(&a); err != nil {
		t.Fatal(err)
	}
	if m.Subject != "toolfleet.event.approval.answered.write_file.c1" || e.ID == "c1" || a.Decision != events.DecisionDeny || a.Reason != "no" {
		t.Errorf("answer %s %+v %+v", m.Subject, e, a)
	}
	if _, err := events.NewApprovalAnswer("/human", events.Identity{}, "write_file", "c1", events.ApprovalAnswer{Decision: "maybe"}); !errors.Is(err, tools.ErrInvalidEvent) {
		t.Errorf("decision maybe: %v", err)
	}
	// Every answer to a call has the same deduplication id, so JetStream keeps the first.
	other, err := events.NewApprovalAnswer("/other", events.Identity{}, "write_file", "c1", events.ApprovalAnswer{Decision: events.DecisionApprove})
	if err != nil {
		t.Fatal(err)
	}
	if id := other.Header.Get(events.HeaderMsgID); id != m.Header.Get(events.HeaderMsgID) || id != "approval-c1" || e.ID != id {
		t.Errorf("answer ids %q and %q (event id %q), want approval-c1 for both", m.Header.Get(events.HeaderMsgID), id, e.ID)
	}
}

func TestNewCancel(t *testing.T) {
	t.Parallel()
	for _, sender := range []events.Identity{{}, {Tenant: "acme", Role: "admin"}} {
		m, err := events.NewCancel("/planner", sender, "slow", "urn:c 1", events.Cancel{RunID: "r1", Reason: "run canceled", By: "ann"})
		if err != nil {
			t.Fatal(err)
		}
		want, _ := events.CancelSubject(sender, "slow", "urn:c 1")
		if m.Subject != want {
			t.Errorf("subject %s, want %s", m.Subject, want)
		}
		e, c, err := events.DecodeCancel(events.CoreMsg(m), 0)
		if err != nil {
			t.Fatal(err)
		}
		if e.ID != events.CancelID("urn:c 1", sender) || e.RunID != "r1" || e.Type != events.TypeCancel ||
			c.Tool != "slow" || c.CallID != "urn:c 1" || c.Reason != "run canceled" || c.By != "ann" {
			t.Errorf("cancel decoded as %+v %+v", e, c)
		}
		if id := m.Header.Get(events.HeaderMsgID); id != events.MsgID(sender.Tenant, events.CancelID("urn:c 1", sender)) {
			t.Errorf("Nats-Msg-Id %s", id)
		}
	}
	// Each role's cancel of a call has its own id: a refused role's cancel, stored first,
	// does not make the owner's a duplicate.
	if a, b := events.CancelID("c1", events.Identity{Tenant: "acme", Role: "user"}), events.CancelID("c1", events.Identity{Tenant: "acme", Role: "admin"}); a == b {
		t.Errorf("two roles' cancels share the id %s", a)
	}
	// Data that names another call than the subject is refused: the subject is the authority.
	m, _ := events.NewCancel("/p", events.Identity{}, "slow", "c1", events.Cancel{})
	m.Data = []byte(`{"tool":"slow","call_id":"c2"}`)
	if _, _, err := events.DecodeCancel(events.CoreMsg(m), 0); !errors.Is(err, tools.ErrInvalidEvent) {
		t.Errorf("cancel naming another call: %v", err)
	}
	// A cancel of the shape before roles names no sender: refused, saying so.
	m, _ = events.NewCancel("/p", events.Identity{}, "slow", "c1", events.Cancel{})
	m.Subject += ".acme"
	if _, _, err := events.DecodeCancel(events.CoreMsg(m), 0); !errors.Is(err, tools.ErrInvalidEvent) || !strings.Contains(err.Error(), "sender is unknown") {
		t.Errorf("cancel without a role: %v", err)
	}
	if _, err := events.NewCancel("/p", events.Identity{}, "slow", "", events.Cancel{}); !errors.Is(err, tools.ErrInvalidEvent) {
		t.Errorf("cancel without a call id: %v", err)
	}
}

// A tenant's run events encode and decode (the word, not the tenant, gives the type).
func TestTenantRunEvent(t *testing.T) {
	t.Parallel()
	m, err := events.NewRunEvent("/ex", "tool_started", events.RunEvent{RunID: "r1", Tenant: "acme", CallID: "c1", Tool: "slow"}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	_, what, r, err := events.DecodeRunEvent(events.CoreMsg(m))
	if err != nil || what != "tool_started" || r.Tenant != "acme" || m.Subject != "toolfleet.event.run.r1.tool_started.acme" {
		t.Errorf("tenant run event %s decoded as %s %+v, %v", m.Subject, what, r, err)
	}
}

// An executor's run events name the executor, the attempt and the report: each is its
// own event (distinct ids), and the same one published twice is one.
func TestExecutorRunEventIDs(t *testing.T) {
	t.Parallel()
	id := func(r events.RunEvent) string {
		m, err := events.NewRunEvent("/ex", "tool_progress", r, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		return m.Header.Get(events.HeaderID)
	}
	base := events.RunEvent{RunID: "r1", CallID: "c1", Executor: "ex1", Attempt: 1, Seq: 1}
	second := base
	second.Seq = 2
	retry := base
	retry.Attempt = 2
	other := base
	other.Executor = "ex2"
	ids := map[string]bool{id(base): true, id(second): true, id(retry): true, id(other): true}
	if len(ids) != 4 || id(base) != "r1-tool_progress-c1-ex1-1-1" {
		t.Errorf("ids %v", ids)
	}
}
