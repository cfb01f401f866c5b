package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/internal/planner"
	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/client"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/executor"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Against a real planner and executor: a run started in the planner is followed over
// NATS to its end, and the approval its unsafe call waits for is seen and answered over
// NATS, with the client alone.
func TestFollowARealRunAndAnswerItsApproval(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv := natstest.Start(t)
	js, err := jetstream.New(srv.Connect())
	if err != nil {
		t.Fatal(err)
	}
	cfg := events.Config{AckWait: tools.Duration(5 * time.Second)}
	if err := jsutil.Ensure(ctx, js, cfg); err != nil {
		t.Fatal(err)
	}
	reg := tools.NewRegistry()
	err = reg.AddFunc(tools.Definition{Type: "function", Name: "delete_all", Description: "Deletes everything.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"where":{"type":"string"}},"required":["where"]}`)},
		func(_ context.Context, args json.RawMessage) (any, error) {
			return map[string]any{"deleted": args}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	ex, err := executor.New(srv.Connect(), reg, executor.WithStreamConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	exDone, plDone := make(chan error, 1), make(chan error, 1)
	go func() { exDone <- ex.Run(runCtx) }()
	script, err := provider.ParseScript([]byte("steps:\n  - calls: [{name: delete_all, arguments: {where: staging}}]\n  - text: deleted\n"))
	if err != nil {
		t.Fatal(err)
	}
	model, err := provider.NewScripted(script)
	if err != nil {
		t.Fatal(err)
	}
	p, err := planner.New(ctx, srv.Connect(), planner.Config{Models: map[string]provider.Model{"main": model},
		DefaultModel: "main", Events: cfg, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	go func() { plDone <- p.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-exDone; <-plDone })

	c, err := client.New(srv.Connect())
	if err != nil {
		t.Fatal(err)
	}
	approvals, err := c.WatchApprovals(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer approvals.Stop()
	var run *planner.Run
	// The planner sees delete_all once the executor lists it.
	natstest.EventuallyNil(t, 30*time.Second, "the planner to start a run with delete_all", func() error {
		run, err = p.Start(ctx, planner.StartRequest{Input: "clean up", Tools: []string{"delete_all"}})
		return err
	})
	e, req, err := approvals.Next()
	if err != nil {
		t.Fatal(err)
	}
	if req.Tool != "delete_all" || req.RunID != run.ID || e.RunID != run.ID || string(req.Arguments) != `{"where":"staging"}` {
		t.Fatalf("approval request %+v", req)
	}
	if err := c.Answer(ctx, req.Tool, req.CallID, events.ApprovalAnswer{Decision: events.DecisionApprove, By: "test"}); err != nil {
		t.Fatal(err)
	}
	// The first answer wins, over NATS and through the planner alike.
	if err := c.Answer(ctx, req.Tool, req.CallID, events.ApprovalAnswer{Decision: events.DecisionDeny}); !errors.Is(err, client.ErrAnswered) {
		t.Fatalf("second answer: %v, want ErrAnswered", err)
	}
	var apiErr *planner.APIError
	if err := p.Approve(ctx, req.CallID, events.Identity{}, events.ApprovalAnswer{Decision: events.DecisionDeny}); !errors.As(err, &apiErr) || apiErr.Status != 409 {
		t.Fatalf("answer through the planner after one over NATS: %v, want 409", err)
	}
	follow, err := c.FollowRun(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer follow.Stop()
	var seen []string
	for {
		e, r, err := follow.Next()
		if err != nil {
			t.Fatalf("after %v: %v", seen, err)
		}
		if r.RunID != run.ID {
			t.Errorf("event %s of run %q", e.Type, r.RunID)
		}
		seen = append(seen, e.Type)
		if e.Type == events.RunType("done") {
			break
		}
	}
	for _, want := range []string{"tool_called", "done"} {
		found := false
		for _, s := range seen {
			found = found || s == events.RunType(want)
		}
		if !found {
			t.Errorf("events %v lack %s", seen, want)
		}
	}
	if got, err := p.Get(ctx, run.ID); err != nil || got.Answer != "deleted" {
		t.Errorf("run %+v, %v; want answer deleted", got, err)
	} else if a := got.Calls[0].Approval; a == nil || a.Decision != events.DecisionApprove || a.By != "anonymous" || a.ClaimedBy != "test" {
		t.Errorf("call record approval %+v, want the answer given over NATS", a)
	}

	// A run whose call waits for an approval is canceled over NATS: it ends canceled, and
	// its parked call is answered canceled without running. A second cancel finds it ended.
	parked, err := p.Start(ctx, planner.StartRequest{Input: "clean up again", Tools: []string{"delete_all"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, req, err = approvals.Next(); err != nil || req.RunID != parked.ID {
		t.Fatalf("approval request %+v, %v", req, err)
	}
	reply, err := c.CancelRun(ctx, parked.ID, "not today")
	if err != nil || reply.Status != 200 {
		t.Fatalf("cancel: %+v, %v", reply, err)
	}
	if _, err := c.CancelRun(ctx, parked.ID, "again"); !errors.Is(err, client.ErrRunEnded) {
		t.Fatalf("second cancel: %v, want ErrRunEnded", err)
	}
	if _, err := c.CancelRun(ctx, "rnosuchrun", ""); !errors.Is(err, client.ErrRunNotFound) {
		t.Fatalf("cancel of an unknown run: %v, want ErrRunNotFound", err)
	}
	natstest.EventuallyNil(t, 30*time.Second, "the canceled run's parked call to be canceled", func() error {
		got, err := p.Get(ctx, parked.ID)
		if err == nil && (got.Termination != planner.TerminationCanceled || len(got.Calls) != 1 || got.Calls[0].Status != string(events.StatusCanceled)) {
			err = fmt.Errorf("the run is %+v", got)
		}
		return err
	})
}
