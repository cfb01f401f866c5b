package jsutil_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/internal/testsupport/nettest"
)

// slowServer is JetStream with a stream on t.> behind a proxy that can hold the
// server's answers: a server that falls behind, as its client sees it. The client's
// window of asynchronous publishes is one publish wide, and a PubAck not back within
// ackTimeout fails its publish.
func slowServer(t *testing.T, ackTimeout time.Duration) (*nettest.Proxy, jetstream.JetStream) {
	t.Helper()
	srv := natstest.Start(t)
	direct, err := jetstream.New(srv.Connect())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := direct.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}}); err != nil {
		t.Fatal(err)
	}
	proxy := nettest.NewProxy(t, srv.Server().Addr().String())
	nc, err := nats.Connect("nats://" + proxy.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(1), jetstream.WithPublishAsyncTimeout(ackTimeout))
	if err != nil {
		t.Fatal(err)
	}
	return proxy, js
}

// A publish that finds the window full waits for room, however long, instead of failing
// after nats.go's stall wait; the window says how long publishes have waited, and the
// wait is told once it ends. Its context's end ends the wait.
func TestWindowWaitsForRoom(t *testing.T) {
	proxy, js := slowServer(t, time.Minute)
	var mu sync.Mutex
	var waits []time.Duration
	w := jsutil.NewWindow(js, func(d time.Duration) { mu.Lock(); waits = append(waits, d); mu.Unlock() })
	ctx := context.Background()

	proxy.Hold()
	first, err := w.Publish(ctx, nats.NewMsg("t.1"))
	if err != nil {
		t.Fatal(err)
	}
	published := make(chan error, 1)
	go func() {
		f, err := w.Publish(ctx, nats.NewMsg("t.2"))
		if err == nil {
			select {
			case <-f.Ok():
			case err = <-f.Err():
			}
		}
		published <- err
	}()
	// Past nats.go's stall wait (200ms) and then some: it would have failed by now.
	natstest.Eventually(t, 10*time.Second, "the window to be full for 500ms", func() bool { return w.Full() > 500*time.Millisecond })
	select {
	case err := <-published:
		t.Fatalf("the second publish returned %v while the first waits for its PubAck", err)
	default:
	}
	proxy.Release()
	if err := jsutil.Settle(ctx, js, first, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := <-published; err != nil {
		t.Fatalf("the publish that waited for room: %v", err)
	}
	if full := w.Full(); full != 0 {
		t.Errorf("Full = %s with no publish waiting", full)
	}
	mu.Lock()
	if len(waits) != 1 || waits[0] < 500*time.Millisecond {
		t.Errorf("waits told: %v, want one of at least 500ms", waits)
	}
	mu.Unlock()

	// A wait ends with its context.
	proxy.Hold()
	if _, err := w.Publish(ctx, nats.NewMsg("t.3")); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err = w.Publish(cctx, nats.NewMsg("t.4"))
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
		t.Fatalf("publish whose context ended while it waited: %v, want the deadline and the stall", err)
	}
	proxy.Release()
}

// A publish whose PubAck is late (the server slow, or gone) is published again until it
// is settled, and stored once.
func TestSettleRepublishesALatePublish(t *testing.T) {
	proxy, js := slowServer(t, 100*time.Millisecond)
	ctx := context.Background()
	msg := nats.NewMsg("t.late")
	msg.Header.Set(jetstream.MsgIDHeader, "late-1")
	msg.Data = []byte("once")

	proxy.Hold()
	sent := proxy.Sent("t.late")
	f, err := js.PublishMsgAsync(msg)
	if err != nil {
		t.Fatal(err)
	}
	select { // the client writes its buffer to the proxy in the background
	case <-sent:
	case <-time.After(10 * time.Second):
		t.Fatal("the publish did not reach the proxy within 10s")
	}
	settled := make(chan error, 1)
	again := proxy.Sent("t.late") // the publish again, after the first PubAck timed out
	go func() { settled <- jsutil.Settle(ctx, js, f, 200*time.Millisecond) }()
	select {
	case <-again:
	case err := <-settled:
		t.Fatalf("settled while the server's answers are held: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the publish was not sent again within 10s")
	}
	proxy.Release()
	if err := <-settled; err != nil {
		t.Fatalf("settle: %v", err)
	}
	s, err := js.Stream(ctx, "T")
	if err != nil {
		t.Fatal(err)
	}
	if n := s.CachedInfo().State.Msgs; n != 1 {
		t.Errorf("the stream holds %d messages, want the one", n)
	}
}
