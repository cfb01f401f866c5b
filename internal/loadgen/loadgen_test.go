package loadgen_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/loadgen"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
)

type testBundle struct {
	nc *nats.Conn
	js jetstream.JetStream
}

// setup starts JetStream with a call stream and a reply stream, and a worker that
// answers the call with id i replies(i) times (each reply stored: its own Nats-Msg-Id).
func setup(t *testing.T, replies func(i int) int) testBundle {
	t.Helper()
	srv := natstest.Start(t)
	nc := srv.Connect()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, s := range []jetstream.StreamConfig{
		{Name: "CALLS", Subjects: []string{"t.call.>"}, Retention: jetstream.WorkQueuePolicy},
		{Name: "REPLIES", Subjects: []string{"t.reply.>"}},
	} {
		if _, err := js.CreateStream(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := js.CreateConsumer(ctx, "CALLS", jetstream.ConsumerConfig{Durable: "w", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	wjs, err := jetstream.New(srv.Connect())
	if err != nil {
		t.Fatal(err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		id := m.Headers().Get(nats.MsgIdHdr)
		i, _ := strconv.Atoi(strings.TrimPrefix(id, "c"))
		for k := range replies(i) {
			r := &nats.Msg{Subject: "t.reply.run1." + id, Header: nats.Header{nats.MsgIdHdr: []string{fmt.Sprintf("%s-r%d", id, k)}}}
			if _, err := wjs.PublishMsg(ctx, r); err != nil {
				_ = m.Nak()
				return
			}
		}
		_ = m.Ack()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cc.Stop)
	return testBundle{nc: nc, js: js}
}

func call(i int) *nats.Msg {
	id := fmt.Sprintf("c%d", i)
	return &nats.Msg{Subject: "t.call.x", Header: nats.Header{nats.MsgIdHdr: []string{id}}, Data: []byte(`{}`)}
}

func drive(t *testing.T, b testBundle, cfg loadgen.Config, n int, extra ...*nats.Msg) loadgen.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg.ReplyStreams = []string{"REPLIES"}
	cfg.CallOf = func(subject string) (string, bool) { return strings.CutPrefix(subject, "t.reply.run1.") }
	g, err := loadgen.Start(ctx, b.nc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Stop()
	for i := range n {
		if err := g.Publish(ctx, call(i)); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range extra {
		if err := g.Publish(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	r, err := g.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestEveryCallAnswered(t *testing.T) {
	t.Parallel()
	b := setup(t, func(int) int { return 1 })
	var seen atomic.Int64
	r := drive(t, b, loadgen.Config{ReplyFilter: "t.reply.run1.*", Window: 16,
		OnReply: func(id string, m jetstream.Msg) {
			if strings.HasSuffix(m.Subject(), "."+id) {
				seen.Add(1)
			}
		}}, 500)
	if r.Published != 500 || r.Answered != 500 || r.Lost != 0 || r.Doubled != 0 || r.PublishErrors != 0 {
		t.Fatalf("report = %+v", r)
	}
	if seen.Load() != 500 {
		t.Errorf("OnReply saw %d first replies with their ids, want 500", seen.Load())
	}
	if r.P50 <= 0 || r.P99 < r.P50 || r.Elapsed <= 0 || r.CallsPerSec() <= 0 {
		t.Errorf("figures = %+v, %.0f calls/s", r, r.CallsPerSec())
	}
}

// A call nobody answers is lost once the replies stall, not waited for forever.
func TestUnansweredCallsAreLost(t *testing.T) {
	t.Parallel()
	b := setup(t, func(i int) int { return 1 - i%2 }) // odd calls get no reply
	r := drive(t, b, loadgen.Config{StallTimeout: 300 * time.Millisecond}, 40)
	if r.Answered != 20 || r.Lost != 20 || r.Published != 40 {
		t.Fatalf("report = %+v, want 20 answered and 20 lost", r)
	}
}

// A call answered twice is counted as doubled: from the stored replies as well as the read ones.
func TestDoubledReplies(t *testing.T) {
	t.Parallel()
	b := setup(t, func(i int) int {
		if i == 7 {
			return 3
		}
		return 1
	})
	r := drive(t, b, loadgen.Config{ReplyFilter: "t.reply.run1.*"}, 20)
	if r.Answered != 20 || r.Lost != 0 || r.Doubled != 2 {
		t.Fatalf("report = %+v, want 20 answered and 2 doubled", r)
	}
}

// A call JetStream refuses (no stream takes its subject) is a publish error, neither
// waited for nor lost.
func TestRefusedPublish(t *testing.T) {
	t.Parallel()
	b := setup(t, func(int) int { return 1 })
	stray := &nats.Msg{Subject: "nowhere.x", Header: nats.Header{nats.MsgIdHdr: []string{"stray"}}}
	r := drive(t, b, loadgen.Config{StallTimeout: 5 * time.Second}, 10, stray)
	if r.Answered != 10 || r.Lost != 0 || r.PublishErrors != 1 {
		t.Fatalf("report = %+v, want 10 answered and 1 publish error", r)
	}
}

func TestBadUse(t *testing.T) {
	t.Parallel()
	b := setup(t, func(int) int { return 1 })
	ctx := context.Background()
	if _, err := loadgen.Start(ctx, b.nc, loadgen.Config{}); err == nil {
		t.Error("no reply stream: no error")
	}
	if _, err := loadgen.Start(ctx, b.nc, loadgen.Config{ReplyStreams: []string{"MISSING"}}); err == nil {
		t.Error("a missing reply stream: no error")
	}
	g, err := loadgen.Start(ctx, b.nc, loadgen.Config{ReplyStreams: []string{"REPLIES"}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Stop()
	if err := g.Publish(ctx, &nats.Msg{Subject: "t.call.x"}); err == nil || !strings.Contains(err.Error(), "Nats-Msg-Id") {
		t.Errorf("a call without an id: %v", err)
	}
}
