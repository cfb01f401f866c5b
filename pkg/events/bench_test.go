package events_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/internal/testsupport/eventstest"
	"github.com/toolfleet/toolfleet/pkg/events"
)

func benchEvent() (string, events.Event) {
	return "toolfleet.call.get_weather", events.Event{ID: "call_0123456789", Type: events.TypeCall,
		Source: "/toolfleet/planner", Time: time.Now(), RunID: "run_0123456789", Attempt: 1,
		TraceParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		Data:        json.RawMessage(`{"tool":"get_weather","arguments":{"city":"Oslo","units":"metric","days":3},"metadata":{"role":"user"}}`)}
}

// BenchmarkEncode compares writing the ce-* headers by hand with the CloudEvents SDK's
// NATS binding; read the ratio of ns/op.
func BenchmarkEncode(b *testing.B) {
	subj, e := benchEvent()
	b.Run("lean", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := events.Encode(subj, e); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sdk", func(b *testing.B) {
		b.ReportAllocs()
		ctx := context.Background()
		for b.Loop() {
			if _, err := eventstest.EncodeSDK(ctx, subj, e); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkDecode compares the lean decoder with the SDK's.
func BenchmarkDecode(b *testing.B) {
	subj, e := benchEvent()
	msg, err := events.Encode(subj, e)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("lean", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := events.Decode(events.CoreMsg(msg), 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sdk", func(b *testing.B) {
		b.ReportAllocs()
		ctx := context.Background()
		for b.Loop() {
			if _, err := eventstest.DecodeSDK(ctx, msg, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
}
