package jsutil_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
)

// A watch whose consumer-creating request is lost (a cluster drops the requests it has
// no leader for) is asked for again, instead of holding its caller until the watch's
// own context ends: here a relay in front of the server's JetStream API drops the
// first such request, and the watch still starts and sees the key, and a put after.
func TestWatchAsksAgainWhenARequestIsLost(t *testing.T) {
	defer jsutil.SetSetupTryTimeout(300 * time.Millisecond)()
	srv := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin := srv.Connect()
	defer admin.Close()
	js, err := jetstream.New(admin)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "runs"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "r1", []byte("started")); err != nil {
		t.Fatal(err)
	}

	var creates, dropped atomic.Int32
	relay, err := admin.Subscribe("relay.>", func(m *nats.Msg) {
		api := "$JS.API." + strings.TrimPrefix(m.Subject, "relay.")
		if strings.HasPrefix(api, "$JS.API.CONSUMER.CREATE.") && creates.Add(1) == 1 {
			dropped.Add(1)
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
	defer relay.Unsubscribe()
	client := srv.Connect()
	defer client.Close()
	viaRelay, err := jetstream.NewWithAPIPrefix(client, "relay")
	if err != nil {
		t.Fatal(err)
	}
	runs, err := viaRelay.KeyValue(ctx, "runs")
	if err != nil {
		t.Fatal(err)
	}

	w, err := jsutil.Watch(ctx, runs, "r1")
	if err != nil {
		t.Fatalf("watch: %v (%d consumer creations asked, %d dropped)", err, creates.Load(), dropped.Load())
	}
	defer w.Stop()
	if dropped.Load() != 1 || creates.Load() < 2 {
		t.Fatalf("%d consumer creations asked, %d dropped: the relay lost nothing", creates.Load(), dropped.Load())
	}
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
	if _, err := kv.Put(ctx, "r1", []byte("done")); err != nil {
		t.Fatal(err)
	}
	if e := next(); e == nil || string(e.Value()) != "done" {
		t.Fatalf("update after a put: %v, want its value", e)
	}
}
