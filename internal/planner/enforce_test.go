package planner

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// startPaintFence serves paint_fence from its own executor and returns how many times the
// executor ran it: a refused call must leave it at zero.
func startPaintFence(t *testing.T, b *testBundle) *atomic.Int64 {
	t.Helper()
	var ran atomic.Int64
	startExecutor(t, b, tools.Definition{Type: "function", Name: "paint_fence", Description: "Paint a garden fence in a colour.",
		Safe: true, Parameters: json.RawMessage(`{"type":"object","properties":{"colour":{"type":"string"}}}`)},
		func(context.Context, json.RawMessage) (any, error) { ran.Add(1); return "painted", nil })
	return &ran
}

// wantRefused fails unless c was answered by the planner with code, never published.
func wantRefused(t *testing.T, c *CallRecord, code tools.Code, contains string) {
	t.Helper()
	if !c.Local || c.Error == nil || c.Error.Code != code || c.Executor != "" || c.Attempts != 0 {
		t.Fatalf("call %s %s = %+v; want it answered locally with %s", c.ID, c.Name, c, code)
	}
	if !strings.Contains(c.Error.Message, contains) {
		t.Fatalf("call %s: message %q does not say %q", c.ID, c.Error.Message, contains)
	}
}

// A tool outside activeTools, under toolChoice none, or other than the named toolChoice
// is refused with not_allowed: the planner answers it, the executor never runs it, and
// it counts as a failed call.
func TestCallsOutsideTheStepsToolsAreRefused(t *testing.T) {
	tests := []struct {
		name    string
		req     StartRequest
		script  string
		offered []string
		// refused lists the calls (by index) answered not_allowed; the others ran.
		refused []int
		message string
	}{
		{name: "outside activeTools",
			req:     StartRequest{Tools: []string{"add", "paint_fence"}, ActiveTools: []string{"add"}},
			script:  "  - calls: [{name: paint_fence, arguments: {colour: red}}, {name: add, arguments: {a: 1, b: 2}}]\n",
			offered: []string{"add"}, refused: []int{0}, message: "not among this run's tools"},
		{name: "toolChoice none",
			req:     StartRequest{Tools: []string{"add", "paint_fence"}, ToolChoice: "none"},
			script:  "  - calls: [{name: paint_fence, arguments: {colour: red}}, {name: add, arguments: {a: 1, b: 2}}]\n",
			offered: []string{"add", "paint_fence"}, refused: []int{0, 1}, message: "toolChoice is none"},
		{name: "named toolChoice",
			req:     StartRequest{Tools: []string{"add", "paint_fence"}, ToolChoice: "add"},
			script:  "  - calls: [{name: add, arguments: {a: 1, b: 2}}, {name: paint_fence, arguments: {colour: red}}]\n",
			offered: []string{"add", "paint_fence"}, refused: []int{1}, message: `toolChoice names "add"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, map[string]string{"main": "steps:\n" + tt.script +
				"  - when: {error: true, contains: not_allowed}\n    text: understood\n  - text: never told\n"})
			ran := startPaintFence(t, b)
			req := tt.req
			req.Input = "paint the fence"
			run := b.run(t, req)
			if run.Termination != TerminationCompleted || run.Answer != "understood" {
				t.Fatalf("run ended %s (%s) with %q", run.Termination, run.Detail, run.Answer)
			}
			if n := ran.Load(); n != 0 {
				t.Fatalf("the executor ran paint_fence %d times; a refused call must never be published", n)
			}
			for i, c := range run.Calls {
				if slices.Contains(tt.refused, i) {
					wantRefused(t, c, tools.CodeNotAllowed, tt.message)
				} else if c.Status != string(events.StatusOK) || c.Local {
					t.Fatalf("allowed call %s = %+v; want it run by the executor", c.Name, c)
				}
			}
			if run.Errors != len(tt.refused) {
				t.Fatalf("run.Errors = %d, want %d: a refused call counts as a failed call", run.Errors, len(tt.refused))
			}
			if len(run.Offered) != 2 || !slices.Equal(run.Offered[0].Tools, tt.offered) || run.Offered[0].Step != 0 || run.Offered[0].Picked != nil {
				t.Fatalf("offered = %+v, want %v at step 0 and no pick", run.Offered, tt.offered)
			}
		})
	}
}

// A tool that exists nowhere stays no_such_tool, apart from not_allowed.
func TestUnknownToolIsNoSuchToolNotNotAllowed(t *testing.T) {
	t.Parallel()
	b := setup(t, map[string]string{"main": "steps:\n  - calls: [{name: teleport, arguments: {}}]\n  - text: ok\n"})
	run := b.run(t, StartRequest{Input: "go", Tools: []string{"add"}, ToolChoice: "none"})
	wantRefused(t, run.Calls[0], tools.CodeNoSuchTool, "no executor serves it")
}

// Under toolChoice required, an answer without a call is asked again once; a second one
// ends the run with tool_required.
func TestToolChoiceRequired(t *testing.T) {
	t.Parallel()
	b := setup(t, map[string]string{
		"lazy": "steps:\n  - text: it is four\n  - text: still four\n  - text: never asked\n",
		"late": "steps:\n  - text: it is four\n  - calls: [{name: finish, arguments: {answer: four}}]\n",
	})
	run := b.run(t, StartRequest{Input: "add 2 and 2", Model: "lazy", Tools: []string{"add", "finish"}, ToolChoice: "required"})
	if run.Termination != TerminationToolRequired || !strings.Contains(run.Detail, "without a tool call") || run.Answer != "" {
		t.Fatalf("run ended %s (%s) with %q; want tool_required", run.Termination, run.Detail, run.Answer)
	}
	if !slices.Equal(run.RetriedSteps, []int{0}) || run.Step != 1 || len(run.Warnings) != 1 {
		t.Fatalf("retried steps %v, step %d, warnings %v; want step 0 retried once", run.RetriedSteps, run.Step, run.Warnings)
	}

	run = b.run(t, StartRequest{Input: "add 2 and 2", Model: "late", Tools: []string{"add", "finish"}, ToolChoice: "required"})
	if run.Termination != TerminationFinalTool || !slices.Equal(run.RetriedSteps, []int{0}) {
		t.Fatalf("run ended %s (%s), retried %v; want the retry to reach the final tool", run.Termination, run.Detail, run.RetriedSteps)
	}
}

// With pick:true, a tool the picker left out is refused at that step, and the step's
// tool set and the picker's scores are recorded on the run and shown by the API.
func TestPickerSelectionIsEnforcedAndRecorded(t *testing.T) {
	b := setup(t, nil)
	ran := startPaintFence(t, b)
	startPicker(t, b)
	p := b.swapPlanner(t, Config{Models: map[string]provider.Model{"main": scriptedModel(t,
		"steps:\n  - calls: [{name: add, arguments: {a: 2, b: 2}}, {name: paint_fence, arguments: {colour: red}}]\n"+
			"  - when: {error: true, contains: not offered}\n    text: four\n  - text: never told\n")},
		DefaultModel: "main", Picker: NewPickerClient(b.nc, 5*time.Second), PickMax: 1})

	var run *Run
	// The picker loads the catalog on its own; until it has, it fails and the planner
	// offers every tool (and records no pick).
	natstest.Eventually(t, waitTimeout, "a step whose tools the picker chose", func() bool {
		ran.Store(0)
		run = b.run(t, StartRequest{Input: "add two integers", Tools: []string{"add", "echo", "paint_fence"}, Pick: new(true)})
		return len(run.Offered) > 0 && run.Offered[0].Picked != nil
	})
	first := run.Offered[0]
	if !slices.Equal(first.Tools, []string{"add"}) || first.Picked[0].Name != "add" || first.Picked[0].Score <= 0 || first.Picked[0].Provenance == nil {
		t.Fatalf("step 0 offered %v, picked %+v; want add alone, with its score and provenance", first.Tools, first.Picked)
	}
	if run.Answer != "four" || ran.Load() != 0 {
		t.Fatalf("answer %q, paint_fence ran %d times; want the excluded call refused, never run", run.Answer, ran.Load())
	}
	if run.Calls[0].Status != string(events.StatusOK) {
		t.Fatalf("picked call = %+v", run.Calls[0])
	}
	wantRefused(t, run.Calls[1], tools.CodeNotAllowed, "not offered at this step")

	// The API shows the run's view (GET /v1/runs/{id}), as JSON.
	got, err := p.Get(b.ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(got.View())
	if err != nil {
		t.Fatal(err)
	}
	var view struct {
		Offered []struct {
			Step   int      `json:"step"`
			Tools  []string `json:"tools"`
			Picked []struct {
				Name   string  `json:"name"`
				Score  float64 `json:"score"`
				Reason string  `json:"reason"`
			} `json:"picked"`
		} `json:"offered"`
	}
	if err := json.Unmarshal(body, &view); err != nil {
		t.Fatal(err)
	}
	if len(view.Offered) != 2 || view.Offered[0].Picked[0].Name != "add" || view.Offered[0].Picked[0].Score <= 0 {
		t.Fatalf("the view of run %s offered = %+v; want the picks per step", run.ID, view.Offered)
	}
}
