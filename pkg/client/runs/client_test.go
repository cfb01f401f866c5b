package runs_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/pkg/client/runs"
)

// finishedRun starts a run on the examples' fleet, approves its write_file and returns
// it done.
func finishedRun(t *testing.T, c *runs.Client) *runs.Run {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := c.Start(ctx, runs.StartRequest{Input: "Total the orders.", Tools: demoTools})
	if err != nil {
		t.Fatal(err)
	}
	for ev, err := range c.Follow(ctx, run.ID, 0) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.What == "approval_needed" {
			if err := c.Approve(ctx, ev.Data.CallID, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	run, err = c.Get(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// The wire types read what the planner answers: a run's calls with their timeline.
func TestRunAsTheAPIAnswers(t *testing.T) {
	c, _ := runs.New(apiURL)
	run := finishedRun(t, c)
	if !run.Done() || run.Termination != runs.TerminationCompleted || run.Steps != 6 || run.CreatedAt.IsZero() || run.FinishedAt == nil {
		t.Fatalf("run %+v", run)
	}
	var names []string
	for _, call := range run.Calls {
		names = append(names, call.Name)
		if call.ID == "" || call.CalledAt.IsZero() || call.Status == "" {
			t.Errorf("call %+v", call)
		}
	}
	if want := []string{"get_time", "list_dir", "calculator", "calculator", "write_file", "read_file"}; !slices.Equal(names, want) {
		t.Errorf("calls %v, want %v", names, want)
	}
	if a := run.Calls[4].Approval; a == nil || a.Decision != "approve" {
		t.Errorf("write_file's approval record: %+v", a)
	}
	if run.Calls[2].Error == nil || run.Calls[2].Error.Code != "invalid_tool_input" {
		t.Errorf("the broken calculator call: %+v", run.Calls[2])
	}
}

// Following again from any event's Seq gives exactly the events after it; after the
// done event, nothing.
func TestFollowResumes(t *testing.T) {
	c, _ := runs.New(apiURL)
	run := finishedRun(t, c)
	ctx := context.Background()
	collect := func(after uint64) []runs.Event {
		var evs []runs.Event
		for ev, err := range c.Follow(ctx, run.ID, after) {
			if err != nil {
				t.Fatal(err)
			}
			evs = append(evs, ev)
		}
		return evs
	}
	all := collect(0)
	if len(all) < 10 || all[0].What != "started" || all[len(all)-1].What != "done" {
		t.Fatalf("events %v", all)
	}
	tail := collect(all[4].Seq)
	if len(tail) != len(all)-5 || tail[0].Seq != all[5].Seq {
		t.Errorf("resumed after %d: %d events from %d, want %d from %d", all[4].Seq, len(tail), tail[0].Seq, len(all)-5, all[5].Seq)
	}
	if rest := collect(all[len(all)-1].Seq); len(rest) != 0 {
		t.Errorf("after done: %v", rest)
	}
}

// The planner's refusals come back as *Error with its status and message.
func TestErrors(t *testing.T) {
	ctx := context.Background()
	c, _ := runs.New(apiURL)
	if _, err := c.Get(ctx, "no-such-run"); !runs.IsNotFound(err) {
		t.Errorf("an unknown run: %v, want a 404", err)
	}
	for ev, err := range c.Follow(ctx, "no-such-run", 0) {
		if !runs.IsNotFound(err) {
			t.Errorf("following an unknown run: %v %v", ev, err)
		}
	}
	var apiErr *runs.Error
	if err := c.Answer(ctx, "some-call", runs.Answer{Decision: "maybe"}); !errors.As(err, &apiErr) || apiErr.Status != 400 {
		t.Errorf("a bad decision: %v, want a 400", err)
	}
	if _, err := c.Start(ctx, runs.StartRequest{}); !errors.As(err, &apiErr) || apiErr.Status != 400 || apiErr.Message == "" {
		t.Errorf("a run without input: %v", err)
	}
	for _, bad := range []string{"localhost:8080", "ftp://x", "http://"} {
		if _, err := runs.New(bad); err == nil {
			t.Errorf("New(%q) took it", bad)
		}
	}
	tok, _ := runs.New(apiURL, runs.WithToken("whatever")) // open mode: a token is not asked for
	if _, err := tok.Get(ctx, "no-such-run"); !runs.IsNotFound(err) {
		t.Errorf("with a token in open mode: %v", err)
	}
}

// A run started to pause after every step is returned paused by Wait; its model's view
// is readable, a resume that stops the pausing lets it finish, and a second resume is
// a 409.
func TestPauseAndResume(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, _ := runs.New(apiURL)
	run, err := c.Start(ctx, runs.StartRequest{Input: "Total the orders.", Tools: demoTools,
		Pause: &runs.PauseOptions{AfterEveryStep: true}})
	if err != nil {
		t.Fatal(err)
	}
	run, err = c.Wait(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != runs.StatusPaused || run.Paused == nil || run.Paused.Reason != "after_step" || run.Paused.Step != 1 {
		t.Fatalf("the run is %s, paused %+v; want paused after its first step", run.Status, run.Paused)
	}
	msgs, err := c.ModelMessages(ctx, run.ID)
	if err != nil || len(msgs) != 3 {
		t.Fatalf("the model's view: %d messages (%v), want the input, the call and its result", len(msgs), err)
	}
	if run, err = c.Resume(ctx, run.ID, runs.ResumeRequest{Pause: &runs.PauseOptions{}}); err != nil || run.Status != runs.StatusRunning {
		t.Fatalf("resume: %+v, %v", run, err)
	}
	for ev, err := range c.Follow(ctx, run.ID, 0) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.What == "approval_needed" {
			if err := c.Approve(ctx, ev.Data.CallID, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	if run, err = c.Get(ctx, run.ID); err != nil || !run.Done() || run.Termination != runs.TerminationCompleted {
		t.Fatalf("the resumed run: %+v, %v", run, err)
	}
	var apiErr *runs.Error
	if _, err := c.Resume(ctx, run.ID, runs.ResumeRequest{}); !errors.As(err, &apiErr) || apiErr.Status != 409 {
		t.Fatalf("resuming a run that ended: %v, want a 409", err)
	}
}
