package planner

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/internal/testsupport/plannertest"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// sequenceModel answers with its messages in order, one per model call, whatever it is
// asked, and keeps every request: what a test asserts the model saw. One instance
// serves the planners before and after a restart, as one provider would.
type sequenceModel struct {
	mu       sync.Mutex
	answers  []provider.Message
	requests []provider.Request
}

func (m *sequenceModel) Name() string { return "test/sequence" }

func (m *sequenceModel) Generate(_ context.Context, req provider.Request) (*provider.Response, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := len(m.requests)
	m.requests = append(m.requests, req)
	if n >= len(m.answers) {
		return &provider.Response{Message: provider.Message{Role: provider.RoleAssistant, Text: "out of answers"}, StopReason: provider.StopEnd}, nil
	}
	msg := m.answers[n]
	msg.Role = provider.RoleAssistant
	stop := provider.StopEnd
	if len(msg.ToolCalls) > 0 {
		stop = provider.StopToolCalls
	}
	return &provider.Response{Message: msg, StopReason: stop, Usage: provider.Usage{InputTokens: 10, OutputTokens: 5}}, nil
}

func (m *sequenceModel) Stream(ctx context.Context, req provider.Request, _ func(provider.Delta)) (*provider.Response, error) {
	return m.Generate(ctx, req)
}

// request returns the model's n-th request (0-based).
func (m *sequenceModel) request(t *testing.T, n int) provider.Request {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if n >= len(m.requests) {
		t.Fatalf("the model was asked %d times, not %d", len(m.requests), n+1)
	}
	return m.requests[n]
}

func (m *sequenceModel) calls() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.requests)
}

func callOf(id, name, args string) provider.ToolCall {
	return provider.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(args)}
}

// texts returns each message as role:text, or role:[calls]/[results] for a message
// without text: a readable picture of a conversation.
func texts(msgs []provider.Message) []string {
	var out []string
	for _, m := range msgs {
		s := string(m.Role) + ":" + m.Text
		for _, c := range m.ToolCalls {
			s += "[call " + c.Name + "]"
		}
		for _, r := range m.ToolResults {
			s += "[result " + r.Name + "]"
		}
		out = append(out, s)
	}
	return out
}

// awaitStatus waits until the run id has status s, and returns it.
func awaitStatus(t *testing.T, p *Planner, id string, s Status) *Run {
	t.Helper()
	var run *Run
	natstest.Eventually(t, waitTimeout, "run "+id+" to be "+string(s), func() bool {
		r, err := p.Get(t.Context(), id)
		if err == nil {
			run = r
		}
		return err == nil && r.Status == s
	})
	return run
}

// A run that pauses after every step waits, paused, across a planner restart; resumed
// with an edit and a message, the model sees the edited conversation; paused again
// and resumed with a compaction, the model sees the summary in place of the range,
// while the run's own record of the conversation keeps the original throughout.
func TestPauseEditCompactResumeAcrossRestart(t *testing.T) {
	b := setup(t, map[string]string{"main": plannerAnswerScript})
	model := &sequenceModel{answers: []provider.Message{
		{ToolCalls: []provider.ToolCall{callOf("c1", "add", `{"a":2,"b":3}`)}},
		{ToolCalls: []provider.ToolCall{callOf("c2", "echo", `{"text":"five"}`)}},
		{Text: "all done"},
	}}
	stopFirst := b.restartPlanner(t, model, nil)
	run, err := b.p.Start(b.ctx, StartRequest{Input: "add 2 and 3, then say it", Tools: []string{"add", "echo"},
		Pause: &PauseOptions{AfterEveryStep: true}, Metadata: map[string]string{"who": "alice"}})
	if err != nil {
		t.Fatal(err)
	}
	paused := waitRun(t, b, run.ID)
	if paused.Status != StatusPaused || paused.Paused == nil || paused.Paused.Reason != "after_step" || paused.Paused.Step != 1 {
		t.Fatalf("after its first step the run is %s, paused %+v; want paused after_step at step 1", paused.Status, paused.Paused)
	}
	if model.calls() != 1 {
		t.Fatalf("the model was asked %d times before the pause, want 1", model.calls())
	}

	// A new planner on the same JetStream, the first one stopped, finds the run paused.
	b.restartPlanner(t, model, stopFirst)
	got, err := b.p.Get(b.ctx, run.ID)
	if err != nil || got.Status != StatusPaused {
		t.Fatalf("after the restart the run is %+v (%v), want paused", got, err)
	}
	view, err := b.p.ModelConversation(b.ctx, run.ID, events.Identity{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"user:add 2 and 3, then say it", "assistant:[call add]", "tool:[result add]"}; !slices.Equal(texts(view), want) {
		t.Fatalf("the model's view of the paused run is %q, want %q", texts(view), want)
	}

	// An edit that would leave a result without its call is refused, and changes nothing.
	if _, err := b.p.Resume(b.ctx, run.ID, ResumeRequest{Drop: []int{1}}); !isAPIStatus(err, http.StatusBadRequest) {
		t.Fatalf("dropping the call but not its result: %v, want 400", err)
	}
	resumed, err := b.p.Resume(b.ctx, run.ID, ResumeRequest{
		Replace: []MessageReplacement{{Index: 0, Message: provider.Message{Role: provider.RoleUser, Text: "add 2 and 3, then echo it"}}},
		Input:   "go on",
	})
	if err != nil {
		t.Fatal(err)
	}
	if resumed.Status != StatusRunning {
		t.Fatalf("resumed run is %s", resumed.Status)
	}
	paused = awaitStatus(t, b.p, run.ID, StatusPaused)
	if paused.Paused.Step != 2 {
		t.Fatalf("the second pause is at step %d, want 2", paused.Paused.Step)
	}
	if got, want := texts(model.request(t, 1).Messages), []string{"user:add 2 and 3, then echo it", "assistant:[call add]", "tool:[result add]", "user:go on"}; !slices.Equal(got, want) {
		t.Fatalf("after the resume the model saw %q, want %q", got, want)
	}

	// Compact everything before the echo into a summary, stop pausing, allow more steps.
	if _, err := b.p.Resume(b.ctx, run.ID, ResumeRequest{
		Compact: &Compaction{From: 0, To: 4, Summary: "2 + 3 is 5; echo it"},
		Pause:   &PauseOptions{}, Limits: &Limits{MaxSteps: 6},
	}); err != nil {
		t.Fatal(err)
	}
	done := waitRun(t, b, run.ID)
	if done.Status != StatusDone || done.Termination != TerminationCompleted || done.Answer != "all done" {
		t.Fatalf("the run ended %s/%s with %q, want completed with the model's answer", done.Status, done.Termination, done.Answer)
	}
	if got, want := texts(model.request(t, 2).Messages), []string{"user:2 + 3 is 5; echo it", "assistant:[call echo]", "tool:[result echo]"}; !slices.Equal(got, want) {
		t.Fatalf("after the compaction the model saw %q, want %q", got, want)
	}
	if done.Limits.MaxSteps != 6 || done.PauseOn != nil {
		t.Fatalf("the resume's limits and pause options were not kept: %+v, %+v", done.Limits, done.PauseOn)
	}
	// The audit: the run's record keeps the original messages, the follow-up included.
	wantAudit := []string{"user:add 2 and 3, then say it", "assistant:[call add]", "tool:[result add]", "user:go on",
		"assistant:[call echo]", "tool:[result echo]", "assistant:all done"}
	if got := texts(done.Messages); !slices.Equal(got, wantAudit) {
		t.Fatalf("the run's messages are %q, want the original %q", got, wantAudit)
	}
	var whats []string
	for _, e := range followEvents(t, b.p, run.ID) {
		if e.What == "paused" || e.What == "resumed" {
			whats = append(whats, e.What)
		}
	}
	if want := []string{"paused", "resumed", "paused", "resumed"}; !slices.Equal(whats, want) {
		t.Fatalf("the run's pause events are %v, want %v", whats, want)
	}
}

// restartPlanner stops the bundle's planner (stop, or the bundle's own when nil) and
// serves runs with a new one on the same JetStream whose model is model; it returns
// the function that stops the new one.
func (b *testBundle) restartPlanner(t *testing.T, model provider.Model, stop func()) func() {
	t.Helper()
	if stop == nil {
		stop = b.stopPlanner
	}
	stop()
	p, err := New(b.ctx, b.srv.Connect(), Config{Models: map[string]provider.Model{"main": model}, DefaultModel: "main",
		Events: b.cfg, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	b.p = p
	return plannertest.ServeStoppable(t, p.Run)
}

// plannerAnswerScript answers at once: the bundle's default model, replaced by the tests.
const plannerAnswerScript = `
steps:
  - text: hello
`

// waitRun waits until the run id ends or pauses.
func waitRun(t *testing.T, b *testBundle, id string) *Run {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	run, err := b.p.Wait(ctx, id)
	if err != nil {
		t.Fatalf("wait for run %s: %v", id, err)
	}
	return run
}

// A pause asked of a running run takes effect at its next step boundary; only the
// owner's role (or an operator role) of the run's tenant may pause or resume it; a
// follow-up to a paused run waits with it; a paused run can be canceled; a run that is
// not paused is not resumed.
func TestPauseRequestAuthorizationAndCancel(t *testing.T) {
	b := setup(t, map[string]string{"main": plannerAnswerScript})
	gate := startGate(t, b)
	model := &sequenceModel{answers: []provider.Message{
		{ToolCalls: []provider.ToolCall{callOf("g1", "gate", `{}`)}},
		{Text: "through"},
		{Text: "never asked"},
	}}
	b.swapPlanner(t, Config{Models: map[string]provider.Model{"main": model}, DefaultModel: "main"})
	owner := events.Identity{Tenant: "acme", Role: "admin"}
	run, err := b.p.Start(b.ctx, StartRequest{Input: "pass the gate", Tools: []string{"gate"}, Caller: owner})
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, waitTimeout, "the gate call", func() bool {
		r, err := b.p.Get(b.ctx, run.ID)
		return err == nil && len(r.Calls) == 1
	})
	if _, err := b.p.Pause(b.ctx, run.ID, events.Identity{Tenant: "globex", Role: "admin"}, PauseRequest{}); !isAPIStatus(err, http.StatusNotFound) {
		t.Fatalf("another tenant's pause: %v, want 404", err)
	}
	if _, err := b.p.Pause(b.ctx, run.ID, events.Identity{Tenant: "acme", Role: "viewer"}, PauseRequest{}); !isAPIStatus(err, http.StatusForbidden) {
		t.Fatalf("another role's pause: %v, want 403", err)
	}
	if _, err := b.p.Resume(b.ctx, run.ID, ResumeRequest{Caller: owner}); !isAPIStatus(err, http.StatusConflict) {
		t.Fatalf("resuming a running run: %v, want 409", err)
	}
	asked, err := b.p.Pause(b.ctx, run.ID, owner, PauseRequest{By: "alice", Reason: "let me look"})
	if err != nil {
		t.Fatal(err)
	}
	if asked.Status != StatusRunning || asked.PauseRequested == nil {
		t.Fatalf("a pause asked mid-step: %s, request %+v; want running with the request recorded", asked.Status, asked.PauseRequested)
	}
	close(gate)
	paused := waitRun(t, b, run.ID)
	// The record names the caller, not the by the request wrote.
	if paused.Status != StatusPaused || paused.Paused.Reason != "requested" || paused.Paused.By != "acme/admin" || paused.Paused.Why != "let me look" {
		t.Fatalf("the run is %s, paused %+v; want paused as acme/admin asked", paused.Status, paused.Paused)
	}
	if v := paused.View(); v.Status != StatusPaused || v.Paused == nil {
		t.Fatalf("the API's view of the paused run: %+v", v)
	}
	if model.calls() != 1 {
		t.Fatalf("the model was asked %d times, want 1 (paused before its next step)", model.calls())
	}
	// A follow-up is kept; the run stays paused.
	if _, _, err := b.p.Continue(b.ctx, run.ID, FollowUp{Input: "note this", Caller: owner}); err != nil {
		t.Fatal(err)
	}
	if r, _ := b.p.Get(b.ctx, run.ID); r.Status != StatusPaused {
		t.Fatalf("after a follow-up the paused run is %s", r.Status)
	}
	if _, err := b.p.Resume(b.ctx, run.ID, ResumeRequest{Caller: events.Identity{Tenant: "globex", Role: "admin"}}); !isAPIStatus(err, http.StatusNotFound) {
		t.Fatalf("another tenant's resume: %v, want 404", err)
	}
	if _, err := b.p.Resume(b.ctx, run.ID, ResumeRequest{Caller: events.Identity{Tenant: "acme", Role: "viewer"}}); !isAPIStatus(err, http.StatusForbidden) {
		t.Fatalf("another role's resume: %v, want 403", err)
	}
	if _, err := b.p.Resume(b.ctx, run.ID, ResumeRequest{Caller: owner, Limits: &Limits{MaxSteps: 5000}}); !isAPIStatus(err, http.StatusBadRequest) {
		t.Fatalf("a resume with maxSteps out of range: %v, want 400", err)
	}
	// Canceled while paused: it ends at once, and the model is not asked again.
	canceled, err := b.p.Cancel(b.ctx, run.ID, owner, CancelRequest{Reason: "enough"})
	if err != nil {
		t.Fatal(err)
	}
	if canceled.Status != StatusDone || canceled.Termination != TerminationCanceled {
		t.Fatalf("the canceled paused run is %s/%s", canceled.Status, canceled.Termination)
	}
	if _, err := b.p.Resume(b.ctx, run.ID, ResumeRequest{Caller: owner}); !isAPIStatus(err, http.StatusConflict) {
		t.Fatalf("resuming a canceled run: %v, want 409", err)
	}
	if model.calls() != 1 {
		t.Fatalf("the model was asked %d times, want 1", model.calls())
	}
}

// A run that pauses after named tools pauses only after a step that called one.
func TestPauseAfterNamedTool(t *testing.T) {
	b := setup(t, map[string]string{"main": plannerAnswerScript})
	model := &sequenceModel{answers: []provider.Message{
		{ToolCalls: []provider.ToolCall{callOf("a1", "add", `{"a":1,"b":1}`)}},
		{ToolCalls: []provider.ToolCall{callOf("e1", "echo", `{"text":"x"}`)}},
		{Text: "done"},
	}}
	b.swapPlanner(t, Config{Models: map[string]provider.Model{"main": model}, DefaultModel: "main"})
	run, err := b.p.Start(b.ctx, StartRequest{Input: "go", Tools: []string{"add", "echo"}, Pause: &PauseOptions{AfterTools: []string{"echo"}}})
	if err != nil {
		t.Fatal(err)
	}
	paused := waitRun(t, b, run.ID)
	if paused.Status != StatusPaused || paused.Paused.Reason != "after_tool" || paused.Paused.Tool != "echo" || paused.Paused.Step != 2 {
		t.Fatalf("the run is %s, paused %+v; want paused after echo, before step 2", paused.Status, paused.Paused)
	}
	// Resumed through another replica that serves no steps: the replica that paused the
	// run, which remembers it paused, takes the step.
	other, err := New(b.ctx, b.srv.Connect(), Config{Models: map[string]provider.Model{"main": model}, DefaultModel: "main",
		Events: b.cfg, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Resume(b.ctx, run.ID, ResumeRequest{}); err != nil {
		t.Fatal(err)
	}
	if done := waitRun(t, b, run.ID); done.Status != StatusDone || done.Answer != "done" {
		t.Fatalf("the resumed run is %s with %q, want done", done.Status, done.Answer)
	}
	if _, err := b.p.Start(b.ctx, StartRequest{Input: "go", Pause: &PauseOptions{AfterTools: []string{"not a name"}}}); !isAPIStatus(err, http.StatusBadRequest) ||
		!strings.Contains(err.Error(), "afterTools") {
		t.Fatalf("a start with a bad afterTools: %v, want 400 naming it", err)
	}
}

// startGate serves the tool gate, whose calls answer "open" once the returned channel is
// closed (or end with their context).
func startGate(t *testing.T, b *testBundle) chan struct{} {
	t.Helper()
	gate := make(chan struct{})
	startExecutor(t, b, tools.Definition{Name: "gate", Safe: true, Parameters: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, _ json.RawMessage) (any, error) {
			select {
			case <-gate:
				return "open", nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		})
	return gate
}
