package runs_test

import (
	"context"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/pkg/client/runs"
)

// A run forked from step 1 names its origin and is listed among its forks; the diff of
// the two starts at the fork point; the origin's events read as pages end with done.
func TestForkDiffAndEvents(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, _ := runs.New(apiURL)
	run := finishedRun(t, c)
	fork, err := c.Fork(ctx, run.ID, runs.ForkRequest{FromStep: 1, ResumeRequest: runs.ResumeRequest{Input: "once more"}})
	if err != nil {
		t.Fatal(err)
	}
	if fork.ForkedFrom == nil || fork.ForkedFrom.Run != run.ID || fork.ForkedFrom.Step != 1 {
		t.Fatalf("the fork names %+v as its origin", fork.ForkedFrom)
	}
	for ev, err := range c.Follow(ctx, fork.ID, 0) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.What == "approval_needed" {
			if err := c.Approve(ctx, ev.Data.CallID, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	d, err := c.Diff(ctx, run.ID, fork.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d.Shared != 1 || d.A.From != 1 || len(d.Steps) == 0 || *d.Steps[0].A != 1 || *d.Steps[0].B != 0 {
		t.Fatalf("the diff: shared %d, from %d, %d steps", d.Shared, d.A.From, len(d.Steps))
	}
	msgs, err := c.MessagesAt(ctx, run.ID, 1)
	if err != nil || len(msgs) < 3 {
		t.Fatalf("the model's view at step 1: %d messages, %v", len(msgs), err)
	}
	var whats []string
	for cursor := ""; ; {
		page, err := c.Events(ctx, run.ID, cursor, 4)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Events {
			whats = append(whats, e.What)
		}
		if cursor = page.Next; cursor == "" {
			break
		}
	}
	if len(whats) < 5 || whats[0] != "started" || whats[len(whats)-1] != "done" {
		t.Fatalf("the run's events: %v", whats)
	}
}
