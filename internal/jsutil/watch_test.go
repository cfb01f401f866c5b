package jsutil_test

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
)

// lossyBucket is a bucket reached through a relay in front of the server's JetStream
// API that drops the first request creating a consumer, as a cluster electing its meta
// leader drops the requests it has no leader for.
type lossyBucket struct {
	direct, relayed  jetstream.KeyValue // the bucket, straight and through the relay
	creates, dropped atomic.Int32
}

func newLossyBucket(t *testing.T, ctx context.Context) *lossyBucket {
	t.Helper()
	srv := natstest.Start(t)
	admin := srv.Connect()
	t.Cleanup(admin.Close)
	js, err := jetstream.New(admin)
	if err != nil {
		t.Fatal(err)
	}
	b := &lossyBucket{}
	if b.direct, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "runs"}); err != nil {
		t.Fatal(err)
	}
	relay, err := admin.Subscribe("relay.>", func(m *nats.Msg) {
		api := "$JS.API." + strings.TrimPrefix(m.Subject, "relay.")
		if strings.HasPrefix(api, "$JS.API.CONSUMER.CREATE.") && b.creates.Add(1) == 1 {
			b.dropped.Add(1)
			return
		}
		resp, err := admin.RequestMsg(&nats.Msg{Subject: api, Data: m.Data, Header: m.Header}, 5*time.Second)
		if err == nil {
			_ = m.RespondMsg(&nats.Msg{Data: resp.Data, Header: resp.Header})
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = relay.Unsubscribe() })
	client := srv.Connect()
	t.Cleanup(client.Close)
	viaRelay, err := jetstream.NewWithAPIPrefix(client, "relay")
	if err != nil {
		t.Fatal(err)
	}
	if b.relayed, err = viaRelay.KeyValue(ctx, "runs"); err != nil {
		t.Fatal(err)
	}
	return b
}

// lost fails the test unless the relay dropped one consumer creation and passed on a
// later one.
func (b *lossyBucket) lost(t *testing.T) {
	t.Helper()
	if b.dropped.Load() != 1 || b.creates.Load() < 2 {
		t.Fatalf("%d consumer creations asked, %d dropped: the relay lost nothing", b.creates.Load(), b.dropped.Load())
	}
}

// A watch whose consumer-creating request is lost is asked for again, instead of
// holding its caller until the watch's own context ends: it starts and sees the key,
// and a put after.
func TestWatchAsksAgainWhenARequestIsLost(t *testing.T) {
	defer jsutil.SetSetupTryTimeout(300 * time.Millisecond)()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := newLossyBucket(t, ctx)
	if _, err := b.direct.Put(ctx, "r1", []byte("started")); err != nil {
		t.Fatal(err)
	}

	w, err := jsutil.Watch(ctx, b.relayed, "r1")
	if err != nil {
		t.Fatalf("watch: %v (%d consumer creations asked, %d dropped)", err, b.creates.Load(), b.dropped.Load())
	}
	defer w.Stop()
	b.lost(t)
	next := func() jetstream.KeyValueEntry {
		t.Helper()
		select {
		case e := <-w.Updates():
			return e
		case <-ctx.Done():
			t.Fatal("no update")
			return nil
		}
	}
	if e := next(); e == nil || string(e.Value()) != "started" {
		t.Fatalf("first update %v, want the key's value", e)
	}
	if e := next(); e != nil {
		t.Fatalf("second update %q, want the end of initial values", e.Value())
	}
	if _, err := b.direct.Put(ctx, "r1", []byte("done")); err != nil {
		t.Fatal(err)
	}
	if e := next(); e == nil || string(e.Value()) != "done" {
		t.Fatalf("update after a put: %v, want its value", e)
	}
}

// A listing whose request is lost (an executor's approvals sweep) is asked for again:
// it lists the filter's keys with a value, not the deleted one nor the others.
func TestListKeysAsksAgainWhenARequestIsLost(t *testing.T) {
	defer jsutil.SetSetupTryTimeout(300 * time.Millisecond)()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := newLossyBucket(t, ctx)
	for _, k := range []string{"echo.c1", "echo.c2", "echo.c3", "charge.c4"} {
		if _, err := b.direct.Put(ctx, k, []byte("parked")); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.direct.Delete(ctx, "echo.c2"); err != nil {
		t.Fatal(err)
	}

	keys, err := jsutil.ListKeys(ctx, b.relayed, "echo.>")
	if err != nil {
		t.Fatalf("list: %v (%d consumer creations asked, %d dropped)", err, b.creates.Load(), b.dropped.Load())
	}
	b.lost(t)
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"echo.c1", "echo.c3"}) {
		t.Fatalf("keys %v, want echo.c1 and echo.c3", keys)
	}
}
