package events_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

var goodRef = events.PayloadRef{ID: "p1", Tenant: "acme", Size: 10, Chunks: 1, SHA256: strings.Repeat("ab", 32)}

// A call carries its arguments or a reference to them, never both; a reference that
// cannot point at a payload is refused when the call is decoded, saying why, and
// NewCall refuses to write either.
func TestCallArgumentsRef(t *testing.T) {
	m, err := events.NewCall(events.CallOptions{Source: "/t", ID: "c1"}, events.Call{Tool: "echo", ArgumentsRef: &goodRef})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(m.Data), `"arguments"`) {
		t.Fatalf("a call by reference writes arguments: %s", m.Data)
	}
	ce, err := events.DecodeCall(events.CoreMsg(m), 0)
	if err != nil || ce.Call.Arguments != nil || ce.Call.ArgumentsRef == nil || *ce.Call.ArgumentsRef != goodRef {
		t.Fatalf("decoded %+v %+v, %v", ce.Call, ce.Call.ArgumentsRef, err)
	}
	if _, err := events.NewCall(events.CallOptions{Source: "/t", ID: "c2"},
		events.Call{Tool: "echo", Arguments: json.RawMessage(`{}`), ArgumentsRef: &goodRef}); !errors.Is(err, &tools.Error{Code: tools.CodeInvalidEvent}) {
		t.Fatalf("NewCall with both: %v", err)
	}

	ref := func(f func(r *events.PayloadRef)) string {
		r := goodRef
		f(&r)
		b, _ := json.Marshal(r)
		return string(b)
	}
	for _, tt := range []struct{ name, body, says string }{
		{"both", `{"arguments":{"a":1},"arguments_ref":` + ref(func(*events.PayloadRef) {}) + `}`, "both arguments and arguments_ref"},
		{"id with a dot", `{"arguments_ref":` + ref(func(r *events.PayloadRef) { r.ID = "a.b" }) + `}`, "not a subject token"},
		{"empty id", `{"arguments_ref":` + ref(func(r *events.PayloadRef) { r.ID = "" }) + `}`, "not a subject token"},
		{"tenant wildcard", `{"arguments_ref":` + ref(func(r *events.PayloadRef) { r.Tenant = "*" }) + `}`, "tenant"},
		{"no chunks", `{"arguments_ref":` + ref(func(r *events.PayloadRef) { r.Chunks = 0 }) + `}`, "chunks cannot hold"},
		{"chunks over size", `{"arguments_ref":` + ref(func(r *events.PayloadRef) { r.Chunks = 1 << 30 }) + `}`, "chunks cannot hold"},
		{"negative size", `{"arguments_ref":` + ref(func(r *events.PayloadRef) { r.Size = -1 }) + `}`, "chunks cannot hold"},
		{"short sha", `{"arguments_ref":` + ref(func(r *events.PayloadRef) { r.SHA256 = "abc" }) + `}`, "64 hex digits"},
		{"sha not hex", `{"arguments_ref":` + ref(func(r *events.PayloadRef) { r.SHA256 = strings.Repeat("zz", 32) }) + `}`, "64 hex digits"},
		{"not an object", `{"arguments_ref":"p1"}`, "does not match the call type"},
	} {
		msg := &nats.Msg{Subject: "toolfleet.call.echo", Data: []byte(tt.body), Header: nats.Header{
			"ce-specversion": {"1.0"}, "ce-id": {"x"}, "ce-type": {events.TypeCall}, "ce-source": {"/hostile"}}}
		_, err := events.DecodeCall(events.CoreMsg(msg), 0)
		var te *tools.Error
		if !errors.As(err, &te) || te.Code != tools.CodeInvalidEvent || !strings.Contains(te.Message, tt.says) {
			t.Errorf("%s: %v; want invalid_event saying %q", tt.name, err, tt.says)
		}
	}
}
