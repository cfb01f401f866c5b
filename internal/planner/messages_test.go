package planner

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolfleet/toolfleet/internal/provider"
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
	if run.Termination != TerminationCompleted || run.Answer != "three, as you asked" || run.Turn != 1 || run.stepsTaken() != 2 {
		t.Fatalf("continued run ended %s (%s), answer %q, turn %d, steps %d", run.Termination, run.Detail, run.Answer, run.Turn, run.stepsTaken())
	}
	roles := ""
	for _, m := range run.Messages {
		roles += string(m.Role)[:1]
	}
	if roles != "uatua" || run.Messages[3].Text != "go on" {
		t.Fatalf("conversation %s: %+v", roles, run.Messages)
	}
}

// A run that timed out while a call ran is continued: a call still without a result is
// answered canceled (and the tool is told to stop), and the model goes on with it.
func TestFollowUpAfterATimeoutWithACallRunning(t *testing.T) {
	if raceDetector {
		t.Skip("bound by the run's 2s limit, which a race-instrumented continuation on 2 cores can exceed; runs without -race")
	}
	b := setup(t, map[string]string{"main": `
steps:
  - calls: [{name: slow, arguments: {}}]
  - text: moved on
`})
	// The run's events as they come, to say where a continuation that ran out of time
	// spent it (it happens about once in hundreds of CI runs; the cause is not known).
	timeline := eventTimeline(t, b)
	// 3s, not 1s: the continuation gets the same limit, and on a loaded machine one in
	// about 30 took longer than 1s to be stepped, and one CI run longer than 2s.
	run := b.run(t, StartRequest{Input: "wait", Tools: []string{"slow"}, Limits: Limits{Timeout: tools.Duration(3 * time.Second)}})
	if run.Termination != TerminationTimeout || len(run.Calls) != 1 {
		t.Fatalf("first turn ended %s with calls %+v", run.Termination, run.Calls)
	}
	if _, added, err := b.p.Continue(b.ctx, run.ID, FollowUp{Input: "go on without it"}); err != nil || !added {
		t.Fatalf("follow-up: %v, %v", added, err)
	}
	run = b.wait(t, run.ID)
	// The call carries the run's deadline: the executor may have answered it timeout
	// first; otherwise the continuation answered it canceled.
	if st := run.Calls[0].Status; run.Termination != TerminationCompleted || run.Answer != "moved on" ||
		st != string(events.StatusCanceled) && st != string(events.StatusTimeout) {
		t.Fatalf("continued run ended %s (%s), answer %q, call %+v; its events:\n%s",
			run.Termination, run.Detail, run.Answer, *run.Calls[0], timeline())
	}
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
