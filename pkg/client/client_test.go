package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/client"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// setup starts a server with the fleet's streams and no executor: what is answered is
// answered by the test.
func setup(t *testing.T) (*client.Client, jetstream.JetStream) {
	t.Helper()
	srv := natstest.Start(t)
	nc := srv.Connect()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := jsutil.Ensure(context.Background(), js, events.Config{Storage: "memory"}); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(nc, client.WithSource("/test"))
	if err != nil {
		t.Fatal(err)
	}
	return c, js
}

// A call nobody answers ends with its context; the deadline travelled with the call.
func TestCallHonoursContext(t *testing.T) {
	t.Parallel()
	c, js := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := c.Call(ctx, client.Request{Tool: "nobody", ID: "c1"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want the context's deadline", err)
	}
	s, _ := js.Stream(context.Background(), events.StreamCalls)
	raw, err := s.GetLastMsgForSubject(context.Background(), "toolfleet.call.nobody")
	if err != nil {
		t.Fatal(err)
	}
	ce, err := events.DecodeCall(events.StoredMsg(raw), 0)
	if err != nil || ce.ID != "c1" || ce.Deadline.IsZero() || ce.Source != "/test" {
		t.Errorf("stored call %+v, %v; want id c1 with a deadline", ce, err)
	}
}

// The trace context of the caller's span travels with its call, with no tracer in the
// client.
func TestCallCarriesTheCallersTrace(t *testing.T) {
	t.Parallel()
	c, js := setup(t)
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ctx, cancel := context.WithTimeout(events.ContextWithTrace(context.Background(), parent, "vendor=opaque"), 300*time.Millisecond)
	defer cancel()
	if _, err := c.Call(ctx, client.Request{Tool: "nobody", ID: "traced"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want the context's deadline", err)
	}
	s, _ := js.Stream(context.Background(), events.StreamCalls)
	raw, err := s.GetLastMsgForSubject(context.Background(), "toolfleet.call.nobody")
	if err != nil {
		t.Fatal(err)
	}
	ce, err := events.DecodeCall(events.StoredMsg(raw), 0)
	if err != nil || ce.TraceParent != parent || ce.TraceState != "vendor=opaque" {
		t.Errorf("stored call carries %q, %q (%v); want the caller's trace context", ce.TraceParent, ce.TraceState, err)
	}
}

// A result stored before the call is made (the id was answered already) is found, any
// id works, and a status other than ok surfaces the result's *tools.Error.
func TestCallFindsStoredResultAndItsError(t *testing.T) {
	t.Parallel()
	c, js := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	id := "urn:uuid:6e8bc430-9c3a-11d9-9669-0800200c9a66"
	res := events.Result{Status: events.StatusDenied, Tool: "rm", CallID: id, RunID: id,
		Error: tools.Errorf(tools.CodeDenied, "not today")}
	m, err := events.NewResult("/test", res, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	got, err := c.Call(ctx, client.Request{Tool: "rm", ID: id, Arguments: json.RawMessage(`{}`)})
	if !errors.Is(err, tools.ErrDenied) || got.Status != events.StatusDenied || got.CallID != id {
		t.Fatalf("got %+v, %v; want the stored denial", got, err)
	}
}

// Requests the contract refuses never leave the client.
func TestRefusedRequests(t *testing.T) {
	t.Parallel()
	c, _ := setup(t)
	ctx := context.Background()
	if _, err := c.Call(ctx, client.Request{Tool: "a.b"}); !errors.Is(err, tools.ErrInvalidEvent) {
		t.Errorf("bad tool name: %v", err)
	}
	if err := c.Answer(ctx, "rm", "c1", events.ApprovalAnswer{Decision: "maybe"}); !errors.Is(err, tools.ErrInvalidEvent) {
		t.Errorf("bad decision: %v", err)
	}
	if _, err := c.FollowRun(ctx, ""); !errors.Is(err, tools.ErrInvalidEvent) {
		t.Errorf("empty run id: %v", err)
	}
	if _, err := client.New(nil, client.WithSource("")); !errors.Is(err, client.ErrInvalidOption) {
		t.Errorf("empty source: %v", err)
	}
}

// A watch ends with its context, and Stop ends it at once.
func TestWatchEnds(t *testing.T) {
	t.Parallel()
	c, _ := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	w, err := c.WatchApprovals(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, _, err := w.Next(); !errors.Is(err, context.Canceled) {
		t.Errorf("after cancel: %v", err)
	}
	w2, err := c.FollowRun(context.Background(), "r1")
	if err != nil {
		t.Fatal(err)
	}
	w2.Stop()
	if _, _, err := w2.Next(); !errors.Is(err, client.ErrStopped) {
		t.Errorf("after Stop: %v", err)
	}
}

// NewContext's look-up of the results shards ends with its context: a server that
// takes the request and never answers does not hold a client being made for a call
// whose caller has given up (New waits up to 5 seconds for it).
func TestNewContextEndsWithItsContext(t *testing.T) {
	srv := natstest.StartWith(t, func(o *server.Options) { o.JetStream = false })
	nc := srv.Connect()
	asked := make(chan struct{}, 1)
	sub, err := nc.Subscribe("$JS.API.STREAM.NAMES", func(*nats.Msg) { asked <- struct{}{} }) // never answers
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := client.NewContext(ctx, srv.Connect())
		done <- err
	}()
	natstest.Await(t, asked, "the shards look-up")
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("NewContext: %v", err)
		}
	case <-time.After(4 * time.Second): // New's own limit is 5s
		t.Fatal("NewContext still waits for the server after its context ended")
	}
}
