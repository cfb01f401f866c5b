package planner

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/internal/planner/runrec"
	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// run starts a run and waits until it is done.
func (b *testBundle) run(t *testing.T, req StartRequest) *Run {
	t.Helper()
	run, err := b.p.Start(b.ctx, req)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	return b.wait(t, run.ID)
}

func (b *testBundle) wait(t *testing.T, id string) *Run {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	run, err := b.p.Wait(ctx, id)
	if err != nil {
		t.Fatalf("wait for run %s: %v (run: %+v)", id, err, run)
	}
	return run
}

func TestLoopMultiStepWithParallelCalls(t *testing.T) {
	b := setup(t, map[string]string{"main": `
name: multi
steps:
  - calls:
      - {name: add, arguments: {a: 1, b: 2}}
      - {name: echo, arguments: {text: hi}}
  - when: {tool: add, contains: "3"}
    calls:
      - {name: add, arguments: {a: 3, b: 4}}
  - text: the sums are 3 and 7
`})
	run := b.run(t, StartRequest{Input: "add things"})
	if run.Termination != TerminationCompleted || run.Answer != "the sums are 3 and 7" {
		t.Fatalf("run ended %s (%s) with %q", run.Termination, run.Detail, run.Answer)
	}
	if len(run.Calls) != 3 {
		t.Fatalf("%d calls, want 3: %+v", len(run.Calls), run.Calls)
	}
	first, second := run.Calls[0], run.Calls[1]
	if first.Step != 0 || second.Step != 0 || run.Calls[2].Step != 1 {
		t.Fatalf("steps of the calls = %d %d %d, want 0 0 1", first.Step, second.Step, run.Calls[2].Step)
	}
	for _, c := range run.Calls {
		if c.Status != "ok" || c.Attempts != 1 || c.Executor == "" || c.FinishedAt == nil || c.Local || !c.Validated {
			t.Errorf("call %s: %+v", c.ID, c)
		}
	}
	var sum struct{ Sum int }
	if err := json.Unmarshal(run.Calls[2].Output, &sum); err != nil || sum.Sum != 7 {
		t.Fatalf("second add output = %s", run.Calls[2].Output)
	}
	// The conversation holds the parallel results in the order of the model's calls.
	var toolMsg *provider.Message
	for i := range run.Messages {
		if run.Messages[i].Role == provider.RoleTool {
			toolMsg = &run.Messages[i]
			break
		}
	}
	if toolMsg == nil || len(toolMsg.ToolResults) != 2 || toolMsg.ToolResults[0].Name != "add" || toolMsg.ToolResults[1].Name != "echo" {
		t.Fatalf("first tool message = %+v", toolMsg)
	}
	if run.Usage.Total() == 0 {
		t.Fatal("no token usage recorded")
	}
}

func TestLoopToolErrorIsFedBack(t *testing.T) {
	b := setup(t, map[string]string{"main": `
name: err
steps:
  - calls: [{name: fail, arguments: {}}]
  - when: {error: true, contains: "disk is on fire"}
    text: the tool failed, sorry
  - text: the tool worked
`})
	run := b.run(t, StartRequest{Input: "try"})
	if run.Answer != "the tool failed, sorry" {
		t.Fatalf("answer %q: the model did not see the tool's error", run.Answer)
	}
	c := run.Calls[0]
	if c.Status != string(events.StatusError) || c.Error == nil || run.Errors != 1 {
		t.Fatalf("call = %+v, errors = %d", c, run.Errors)
	}
}

func TestLoopInvalidCallIsRepairedOnce(t *testing.T) {
	b := setup(t, map[string]string{"main": `
name: repair
steps:
  - calls: [{name: add, arguments: {a: one, b: 2}}]
  - when: {error: true, tool: add}
    calls: [{name: add, arguments: {a: 1, b: 2}}]
  - text: done
`})
	run := b.run(t, StartRequest{Input: "add"})
	if run.Termination != TerminationCompleted || len(run.Calls) != 2 {
		t.Fatalf("run %s (%s), %d calls", run.Termination, run.Detail, len(run.Calls))
	}
	bad, good := run.Calls[0], run.Calls[1]
	if bad.Status != string(events.StatusInvalid) || !bad.Local || bad.Error == nil || len(bad.Error.Violations) == 0 {
		t.Fatalf("invalid call = %+v", bad)
	}
	if bad.Error.Violations[0].Pointer != "/a" {
		t.Fatalf("violation pointer %q, want /a", bad.Error.Violations[0].Pointer)
	}
	if !strings.Contains(string(bad.Output), "violations") {
		t.Fatalf("the model was not shown the violations: %s", bad.Output)
	}
	if good.Status != "ok" || run.Errors != 0 {
		t.Fatalf("repaired call %+v; errors %d (the first repair is free)", good, run.Errors)
	}
}

func TestLoopSecondInvalidCallCountsAsError(t *testing.T) {
	b := setup(t, map[string]string{"main": `
name: norepair
steps:
  - calls: [{name: add, arguments: {a: one, b: 2}}]
  - calls: [{name: add, arguments: {a: two, b: 2}}]
  - text: never
`})
	run := b.run(t, StartRequest{Input: "add", Limits: Limits{ErrorThreshold: 1}})
	if run.Termination != TerminationErrorThreshold || run.Errors != 1 {
		t.Fatalf("run %s (%s), errors %d", run.Termination, run.Detail, run.Errors)
	}
}

func TestLoopStopConditions(t *testing.T) {
	steady := `
name: steady
steps:
  - {calls: [{name: add, arguments: {a: 1, b: 1}}], usage: {input: 6000, output: 4000}}
  - {calls: [{name: add, arguments: {a: 2, b: 2}}], usage: {input: 6000, output: 4000}}
  - {calls: [{name: add, arguments: {a: 3, b: 3}}], usage: {input: 6000, output: 4000}}
  - text: done
`
	tests := []struct {
		name   string
		script string
		limits Limits
		tools  []string
		want   Termination
	}{
		{"max steps", steady, Limits{MaxSteps: 2}, nil, TerminationMaxSteps},
		{"token budget", steady, Limits{TokenBudget: 20000}, nil, TerminationTokenBudget},
		{"no stop needed", steady, Limits{}, nil, TerminationCompleted},
		{"final tool", "steps:\n  - calls: [{name: finish, arguments: {answer: fin}}]\n  - text: never\n", Limits{}, nil, TerminationFinalTool},
		{"timeout while a tool runs", "steps:\n  - calls: [{name: slow}]\n  - text: never\n", Limits{Timeout: tools.Duration(300 * time.Millisecond)}, nil, TerminationTimeout},
		{"loop stop", "steps:\n" + strings.Repeat("  - calls: [{name: add, arguments: {a: 1, b: 1}}]\n", 4) + "  - text: x\n",
			Limits{LoopThreshold: 3, LoopAction: runrec.LoopStop}, nil, TerminationLoopDetected},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := setup(t, map[string]string{"main": tt.script})
			run := b.run(t, StartRequest{Input: "go", Limits: tt.limits, Tools: tt.tools})
			if run.Termination != tt.want {
				t.Fatalf("termination %s (%s), want %s", run.Termination, run.Detail, tt.want)
			}
			if run.Detail == "" && tt.want != TerminationCompleted {
				t.Fatal("no detail for the termination")
			}
			switch tt.want {
			case TerminationMaxSteps:
				if run.Step != 2 || len(run.Calls) != 2 {
					t.Fatalf("step %d, %d calls; want 2 model turns", run.Step, len(run.Calls))
				}
			case TerminationTokenBudget:
				if run.Usage.Total() != 20000 {
					t.Fatalf("usage %d, want 20000 (stopped after the second turn, with nothing left)", run.Usage.Total())
				}
			case TerminationFinalTool:
				if !strings.Contains(run.Answer, "fin") {
					t.Fatalf("answer %q", run.Answer)
				}
			case TerminationLoopDetected:
				if len(run.Calls) != 3 {
					t.Fatalf("%d calls, want 3 (the third repeat stops the run)", len(run.Calls))
				}
			}
		})
	}
}

func TestLoopDetectionInjectsAWarning(t *testing.T) {
	b := setup(t, map[string]string{"main": `
steps:
  - calls: [{name: add, arguments: {a: 1, b: 1}}]
  - calls: [{name: add, arguments: {b: 1, a: 1}}]
  - when: {error: true, contains: "same arguments"}
    text: I will stop repeating myself
  - text: never warned
`})
	run := b.run(t, StartRequest{Input: "go", Limits: Limits{LoopThreshold: 2}})
	if run.Answer != "I will stop repeating myself" || len(run.Warnings) != 1 {
		t.Fatalf("answer %q, warnings %v", run.Answer, run.Warnings)
	}
	if c := run.Calls[1]; !c.Local || c.Error == nil || c.Error.Code != codeLoopDetected {
		t.Fatalf("repeated call = %+v; it should be answered by the loop detector, not run", c)
	}
}

func TestLoopUnknownToolIsAnsweredNotRun(t *testing.T) {
	b := setup(t, map[string]string{"main": `
steps:
  - calls: [{name: teleport, arguments: {to: mars}}]
  - when: {error: true, contains: "not available"}
    text: no teleport then
  - text: never
`})
	run := b.run(t, StartRequest{Input: "go"})
	if run.Answer != "no teleport then" || run.Calls[0].Status != string(events.StatusNoSuchTool) {
		t.Fatalf("answer %q, call %+v", run.Answer, run.Calls[0])
	}
}

// With loopAction warn, a repeated call still runs; the run records a warning and goes on.
func TestLoopDetectionWarns(t *testing.T) {
	b := setup(t, map[string]string{"main": "steps:\n" +
		strings.Repeat("  - calls: [{name: add, arguments: {a: 1, b: 1}}]\n", 3) + "  - text: done\n"})
	run := b.run(t, StartRequest{Input: "go", Limits: Limits{LoopThreshold: 2, LoopAction: runrec.LoopWarn}})
	if run.Termination != TerminationCompleted || len(run.Calls) != 3 || len(run.Warnings) != 2 {
		t.Fatalf("run %s, %d calls, warnings %v; want all three calls run and two warnings", run.Termination, len(run.Calls), run.Warnings)
	}
	for _, c := range run.Calls {
		if c.Status != "ok" || c.Local {
			t.Fatalf("call %+v: a warned call must still run", c)
		}
	}
	// Each warning is a loop_detected event naming the tool and the call, as the
	// README's table says.
	evs := followEvents(t, b.p, run.ID)
	var warned []string
	for _, e := range evs {
		if e.What != "loop_detected" {
			continue
		}
		d := checkEvent(t, run.ID, e)
		var detail struct{ Tool, Action string }
		if err := json.Unmarshal(d.Detail, &detail); err != nil || detail.Tool != "add" || detail.Action != string(runrec.LoopWarn) {
			t.Errorf("loop_detected %s: want tool add and action warn", e.Data)
		}
		warned = append(warned, d.CallID)
	}
	if want := []string{callID(run.ID, 1, 0), callID(run.ID, 2, 0)}; !slices.Equal(warned, want) {
		t.Errorf("loop_detected for calls %v, want %v", warned, want)
	}
}
