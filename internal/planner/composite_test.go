package planner

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/client"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/executor"
	"github.com/toolfleet/toolfleet/pkg/tools"
	"github.com/toolfleet/toolfleet/pkg/toolsfile"
)

// A composite declared in a tools file is one tool to the model; a run's call of it
// makes each sub-call a fleet call of the run (a Go tool on the fleet's executor, a
// command tool beside the composite), a failing sub-call does not stop the next, and
// the composite's result gathers them in order. (Its sub-tools add and fail are served
// by another executor, so the entry says it is safe: each sub-call would still wait for
// its own tool's approval.)
func TestCompositeFromAToolsFileInARun(t *testing.T) {
	b := setup(t, map[string]string{"main": plannerAnswerScript})
	file := map[string]any{"tools": []map[string]any{
		{"name": "shout", "description": "Shout a text.", "safe": true,
			"parameters": map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}},
				"required": []string{"text"}},
			"command": map[string]any{"argv": []string{"/bin/sh", "-c", `tr a-z A-Z | sed 's/.*"TEXT":"\([^"]*\)".*/"\1"/'`}}},
		{"name": "trip", "description": "Add, fail and shout in one call.", "safe": true, "composite": map[string]any{"tools": []string{"add", "fail", "shout"}}},
	}}
	data, _ := json.Marshal(file)
	path := filepath.Join(t.TempDir(), "tools.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := toolsfile.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	reg := tools.NewRegistry()
	servers, err := f.Start(b.ctx, reg, zerolog.Nop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(servers.Close)
	ex, err := executor.New(b.srv.Connect(), reg, executor.WithStreamConfig(b.cfg), executor.WithLogger(zerolog.Nop()),
		executor.WithExecutorID("file"))
	if err != nil {
		t.Fatal(err)
	}
	serve(t, ex.Run)
	for _, name := range []string{"shout", "trip"} {
		natstest.Eventually(t, waitTimeout, "the catalog to list "+name, func() bool { _, ok := b.p.cat.get(name); return ok })
	}

	args := `{"calls":[{"name":"add","args":{"a":2,"b":3}},{"name":"fail","args":{}},{"name":"shout","args":{"text":"hi"}}]}`
	model := &sequenceModel{answers: []provider.Message{
		{Text: "all at once", ToolCalls: []provider.ToolCall{callOf("t", "trip", args)}},
		{Text: "done"},
	}}
	b.swapPlanner(t, Config{Models: map[string]provider.Model{"main": model}, DefaultModel: "main"})
	run, err := b.p.Start(b.ctx, StartRequest{Input: "plan a trip", Tools: []string{"trip"}})
	if err != nil {
		t.Fatal(err)
	}
	run = waitRun(t, b, run.ID)
	if run.Status != StatusDone || run.Answer != "done" || len(run.Calls) != 1 {
		t.Fatalf("the run ended %s/%s (%s) with %q and %d calls", run.Status, run.Termination, run.Detail, run.Answer, len(run.Calls))
	}
	var offered []string
	for _, d := range model.request(t, 0).Tools {
		offered = append(offered, d.Name)
	}
	if !slices.Equal(offered, []string{"trip"}) {
		t.Fatalf("the model was offered %v, want the composite alone", offered)
	}
	trip := run.Calls[0]
	if trip.Status != "ok" {
		t.Fatalf("the composite's call: %s %v", trip.Status, trip.Error)
	}
	var out struct {
		Results []struct {
			Name   string          `json:"name"`
			Result json.RawMessage `json:"result"`
		} `json:"results"`
	}
	if err := json.Unmarshal(trip.Output, &out); err != nil || len(out.Results) != 3 {
		t.Fatalf("the composite's output %s: %v", trip.Output, err)
	}
	for i, want := range []struct{ name, has string }{{"add", `"sum":5`}, {"fail", "the disk is on fire"}, {"shout", `HI`}} {
		if got := out.Results[i]; got.Name != want.name || !strings.Contains(string(got.Result), want.has) {
			t.Errorf("result %d: %s %s, want %s with %s", i, got.Name, got.Result, want.name, want.has)
		}
	}

	// Each sub-call is a call of the run with its own stored result.
	c, err := client.New(b.nc)
	if err != nil {
		t.Fatal(err)
	}
	results, err := b.js.Stream(b.ctx, events.StreamResults)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct{ tool, status string }{{"add", "ok"}, {"fail", "error"}, {"shout", "ok"}} {
		subject, err := events.ResultSubject("", run.ID, toolsfile.SubCallID(trip.ID, i))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := results.GetLastMsgForSubject(b.ctx, subject); err != nil {
			t.Fatalf("sub-call %d has no stored result on %s: %v", i, subject, err)
		}
		// The call again with the sub-call's id: its stored result answers (a failed one
		// with its error beside it).
		sub, err := c.Call(b.ctx, client.Request{Tool: want.tool, ID: toolsfile.SubCallID(trip.ID, i), RunID: run.ID})
		if (err != nil) != (want.status != "ok") {
			t.Fatalf("sub-call %d: %v", i, err)
		}
		if sub.RunID != run.ID || sub.Tool != want.tool || string(sub.Status) != want.status {
			t.Errorf("sub-call %d: run %s tool %s status %s, want run %s tool %s status %s", i, sub.RunID, sub.Tool, sub.Status, run.ID, want.tool, want.status)
		}
	}
}
