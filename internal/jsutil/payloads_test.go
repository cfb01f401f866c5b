package jsutil_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// A reference whose chunk count exceeds its size is refused before any chunk is read:
// a hostile count cannot make a reader ask the server a billion times.
func TestPayloadGetRefusesImpossibleChunks(t *testing.T) {
	f := natstest.StartJetStream(t, events.Config{})
	p := jsutil.NewPayloads(f.JS, f.Cfg)
	ctx := context.Background()
	ref, err := p.Put(ctx, "acme", []byte("0123456789"))
	if err != nil {
		t.Fatal(err)
	}
	bad := *ref
	bad.Chunks = 1 << 30
	if _, err := p.Get(ctx, &bad, 0); !errors.Is(err, jsutil.ErrPayloadMismatch) || !jsutil.IsPayloadGone(err) {
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
	p := jsutil.NewPayloads(f.JS, f.Cfg)
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
