package planner

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/internal/testsupport/plannertest"
	"github.com/toolfleet/toolfleet/pkg/client"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/toolsfile"
)

// A composite declared in a tools file is one tool to the model; a run's call of it
// makes each sub-call a fleet call of the run (a Go tool on the fleet's executor, a
// command tool beside the composite), a failing sub-call does not stop the next, and
// the composite's result gathers them in order. Its sub-tools are among the run's tools,
// as they must be for its sub-calls to run, and its record lists them as they ended.
// (Its sub-tools add and fail are served by another executor, so the entry says it is
// safe: each sub-call would still wait for its own tool's approval.)
func TestCompositeFromAToolsFileInARun(t *testing.T) {
	b := setup(t, map[string]string{"main": plannerAnswerScript})
	file := map[string]any{"tools": []map[string]any{
		{"name": "shout", "description": "Shout a text.", "safe": true,
			"parameters": map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}},
				"required": []string{"text"}},
			"command": map[string]any{"argv": []string{"/bin/sh", "-c", `tr a-z A-Z | sed 's/.*"TEXT":"\([^"]*\)".*/"\1"/'`}}},
		{"name": "trip", "description": "Add, fail and shout in one call.", "safe": true, "composite": map[string]any{"tools": []string{"add", "fail", "shout"}}},
	}}
	serveToolsFile(t, b, t.TempDir(), file)

	args := `{"calls":[{"name":"add","args":{"a":2,"b":3}},{"name":"fail","args":{}},{"name":"shout","args":{"text":"hi"}}]}`
	model := &sequenceModel{answers: []provider.Message{
		{Text: "all at once", ToolCalls: []provider.ToolCall{callOf("t", "trip", args)}},
		{Text: "done"},
	}}
	b.swapPlanner(t, Config{Models: map[string]provider.Model{"main": model}, DefaultModel: "main"})
	run, err := b.p.Start(b.ctx, StartRequest{Input: "plan a trip", Tools: []string{"trip", "add", "fail", "shout"}})
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
	if !slices.Contains(offered, "trip") {
		t.Fatalf("the model was offered %v, want the composite among them", offered)
	}
	trip := run.Calls[0]
	if trip.Status != "ok" {
		t.Fatalf("the composite's call: %s %v", trip.Status, trip.Error)
	}
	var subs []string
	for _, s := range trip.Subs {
		subs = append(subs, s.ID+" "+s.Name+" "+s.Status)
	}
	if want := []string{trip.ID + "-sub-1 add ok", trip.ID + "-sub-2 fail error", trip.ID + "-sub-3 shout ok"}; !slices.Equal(subs, want) {
		t.Errorf("the composite's record lists its sub-calls %q, want %q", subs, want)
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

// A tools file's callbacks and retry rules hold for a run's calls: a cache hit answers
// the second call without running the command, formatOutput's pointer is what the model
// is shown, a failure whose message the rule names is retried, and one it does not name
// is not.
func TestToolsFileCallbacksAndRetryRulesInARun(t *testing.T) {
	b := setup(t, map[string]string{"main": plannerAnswerScript})
	dir := t.TempDir()
	log, state := filepath.Join(dir, "runs.log"), filepath.Join(dir, "flaky.state")
	obj := map[string]any{"type": "object"}
	rule := map[string]any{"maxRetries": 2, "initialBackoff": "10ms", "when": map[string]any{"message": "temporarily unavailable"}}
	file := map[string]any{"tools": []map[string]any{
		{"name": "lookup", "safe": true, "parameters": obj,
			"command":   map[string]any{"argv": []string{"/bin/sh", "-c", `echo run >> "$LOG"; cat`}, "env": map[string]string{"LOG": log}},
			"callbacks": map[string]any{"beforeCall": map[string]any{"cache": map[string]any{"key": []string{"/city"}, "ttl": "1m"}}, "formatOutput": map[string]any{"pointer": "/city"}}},
		{"name": "flaky", "safe": true, "parameters": obj, "retry": rule,
			"command": map[string]any{"argv": []string{"/bin/sh", "-c", `if [ ! -f "$STATE" ]; then : > "$STATE"; echo "temporarily unavailable" >&2; exit 75; fi; echo '"fine"'`},
				"env": map[string]string{"STATE": state}}},
		{"name": "broken", "safe": true, "parameters": obj, "retry": rule,
			"command": map[string]any{"argv": []string{"/bin/sh", "-c", `echo "permanently broken" >&2; exit 75`}}},
	}}
	serveToolsFile(t, b, dir, file)

	model := &sequenceModel{answers: []provider.Message{
		{ToolCalls: []provider.ToolCall{callOf("l1", "lookup", `{"city":"Paris","n":1}`), callOf("f", "flaky", `{}`), callOf("x", "broken", `{}`)}},
		{ToolCalls: []provider.ToolCall{callOf("l2", "lookup", `{"city":"Paris","n":2}`)}},
		{Text: "done"},
	}}
	b.swapPlanner(t, Config{Models: map[string]provider.Model{"main": model}, DefaultModel: "main"})
	run, err := b.p.Start(b.ctx, StartRequest{Input: "look it up", Tools: []string{"lookup", "flaky", "broken"}})
	if err != nil {
		t.Fatal(err)
	}
	run = waitRun(t, b, run.ID)
	if run.Status != StatusDone || run.Answer != "done" || len(run.Calls) != 4 {
		t.Fatalf("the run ended %s/%s (%s) with %q and %d calls", run.Status, run.Termination, run.Detail, run.Answer, len(run.Calls))
	}
	byID := map[string]*CallRecord{}
	for _, c := range run.Calls {
		byID[c.ModelCallID] = c
	}
	for _, id := range []string{"l1", "l2"} {
		if c := byID[id]; c.Status != "ok" || string(c.Output) != `"Paris"` {
			t.Errorf("lookup %s: %s %s, want ok \"Paris\" (formatOutput's pointer)", id, c.Status, c.Output)
		}
	}
	if got, _ := os.ReadFile(log); strings.Count(string(got), "run") != 1 {
		t.Errorf("the command ran %d times, want once: the second call is a cache hit", strings.Count(string(got), "run"))
	}
	if c := byID["f"]; c.Status != "ok" || c.Attempts != 2 {
		t.Errorf("flaky: %s after %d attempts, want ok after 2 (its message matches the rule)", c.Status, c.Attempts)
	}
	if c := byID["x"]; c.Status != "error" || c.Attempts != 1 {
		t.Errorf("broken: %s after %d attempts, want error after 1 (its message does not match)", c.Status, c.Attempts)
	}
	// The model was shown the projected output.
	if got := model.request(t, 1).Messages; !strings.Contains(string(lastResult(got, "lookup")), `Paris`) ||
		strings.Contains(string(lastResult(got, "lookup")), `"n"`) {
		t.Errorf("the model saw %s for lookup, want the projection", lastResult(got, "lookup"))
	}
}

// lastResult is the content of the last result of tool in msgs.
func lastResult(msgs []provider.Message, tool string) json.RawMessage {
	var out json.RawMessage
	for _, m := range msgs {
		for _, r := range m.ToolResults {
			if r.Name == tool {
				out = r.Content
			}
		}
	}
	return out
}

// serveToolsFile writes file (a tools file's JSON) in dir and serves it from an executor
// of its own, "file", until the test ends, once the planner's catalog lists its tools.
func serveToolsFile(t *testing.T, b *testBundle, dir string, file map[string]any) {
	t.Helper()
	plannertest.StartToolsFile(t, b.ctx, b.srv, b.cfg, dir, file)
	for _, entry := range file["tools"].([]map[string]any) {
		name := entry["name"].(string)
		natstest.Eventually(t, waitTimeout, "the catalog to list "+name, func() bool { _, ok := b.p.cat.get(name); return ok })
	}
}
