package planner

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/internal/testsupport/plannertest"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

const waitThenAnswer = `
steps:
  - calls: [{name: add, arguments: {a: 1, b: 1}}]
  - text: two
  - text: noted
`

// A follow-up to a run that is still running joins it before its next model call.
func TestFollowUpToARunningRun(t *testing.T) {
	b := setup(t, nil)
	gate := make(chan struct{})
	kept := &plannertest.KeptModel{Model: scriptedModel(t, waitThenAnswer)}
	b.swapPlanner(t, Config{Models: map[string]provider.Model{"main": &gatedModel{KeptModel: kept, gate: gate}}, DefaultModel: "main"})
	models := map[string]*plannertest.KeptModel{"main": kept}
	run, err := b.p.Start(b.ctx, StartRequest{Input: "1+1", Tools: []string{"add"}})
	if err != nil {
		t.Fatal(err)
	}
	gate <- struct{}{} // step 0 answers with the call
	// While the call runs or its step waits, a follow-up comes.
	if _, added, err := b.p.Continue(b.ctx, run.ID, FollowUp{Input: "also: be brief"}); err != nil || !added {
		t.Fatalf("follow-up: added %v, %v", added, err)
	}
	close(gate)
	done := b.wait(t, run.ID)
	if done.Termination != TerminationCompleted || done.Answer != "two" {
		t.Fatalf("run ended %s (%s), answer %q", done.Termination, done.Detail, done.Answer)
	}
	var texts []string
	for _, m := range models["main"].Last().Messages {
		if m.Role == provider.RoleUser {
			texts = append(texts, m.Text)
		}
	}
	if len(texts) != 2 || texts[1] != "also: be brief" {
		t.Fatalf("the model's last request had user messages %q", texts)
	}
	if got := done.Messages[len(done.Messages)-2]; got.Role != provider.RoleUser || got.Text != "also: be brief" {
		t.Fatalf("the follow-up is not before the answer: %+v", done.Messages)
	}
}

// gatedModel answers once the gate lets it (a receive; a closed gate lets every call).
type gatedModel struct {
	*plannertest.KeptModel
	gate chan struct{}
}

func (m *gatedModel) Generate(ctx context.Context, req provider.Request) (*provider.Response, error) {
	select {
	case <-m.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return m.KeptModel.Generate(ctx, req)
}

// Stream is what the loop calls: gated like Generate, streaming nothing.
func (m *gatedModel) Stream(ctx context.Context, req provider.Request, _ func(provider.Delta)) (*provider.Response, error) {
	return m.Generate(ctx, req)
}

// A run stopped by max_steps is continued with a fresh budget of steps: the step it
// could not take is taken in the continuation, with the follow-up in the conversation.
func TestFollowUpContinuesARunThatUsedItsSteps(t *testing.T) {
	b := setup(t, map[string]string{"main": `
steps:
  - calls: [{name: add, arguments: {a: 1, b: 2}}]
  - text: three, as you asked
`})
	run := b.run(t, StartRequest{Input: "1+2", Tools: []string{"add"}, Limits: Limits{MaxSteps: 1}})
	if run.Termination != TerminationMaxSteps {
		t.Fatalf("first turn ended %s", run.Termination)
	}
	if _, added, err := b.p.Continue(b.ctx, run.ID, FollowUp{Input: "go on"}); err != nil || !added {
		t.Fatalf("follow-up: %v, %v", added, err)
	}
	run = b.wait(t, run.ID)
	if run.Termination != TerminationCompleted || run.Answer != "three, as you asked" || run.Turn != 1 || run.StepsTaken() != 2 {
		t.Fatalf("continued run ended %s (%s), answer %q, turn %d, steps %d", run.Termination, run.Detail, run.Answer, run.Turn, run.StepsTaken())
	}
	roles := ""
	for _, m := range run.Messages {
		roles += string(m.Role)[:1]
	}
	if roles != "uatua" || run.Messages[3].Text != "go on" {
		t.Fatalf("conversation %s: %+v", roles, run.Messages)
	}
}

// A run that timed out while a call ran is continued: the call, still without a result,
// is answered canceled (and the tool is told to stop), and the model goes on with it.
// The run's clock is the test's: its time is up when the test says, and the
// continuation's never is, however slow the machine.
func TestFollowUpAfterATimeoutWithACallRunning(t *testing.T) {
	b := setup(t, nil)
	clock := plannertest.NewClock()
	b.swapPlanner(t, Config{Models: map[string]provider.Model{"main": scriptedModel(t, plannertest.LongScript)}, Now: clock.Now})
	long, def, fn := plannertest.NewLongTool("long", true)
	startExecutor(t, b, def, fn)
	timeline := eventTimeline(t, b)
	run, err := b.p.Start(b.ctx, StartRequest{Input: "wait", Tools: []string{"long"}, Limits: Limits{Timeout: tools.Duration(time.Hour)}})
	if err != nil {
		t.Fatal(err)
	}
	callID := plannertest.Recv(t, long.Started, "the call to start")
	clock.Advance(time.Hour)
	run = b.wait(t, run.ID)
	if run.Termination != TerminationTimeout || len(run.Calls) != 1 || run.Calls[0].Done() {
		t.Fatalf("first turn ended %s with calls %+v; its events:\n%s", run.Termination, run.Calls, timeline())
	}
	if _, added, err := b.p.Continue(b.ctx, run.ID, FollowUp{Input: "go on without it"}); err != nil || !added {
		t.Fatalf("follow-up: %v, %v", added, err)
	}
	if stopped := plannertest.Recv(t, long.Stopped, "the tool to be told to stop"); stopped != callID {
		t.Fatalf("call %s stopped, want %s", stopped, callID)
	}
	run = b.wait(t, run.ID)
	if run.Termination != TerminationCompleted || run.Answer != "the model was asked again" || run.Calls[0].Status != string(events.StatusCanceled) {
		t.Fatalf("continued run ended %s (%s), answer %q, call %+v; its events:\n%s",
			run.Termination, run.Detail, run.Answer, *run.Calls[0], timeline())
	}
}

// An end decided on a run's state before a follow-up reopened it does not end the
// continuation. Here the result of the run's last allowed step comes in (the step after
// it would pass max_steps), and the write that ends the run is held while the run's time
// runs out (it ends timeout) and a follow-up continues it at that same step. Before,
// the held end, tried again on the continued run, ended it with max_steps; with the
// executor answering a call timeout as the run's deadline passed, the same race ended
// TestFollowUpAfterATimeoutWithACallRunning's continuation at once with timeout.
func TestEndDecidedBeforeAFollowUpLeavesTheContinuation(t *testing.T) {
	b := setup(t, nil)
	clock := plannertest.NewClock()
	gate := make(chan struct{})
	kept := &plannertest.KeptModel{Model: scriptedModel(t, `
steps:
  - calls: [{name: held, arguments: {}}]
  - text: moved on
`)}
	p, err := New(b.ctx, b.srv.Connect(), Config{Models: map[string]provider.Model{"main": &gatedModel{KeptModel: kept, gate: gate}},
		Events: b.cfg, Log: zerolog.Nop(), Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	held, letGo := make(chan struct{}), make(chan struct{})
	var once sync.Once
	p.runs.Wrote = func(_ string, value []byte) error {
		var r Run
		if json.Unmarshal(value, &r) == nil && r.Termination == TerminationMaxSteps && r.Turn == 0 {
			once.Do(func() { close(held); <-letGo })
		}
		return nil
	}
	b.stopPlanner()
	serve(t, p.Run)
	b.p = p
	release := make(chan struct{})
	startExecutor(t, b, tools.Definition{Type: "function", Name: "held", Description: "Answers when the test says.", Safe: true,
		Parameters: json.RawMessage(`{"type":"object"}`)}, func(ctx context.Context, _ json.RawMessage) (any, error) {
		select {
		case <-release:
			return "done", nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	timeline := eventTimeline(t, b)

	run, err := p.Start(b.ctx, StartRequest{Input: "go", Tools: []string{"held"}, Limits: Limits{MaxSteps: 1, Timeout: tools.Duration(time.Hour)}})
	if err != nil {
		t.Fatal(err)
	}
	gate <- struct{}{} // step 0 answers with the call
	close(release)
	select {
	case <-held:
	case <-time.After(waitTimeout):
		t.Fatalf("the run was not ended for max_steps after its call's result; its events:\n%s", timeline())
	}
	clock.Advance(2 * time.Hour)
	if r := b.wait(t, run.ID); r.Termination != TerminationTimeout {
		t.Fatalf("the run ended %s (%s), want timeout while its end for max_steps was held", r.Termination, r.Detail)
	}
	if _, added, err := p.Continue(b.ctx, run.ID, FollowUp{Input: "go on"}); err != nil || !added {
		t.Fatalf("follow-up: %v, %v", added, err)
	}
	close(letGo)
	natstest.Eventually(t, waitTimeout, "the planner to be done with the call's result", func() bool { return resultsHandled(b) })
	close(gate) // the continuation's model answers
	run = b.wait(t, run.ID)
	if run.Termination != TerminationCompleted || run.Answer != "moved on" || run.Turn != 1 {
		t.Fatalf("continued run ended %s (%s), answer %q, turn %d; its events:\n%s",
			run.Termination, run.Detail, run.Answer, run.Turn, timeline())
	}
}

// resultsHandled reports whether the planners of b's fleet have acknowledged every
// result published so far.
func resultsHandled(b *testBundle) bool {
	streams, cc, err := b.cfg.PlannerConsumer(events.PlannerResultsConsumer)
	if err != nil {
		return false
	}
	for _, stream := range streams {
		c, err := b.js.Consumer(b.ctx, stream, cc.Durable)
		if err != nil {
			return false
		}
		info, err := c.Info(b.ctx)
		if err != nil || info.NumAckPending > 0 || info.NumPending > 0 {
			return false
		}
	}
	return true
}

// eventTimeline collects the run events of b's fleet from now on; the returned
// function lists them, one per line, with when each came.
func eventTimeline(t *testing.T, b *testBundle) func() string {
	t.Helper()
	var mu sync.Mutex
	var lines []string
	t0 := time.Now()
	sub, err := b.nc.Subscribe("toolfleet.event.run.>", func(m *nats.Msg) {
		mu.Lock()
		defer mu.Unlock()
		data := m.Data
		if len(data) > 240 {
			data = data[:240]
		}
		lines = append(lines, fmt.Sprintf("%8.1f ms  %s  %s", float64(time.Since(t0).Microseconds())/1000, m.Subject, data))
	})
	if err == nil {
		err = b.nc.Flush() // subscribed before anything of the run happens
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(lines, "\n")
	}
}
