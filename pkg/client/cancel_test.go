package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/client"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Cancel stops a running call: the tool sees its context end and the caller's Call
// returns the canceled result.
func TestCancelARunningCall(t *testing.T) {
	t.Parallel()
	started := make(chan struct{}, 1)
	f, ctx := serveTool(t, "wait", func(ctx context.Context, _ json.RawMessage) (any, error) {
		started <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	}, 30*time.Second)

	c, err := client.New(f.NC)
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		res events.Result
		err error
	}
	answered := make(chan answer, 1)
	go func() {
		r, err := c.Call(ctx, client.Request{Tool: "wait", ID: "w1"})
		answered <- answer{r, err}
	}()
	<-started
	if err := c.Cancel(ctx, "wait", "w1"); err != nil {
		t.Fatal(err)
	}
	a := <-answered
	if a.res.Status != events.StatusCanceled || !errors.Is(a.err, tools.ErrCanceled) {
		t.Fatalf("result %+v, %v; want canceled", a.res, a.err)
	}
	if err := c.Cancel(ctx, "wait", "w1"); err != nil {
		t.Errorf("a second cancel: %v", err)
	}
	if err := c.Cancel(ctx, "a.b", "w1"); !errors.Is(err, tools.ErrInvalidEvent) {
		t.Errorf("cancel of a bad tool name: %v", err)
	}
}

// CancelAndWait returns what a cancel came to: the canceled result of a call it stopped,
// the result a call had finished with, and for another role's cancel, which the
// executor refuses, the call's normal result.
func TestCancelAndWait(t *testing.T) {
	t.Parallel()
	started := make(chan string, 4)
	release := make(chan struct{})
	f, ctx := serveTool(t, "wait", func(ctx context.Context, _ json.RawMessage) (any, error) {
		info, _ := tools.CallInfoFrom(ctx)
		started <- info.CallID
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-release:
			return "done", nil
		}
	}, 30*time.Second)
	admin, err := client.New(f.NC, client.WithIdentity(events.Identity{Tenant: "acme", Role: "admin"}))
	if err != nil {
		t.Fatal(err)
	}
	user, err := client.New(f.NC, client.WithIdentity(events.Identity{Tenant: "acme", Role: "user"}))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"w1", "w2"} {
		if _, err := admin.Submit(ctx, client.Request{Tool: "wait", ID: id, RunID: "r"}, time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	<-started
	<-started
	res, err := admin.CancelAndWait(ctx, "wait", "r", "w1")
	if err != nil || res.Status != events.StatusCanceled || res.Error == nil || !strings.Contains(res.Error.Message, "canceled by acme/admin") {
		t.Fatalf("the owner's cancel: %+v, %v; want canceled by acme/admin", res.Error, err)
	}
	// Another role's cancel is refused: the call goes on, and its result is the outcome.
	outcome := make(chan events.Result, 1)
	go func() {
		res, err := user.CancelAndWait(ctx, "wait", "r", "w2")
		if err != nil {
			t.Error(err)
		}
		outcome <- res
	}()
	natstest.Eventually(t, 10*time.Second, "the refusal recorded", func() bool {
		m, err := jsutil.DirectGetLast(ctx, f.NC, events.StreamEvents, "toolfleet.event.run.r."+events.RunActRefused+".acme")
		return err == nil && m != nil
	})
	close(release)
	if res := <-outcome; res.Status != events.StatusOK {
		t.Fatalf("another role's cancel: %+v; want the call's ok result", res)
	}
	// A call that has its result is answered with it.
	if res, err := admin.CancelAndWait(ctx, "wait", "r", "w1"); err != nil || res.Status != events.StatusCanceled {
		t.Fatalf("a cancel of a canceled call: %+v, %v", res, err)
	}
}

// FollowRun shows the executors' events of a run's calls: tool_started, then the tool's
// progress reports.
func TestFollowProgress(t *testing.T) {
	t.Parallel()
	f, ctx := serveTool(t, "steps", func(ctx context.Context, _ json.RawMessage) (any, error) {
		tools.ReportProgress(ctx, tools.Progress{Message: "half way", Fraction: 0.5})
		return "done", nil
	}, 30*time.Second)
	c, err := client.New(f.NC)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Call(ctx, client.Request{Tool: "steps", ID: "s1", RunID: "run-f"}); err != nil {
		t.Fatal(err)
	}
	w, err := c.FollowRun(ctx, "run-f")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var words []string
	for len(words) < 2 {
		e, r, err := w.Next()
		if err != nil {
			t.Fatal(err)
		}
		words = append(words, e.Type)
		if e.Type == events.RunType("tool_progress") {
			var p tools.Progress
			if err := json.Unmarshal(r.Detail, &p); err != nil || p.Message != "half way" || p.Fraction != 0.5 || r.CallID != "s1" {
				t.Errorf("progress %+v (%s), %v", r, r.Detail, err)
			}
		}
	}
	if words[0] != events.RunType("tool_started") || words[1] != events.RunType("tool_progress") {
		t.Errorf("run events %v, want tool_started then tool_progress", words)
	}
}
