package planner

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/internal/testsupport/plannertest"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// eventTable is the vocabulary of run events, as doc.go and the README list it: the
// events of a run and whether each names a call.
var eventTable = map[string]bool{
	"started":           false,
	"step_started":      false,
	"text_delta":        false,
	"tool_call_started": true,
	"model_answered":    false,
	"tool_called":       true,
	"tool_started":      true,
	"tool_progress":     true,
	"tool_result":       true,
	"tool_error":        true,
	"approval_needed":   true,
	"approval_answered": true,
	"loop_detected":     true,
	"done":              false,
}

// checkEvent asserts what every run event carries: its run, its step, a call id where
// the table says so, and when it happened.
func checkEvent(t *testing.T, run string, e FollowedEvent) plannertest.EventData {
	t.Helper()
	d := plannertest.DecodeEventData(t, e.What, e.Data)
	if d.RunID != run || d.Step == nil || d.At.IsZero() {
		t.Fatalf("event %s lacks its run, step or time: %s", e.What, e.Data)
	}
	if eventTable[e.What] && d.CallID == "" {
		t.Fatalf("event %s lacks its call id: %s", e.What, e.Data)
	}
	return d
}

// followEvents reads the events of run, which has ended, to its done.
func followEvents(t *testing.T, p *Planner, run string) []FollowedEvent {
	t.Helper()
	r, err := p.Get(t.Context(), run)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	evs, err := p.FollowEvents(ctx, r, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []FollowedEvent
	for e, err := range evs {
		if err != nil {
			t.Fatalf("after %d events of run %s: %v", len(out), run, err)
		}
		out = append(out, e)
		if e.What == "done" {
			break
		}
	}
	return out
}

// A run that does a bit of everything shows every event of the table, each with its run,
// step, call id where it applies, and time.
func TestEventVocabulary(t *testing.T) {
	b := setup(t, map[string]string{"main": `
steps:
  - text: Let me try a few things.
    calls:
      - {name: delete_all, arguments: {where: staging}}
      - {name: add, arguments: {a: 1, b: 2}}
      - {name: fail}
      - {name: nope}
  - calls:
      - {name: echo, arguments: {text: again}}
      - {name: echo, arguments: {text: again}}
      - {name: echo, arguments: {text: again}}
  - text: all done
`})
	run, err := b.p.Start(b.ctx, StartRequest{Input: "go", Tools: []string{"delete_all", "add", "fail", "echo"}})
	if err != nil {
		t.Fatal(err)
	}
	c := b.awaitApproval(t, run.ID)
	// What an executor announces of a call it runs (pkg/executor does, on its own branch).
	for _, what := range []string{"tool_started", "tool_progress"} {
		msg, err := events.NewRunEvent("/executor", what, events.RunEvent{RunID: run.ID, Step: c.Step, CallID: c.ID, Tool: c.Name}, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.js.PublishMsg(b.ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.p.Approve(b.ctx, c.ID, events.Identity{}, events.ApprovalAnswer{Decision: events.DecisionApprove, By: "test"}); err != nil {
		t.Fatal(err)
	}
	done := b.wait(t, run.ID)
	if done.Termination != TerminationCompleted {
		t.Fatalf("run ended %s (%s)", done.Termination, done.Detail)
	}
	evs := followEvents(t, b.p, run.ID)
	seen := map[string]int{}
	errs := map[string]bool{}
	for _, e := range evs {
		d := checkEvent(t, run.ID, e)
		seen[e.What]++
		if e.What == "tool_error" {
			errs[d.CallID] = true
		}
	}
	for what := range eventTable {
		if seen[what] == 0 {
			t.Errorf("no %s event; saw %v", what, seen)
		}
	}
	// fail (from its executor), nope (unknown: the planner's answer) and the third echo
	// (a loop, answered with a warning): each has its tool_error.
	for _, id := range []string{callID(run.ID, 0, 2), callID(run.ID, 0, 3), callID(run.ID, 1, 2)} {
		if !errs[id] {
			t.Errorf("no tool_error for call %s; got %v", id, errs)
		}
	}
	if seen["step_started"] != 3 || seen["model_answered"] != 3 {
		t.Errorf("%d step_started and %d model_answered for 3 steps", seen["step_started"], seen["model_answered"])
	}
}

// Every call the planner answers itself has its tool_error event: five calls of an
// unknown tool show five.
func TestLocalAnswersAreAnnounced(t *testing.T) {
	b := setup(t, map[string]string{"main": `
steps:
  - calls: [{name: nope1}, {name: nope2}, {name: nope3}, {name: nope4}, {name: nope5}]
  - text: never
`})
	run := b.run(t, StartRequest{Input: "go"})
	if run.Termination != TerminationErrorThreshold {
		t.Fatalf("run ended %s (%s)", run.Termination, run.Detail)
	}
	evs := followEvents(t, b.p, run.ID)
	var ids, kinds []string
	for _, e := range evs {
		d := checkEvent(t, run.ID, e)
		kinds = append(kinds, e.What)
		if e.What == "tool_error" {
			ids = append(ids, d.CallID)
			if !strings.Contains(string(d.Detail), "no_such_tool") {
				t.Errorf("tool_error %s: %s", d.CallID, d.Detail)
			}
		}
	}
	slices.Sort(ids)
	want := []string{callID(run.ID, 0, 0), callID(run.ID, 0, 1), callID(run.ID, 0, 2), callID(run.ID, 0, 3), callID(run.ID, 0, 4)}
	if !slices.Equal(ids, want) {
		t.Fatalf("tool_error events for %v, want %v (events %v)", ids, want, kinds)
	}
}
