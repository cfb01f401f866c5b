package events_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
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

// A reference whose chunk count exceeds its size is refused before any chunk is read:
// a hostile count cannot make a reader ask the server a billion times.
func TestPayloadGetRefusesImpossibleChunks(t *testing.T) {
	f := natstest.StartJetStream(t, events.Config{})
	p := events.NewPayloads(f.JS, f.Cfg)
	ctx := context.Background()
	ref, err := p.Put(ctx, "acme", []byte("0123456789"))
	if err != nil {
		t.Fatal(err)
	}
	bad := *ref
	bad.Chunks = 1 << 30
	if _, err := p.Get(ctx, &bad, 0); !errors.Is(err, events.ErrPayloadMismatch) || !events.IsPayloadGone(err) {
		t.Fatalf("get with %d chunks: %v", bad.Chunks, err)
	}
	if data, err := p.Get(ctx, ref, 0); err != nil || !bytes.Equal(data, []byte("0123456789")) {
		t.Fatalf("get: %q, %v", data, err)
	}
}

// BenchmarkPayloads5MB stores and reads back 5 MB by reference; the baseline publishes
// the same chunks to the payloads stream with nothing else (no hash, no reference), so
// the ratio is the claim check's own cost.
func BenchmarkPayloads5MB(b *testing.B) {
	f := natstest.StartJetStream(b, events.Config{})
	p := events.NewPayloads(f.JS, f.Cfg)
	ctx := context.Background()
	data := bytes.Repeat([]byte("0123456789abcdef"), (5<<20)/16)
	chunk := int(f.Cfg.WithDefaults().MaxMsgSize) / 2
	b.Run("baseline-publish-chunks", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			var futures []jetstream.PubAckFuture
			for off, n := 0, 0; off < len(data); off, n = off+chunk, n+1 {
				subj, _ := events.PayloadSubject("", "bench", n)
				fut, err := f.JS.PublishAsync(subj, data[off:min(off+chunk, len(data))])
				if err != nil {
					b.Fatal(err)
				}
				futures = append(futures, fut)
			}
			for _, fut := range futures {
				select {
				case <-fut.Ok():
				case err := <-fut.Err():
					b.Fatal(err)
				}
			}
		}
	})
	var ref *events.PayloadRef
	b.Run("put", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			var err error
			if ref, err = p.Put(ctx, "", data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("get", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, err := p.Get(ctx, ref, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
}
