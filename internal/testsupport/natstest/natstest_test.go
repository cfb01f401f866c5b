package natstest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/pkg/events"
)

// A message stored before a restart is still there after it: the store dir survives.
func TestRestartKeepsStoredMessages(t *testing.T) {
	s := Start(t)
	nc := s.Connect()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "t.a", []byte("kept")); err != nil {
		t.Fatal(err)
	}
	url := s.URL()
	s.Restart()
	if s.URL() != url {
		t.Fatalf("restart moved the server from %s to %s", url, s.URL())
	}
	stream, err := js.Stream(ctx, "T")
	if err != nil {
		t.Fatalf("stream after restart: %v", err)
	}
	msg, err := stream.GetLastMsgForSubject(ctx, "t.a")
	if err != nil {
		t.Fatalf("after restart: %v", err)
	}
	if string(msg.Data) != "kept" {
		t.Fatalf("after restart got %q, want %q", msg.Data, "kept")
	}
}

// StartJetStream leaves the fleet's streams in place, ensured with the given configuration.
func TestStartJetStreamEnsures(t *testing.T) {
	f := StartJetStream(t, events.Config{MaxDeliver: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := f.JS.Stream(ctx, events.StreamCalls); err != nil {
		t.Fatalf("calls stream: %v", err)
	}
	if f.Cfg.MaxDeliver != 3 || !f.NC.IsConnected() {
		t.Errorf("fixture %+v, connected %v", f.Cfg, f.NC.IsConnected())
	}
	n := 0
	Eventually(t, time.Second, "the third poll", func() bool { n++; return n == 3 })
}

// Arrivals answers a key asked for before its message and one asked for after, and
// not one that never came.
func TestArrivalsBeforeAndAfter(t *testing.T) {
	nc := Start(t).Connect()
	a := Listen(t, nc, "done.*", func(s string) string { return s[len("done."):] })
	early := a.Of("early")
	// late goes first: once early has arrived, so has late (one subscription delivers in
	// order), and late is asked for after its arrival.
	for _, k := range []string{"late", "early"} {
		if err := nc.Publish("done."+k, nil); err != nil {
			t.Fatal(err)
		}
	}
	arrived := func(what string, ch <-chan struct{}) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("a key %s its message never arrived", what)
		}
	}
	arrived("asked before", early)
	arrived("asked after", a.Of("late"))
	select {
	case <-a.Of("never"):
		t.Fatal("a key without a message arrived")
	default:
	}
}

// A wait that times out says what it saw instead.
func TestEventuallyNilSaysWhy(t *testing.T) {
	ft := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		EventuallyNil(ft, 30*time.Millisecond, "the answer", func() error { return errors.New("the answer is 41") })
	}()
	<-done
	if want := "timed out after 30ms waiting for the answer: the answer is 41"; ft.msg != want {
		t.Errorf("the test failed with %q, want %q", ft.msg, want)
	}
}

// fatalRecorder keeps the message of a Fatalf and ends its goroutine, as testing does.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper() {}

func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
