package planner

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// tickTool is a non-idempotent tool that counts its runs: a side effect a fork must not
// repeat. It answers {"n": its argument, "run": how many times it ran}.
type tickTool struct {
	mu   sync.Mutex
	seen []int
}

func (tt *tickTool) serve(t *testing.T, b *testBundle, name string, roles ...string) {
	t.Helper()
	startExecutor(t, b, tools.Definition{Type: "function", Name: name, Description: "Counts.", Safe: true, Roles: roles,
		Parameters: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)},
		func(_ context.Context, args json.RawMessage) (any, error) {
			var in struct{ N int }
			if err := json.Unmarshal(args, &in); err != nil {
				return nil, err
			}
			tt.mu.Lock()
			defer tt.mu.Unlock()
			tt.seen = append(tt.seen, in.N)
			return map[string]int{"n": in.N, "run": len(tt.seen)}, nil
		})
}

func (tt *tickTool) ran() []int {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	return slices.Clone(tt.seen)
}

func tickCall(id string, n int) provider.Message {
	return provider.Message{ToolCalls: []provider.ToolCall{callOf(id, "tick", fmt.Sprintf(`{"n":%d}`, n))}}
}

// A 4-step run forked at step 2 with an edited input: steps 0 and 1 are not run again
// (the tick counter does not move for them; the fork's model sees their recorded
// results), step 2 and on run anew, and the fork names its origin in its record, its
// list item and the origin's forks. The diff of the run and its fork shows exactly the
// changed argument and result of the step taken anew and the changed answer; a run
// compared with itself shows nothing.
func TestForkReusesEarlierStepsAndDiffShowsTheChanges(t *testing.T) {
	b := setup(t, map[string]string{"main": plannerAnswerScript})
	var tt tickTool
	tt.serve(t, b, "tick")
	model := &sequenceModel{answers: []provider.Message{
		tickCall("m0", 0), tickCall("m1", 1), tickCall("m2", 2), {Text: "done"},
		tickCall("f2", 20), {Text: "fork done"},
	}}
	b.swapPlanner(t, Config{Models: map[string]provider.Model{"main": model}, DefaultModel: "main"})
	run, err := b.p.Start(b.ctx, StartRequest{Input: "tick three times", Tools: []string{"tick"}})
	if err != nil {
		t.Fatal(err)
	}
	orig := waitRun(t, b, run.ID)
	if orig.Termination != TerminationCompleted || orig.StepsTaken() != 4 || !slices.Equal(tt.ran(), []int{0, 1, 2}) {
		t.Fatalf("the original ended %s after %d steps, tick ran %v; want completed after 4, ticks 0 1 2", orig.Termination, orig.StepsTaken(), tt.ran())
	}

	fork, err := b.p.Fork(b.ctx, orig.ID, ForkRequest{FromStep: 2, ResumeRequest: ResumeRequest{
		Replace: []MessageReplacement{{Index: 0, Message: provider.Message{Role: provider.RoleUser, Text: "tick, edited"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if fork.ForkedFrom == nil || *fork.ForkedFrom != (ForkPoint{Run: orig.ID, Step: 2}) || fork.ID == orig.ID {
		t.Fatalf("the fork's record names %+v as its origin; want %s step 2", fork.ForkedFrom, orig.ID)
	}
	done := waitRun(t, b, fork.ID)
	if done.Termination != TerminationCompleted || done.Answer != "fork done" {
		t.Fatalf("the fork ended %s with %q, want completed with the model's new answer", done.Termination, done.Answer)
	}
	if got := tt.ran(); !slices.Equal(got, []int{0, 1, 2, 20}) {
		t.Fatalf("tick ran for %v; want 0 1 2 for the original and only 20 for the fork (steps 0-1 reused)", got)
	}
	// The fork's first model call saw the edited input and the recorded results of steps 0-1.
	req := model.request(t, 4)
	if got, want := texts(req.Messages), []string{"user:tick, edited", "assistant:[call tick]", "tool:[result tick]",
		"assistant:[call tick]", "tool:[result tick]"}; !slices.Equal(got, want) {
		t.Fatalf("the fork's model saw %q, want %q", got, want)
	}
	for i, m := range []int{2, 4} {
		if got := string(req.Messages[m].ToolResults[0].Content); got != fmt.Sprintf(`{"n":%d,"run":%d}`, i, i+1) {
			t.Fatalf("the fork's model saw step %d's result %s, want the original's", i, got)
		}
	}
	if len(done.Calls) != 1 || string(done.Calls[0].Arguments) != `{"n":20}` {
		t.Fatalf("the fork's calls are %+v; want its own one call of tick", done.Calls)
	}
	if v := done.View(); v.ForkedFrom == nil || v.ForkedFrom.Run != orig.ID {
		t.Fatalf("GET of the fork shows forkedFrom %+v", v.ForkedFrom)
	}
	var page RunPage
	natstest.Eventually(t, waitTimeout, "the origin's forks to list the fork", func() bool {
		page, err = b.p.ListRuns(b.ctx, events.Identity{}, RunFilter{ForkedFrom: orig.ID})
		return err == nil && len(page.Runs) == 1
	})
	if page.Runs[0].ID != fork.ID || page.Runs[0].ForkedFrom == nil || page.Runs[0].ForkedFrom.Step != 2 {
		t.Fatalf("the forks of %s are %+v; want the fork, from step 2", orig.ID, page.Runs)
	}

	d, err := b.p.Diff(b.ctx, orig.ID, fork.ID, events.Identity{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Shared != 2 || d.A.From != 2 || d.B.From != 0 || len(d.Steps) != 2 {
		t.Fatalf("the diff aligns %d steps from %d/%d with %d shared; want 2 from the fork point 2, 2 shared", len(d.Steps), d.A.From, d.B.From, d.Shared)
	}
	s := d.Steps[0]
	if *s.A != 2 || *s.B != 0 || s.TextChanged || len(s.Calls) != 1 {
		t.Fatalf("aligned step 0 = %+v; want step 2 against the fork's step 0, one call, text unchanged", s)
	}
	c := s.Calls[0]
	if got := patchJSON(t, c.Arguments); got != `[{"value":20,"op":"replace","path":"/n"}]` {
		t.Fatalf("the argument diff is %s; want n replaced by 20", got)
	}
	if got := patchJSON(t, c.Result); got != `[{"value":20,"op":"replace","path":"/n"},{"value":4,"op":"replace","path":"/run"}]` {
		t.Fatalf("the result diff is %s; want n and run replaced", got)
	}
	if c.StatusChanged || c.ErrorChanged {
		t.Fatalf("the call's status or error changed: %+v", c)
	}
	if s := d.Steps[1]; !s.TextChanged || s.TextA != "done" || s.TextB != "fork done" || len(s.Calls) != 0 {
		t.Fatalf("aligned step 1 = %+v; want the answer changed from done to fork done", s)
	}
	if d.Totals.ChangedSteps != 2 || d.Totals.ChangedCalls != 1 || d.Totals.Steps != 2 {
		t.Fatalf("the totals are %+v", d.Totals)
	}

	self, err := b.p.Diff(b.ctx, orig.ID, orig.ID, events.Identity{})
	if err != nil {
		t.Fatal(err)
	}
	if !self.Empty() || len(self.Steps) != 4 || self.Totals.ChangedCalls != 0 || self.Totals.Tokens.Delta != 0 {
		t.Fatalf("a run compared with itself: %+v", self.Totals)
	}
	for _, s := range self.Steps {
		for _, c := range s.Calls {
			if len(c.Arguments) > 0 || len(c.Result) > 0 {
				t.Fatalf("a run compared with itself shows a difference: %+v", c)
			}
		}
	}
}

// patchJSON is a JSON Patch as its JSON text.
func patchJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A fork runs with the forker's identity and rights: a user's fork of an admin's run
// cannot call the admin's tool (its model's call of it is refused, the tool does not
// run), a model the forker may not use is refused, another tool set is the fork's,
// and another tenant cannot fork or compare the run at all. A fromStep that is not a
// step of the run is a 400.
func TestForkRightsToolsAndModels(t *testing.T) {
	b := setup(t, map[string]string{"main": plannerAnswerScript})
	var adminTool tickTool
	adminTool.serve(t, b, "tick", "admin")
	model := &sequenceModel{answers: []provider.Message{
		tickCall("a0", 0), {Text: "admin done"}, // the admin's run
		tickCall("u0", 1), {Text: "user done"}, // the user's fork from step 0
		{ToolCalls: []provider.ToolCall{callOf("e0", "echo", `{"text":"hi"}`)}}, {Text: "echo done"}, // the fork with echo
	}}
	b.swapPlanner(t, Config{Models: map[string]provider.Model{"main": model, "big": model}, DefaultModel: "main",
		ModelRoles: map[string][]string{"big": {"admin"}}})
	if _, err := New(b.ctx, b.srv.Connect(), Config{Models: map[string]provider.Model{"main": model}, Events: b.cfg,
		ModelRoles: map[string][]string{"nope": {"admin"}}}); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("ModelRoles naming a model that is not configured: %v", err)
	}
	admin := events.Identity{Tenant: "acme", Role: "admin"}
	user := events.Identity{Tenant: "acme", Role: "user"}
	other := events.Identity{Tenant: "globex", Role: "admin"}
	run, err := b.p.Start(b.ctx, StartRequest{Input: "tick", Caller: admin})
	if err != nil {
		t.Fatal(err)
	}
	orig := waitRun(t, b, run.ID)
	if orig.Calls[0].Status != string(events.StatusOK) || len(adminTool.ran()) != 1 {
		t.Fatalf("the admin's call of tick: %+v", orig.Calls[0])
	}

	for _, tc := range []struct {
		name   string
		req    ForkRequest
		status int
	}{
		{"a model the user may not use", ForkRequest{Model: "big", ResumeRequest: ResumeRequest{Caller: user}}, http.StatusForbidden},
		{"a tool the user may not call", ForkRequest{Tools: []string{"tick"}, ResumeRequest: ResumeRequest{Caller: user}}, http.StatusForbidden},
		{"another tenant", ForkRequest{ResumeRequest: ResumeRequest{Caller: other}}, http.StatusNotFound},
		{"a step past the run's", ForkRequest{FromStep: 3, ResumeRequest: ResumeRequest{Caller: admin}}, http.StatusBadRequest},
		{"a negative step", ForkRequest{FromStep: -1, ResumeRequest: ResumeRequest{Caller: admin}}, http.StatusBadRequest},
	} {
		if _, err := b.p.Fork(b.ctx, orig.ID, tc.req); !isAPIStatus(err, tc.status) {
			t.Errorf("fork with %s: %v, want %d", tc.name, err, tc.status)
		}
	}
	if _, err := b.p.Diff(b.ctx, orig.ID, orig.ID, other); !isAPIStatus(err, http.StatusNotFound) {
		t.Errorf("another tenant's diff: %v, want 404", err)
	}

	// The user's fork from step 0: its model calls tick again, which the user may not.
	fork, err := b.p.Fork(b.ctx, orig.ID, ForkRequest{ResumeRequest: ResumeRequest{Caller: user}})
	if err != nil {
		t.Fatal(err)
	}
	done := waitRun(t, b, fork.ID)
	if done.Tenant != "acme" || done.Role != "user" {
		t.Fatalf("the fork runs as %s/%s, want the forker acme/user", done.Tenant, done.Role)
	}
	if len(done.Calls) != 1 || done.Calls[0].Error == nil || done.Calls[0].Error.Code != tools.CodeNotAllowed {
		t.Fatalf("the user's fork's call of the admin's tool: %+v; want it refused not_allowed", done.Calls)
	}
	if got := adminTool.ran(); len(got) != 1 {
		t.Fatalf("the admin's tool ran %d times; want once, for the admin only", len(got))
	}
	if _, err := b.p.Diff(b.ctx, orig.ID, fork.ID, user); err != nil {
		t.Fatalf("the user compares the run and its fork: %v", err)
	}

	// Another tool set: the fork's model is offered echo only, and calls it.
	echoFork, err := b.p.Fork(b.ctx, orig.ID, ForkRequest{Tools: []string{"echo"}, ResumeRequest: ResumeRequest{Caller: admin}})
	if err != nil {
		t.Fatal(err)
	}
	done = waitRun(t, b, echoFork.ID)
	if !slices.Equal(done.Tools, []string{"echo"}) || len(done.Calls) != 1 || done.Calls[0].Status != string(events.StatusOK) {
		t.Fatalf("the echo fork: tools %v, calls %+v", done.Tools, done.Calls)
	}
	var names []string
	for _, d := range model.request(t, 4).Tools {
		names = append(names, d.Name)
	}
	if !slices.Equal(names, []string{"echo"}) {
		t.Fatalf("the echo fork's model was offered %v", names)
	}
	if !strings.Contains(done.Answer, "echo done") {
		t.Fatalf("the echo fork answered %q", done.Answer)
	}
}

// A running run may be forked from a step it has finished, not from the step after
// one whose calls are still under way (409).
func TestForkARunningRun(t *testing.T) {
	b := setup(t, map[string]string{"main": plannerAnswerScript})
	gate := startGate(t, b)
	model := &sequenceModel{answers: []provider.Message{
		{ToolCalls: []provider.ToolCall{callOf("g0", "gate", `{}`)}}, // the run's step 0
		{Text: "done"}, {Text: "done"}, // the fork's step 0 and the run's step 1, in either order
	}}
	b.swapPlanner(t, Config{Models: map[string]provider.Model{"main": model}, DefaultModel: "main"})
	run, err := b.p.Start(b.ctx, StartRequest{Input: "wait at the gate", Tools: []string{"gate"}})
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, waitTimeout, "the gate call to be under way", func() bool {
		r, err := b.p.Get(b.ctx, run.ID)
		return err == nil && len(r.Calls) == 1 && r.Recorded == 1
	})
	if _, err := b.p.Fork(b.ctx, run.ID, ForkRequest{FromStep: 1}); !isAPIStatus(err, http.StatusConflict) {
		t.Fatalf("a fork from the step after the one under way: %v, want 409", err)
	}
	fork, err := b.p.Fork(b.ctx, run.ID, ForkRequest{FromStep: 0})
	if err != nil {
		t.Fatalf("a fork of a running run from its step 0: %v", err)
	}
	done := waitRun(t, b, fork.ID)
	close(gate)
	if done.Termination != TerminationCompleted || len(done.Calls) != 0 {
		t.Fatalf("the fork from step 0 ended %s with calls %+v; want completed with the model's answer", done.Termination, done.Calls)
	}
	if done := waitRun(t, b, run.ID); done.Termination != TerminationCompleted || done.Calls[0].Status != string(events.StatusOK) {
		t.Fatalf("the run ended %s, its call %+v", done.Termination, done.Calls[0])
	}
}
