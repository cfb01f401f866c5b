package planner

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
)

// recordingModel remembers the tools it was shown at each turn.
type recordingModel struct {
	provider.Model
	mu    sync.Mutex
	shown [][]string
}

func (m *recordingModel) Stream(ctx context.Context, req provider.Request, onDelta func(provider.Delta)) (*provider.Response, error) {
	resp, err := m.Generate(ctx, req)
	return streamed(onDelta, resp, err)
}

func (m *recordingModel) Generate(ctx context.Context, req provider.Request) (*provider.Response, error) {
	var names []string
	for _, d := range req.Tools {
		names = append(names, d.Name)
	}
	m.mu.Lock()
	m.shown = append(m.shown, names)
	m.mu.Unlock()
	return m.Model.Generate(ctx, req)
}

// With a tool set larger than the threshold, the planner asks the picker service and the
// model is shown only the picked tools, best first; with a small set it is not asked.
func TestPickerNarrowsLargeToolSets(t *testing.T) {
	b := setup(t, nil)
	startPicker(t, b)
	model := &recordingModel{Model: scriptedModel(t, "steps:\n  - calls: [{name: add, arguments: {a: 2, b: 2}}]\n  - text: four\n")}
	p := b.swapPlanner(t, Config{Models: map[string]provider.Model{"rec": model},
		Picker: NewPickerClient(b.nc, 5*time.Second), PickThreshold: 3, PickMax: 2})

	all := []string{"add", "echo", "fail", "finish", "delete_all", "slow"}
	var run *Run
	// The picker loads the catalog on its own; until it has, the planner shows everything.
	natstest.Eventually(t, waitTimeout, "a narrowed tool set", func() bool {
		model.mu.Lock()
		model.shown = nil
		model.mu.Unlock()
		run = b.run(t, StartRequest{Input: "add two integers", Tools: all})
		model.mu.Lock()
		defer model.mu.Unlock()
		return len(model.shown) > 0 && len(model.shown[0]) < len(all)
	})
	model.mu.Lock()
	first := model.shown[0]
	model.mu.Unlock()
	// At most PickMax tools, the best match first; tools that match nothing are left out.
	if len(first) > 2 || first[0] != "add" {
		t.Fatalf("model was shown %v; want add first and at most 2 tools", first)
	}
	for _, n := range first {
		if !slices.Contains(all, n) {
			t.Fatalf("model was shown %s, which is not in the run's tools", n)
		}
	}
	if run.Answer != "four" {
		t.Fatalf("answer %q", run.Answer)
	}

	// A small tool set is shown whole, without asking the picker.
	model.mu.Lock()
	model.shown = nil
	model.mu.Unlock()
	small, err := p.Start(b.ctx, StartRequest{Input: "add two integers", Tools: []string{"add", "echo"}})
	if err != nil {
		t.Fatal(err)
	}
	b.wait(t, small.ID)
	model.mu.Lock()
	defer model.mu.Unlock()
	if len(model.shown[0]) != 2 {
		t.Fatalf("small set: model was shown %v, want both tools", model.shown[0])
	}
}
