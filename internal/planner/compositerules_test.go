package planner

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// compositeScript calls combo with a note sub-call and an add sub-call, then answers.
const compositeScript = `
steps:
  - calls: [{name: combo, arguments: {calls: [{name: note, args: {text: hi}}, {name: add, args: {a: 1, b: 2}}]}}]
  - text: done
`

// compositeBundle is a bundle whose fleet also serves note, which counts its runs, and
// a tools file's composites: combo over note and add, and outer over combo.
type compositeBundle struct {
	*testBundle
	noted atomic.Int32
}

func setupComposite(t *testing.T, scripts map[string]string) *compositeBundle {
	t.Helper()
	cb := &compositeBundle{testBundle: setup(t, scripts)}
	startExecutor(t, cb.testBundle, tools.Definition{Name: "note", Description: "Notes a text.", Safe: true,
		Parameters: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false}`)},
		func(_ context.Context, args json.RawMessage) (any, error) { cb.noted.Add(1); return args, nil })
	serveToolsFile(t, cb.testBundle, t.TempDir(), map[string]any{"tools": []map[string]any{
		{"name": "combo", "description": "Several tools in one call.", "safe": true, "composite": map[string]any{"tools": []string{"note", "add"}}},
		{"name": "outer", "description": "Composites in one call.", "safe": true, "composite": map[string]any{"tools": []string{"combo"}}},
	}})
	return cb
}

// noSubCall fails t when the fleet stored a result for the sub-call id of run: the
// composite call never went out, so no sub-call did either.
func (b *testBundle) noSubCall(t *testing.T, runID, id string) {
	t.Helper()
	subject, err := events.ResultSubject("", runID, id)
	if err != nil {
		t.Fatal(err)
	}
	s, err := b.js.Stream(b.ctx, b.cfg.ResultStream(subject))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetLastMsgForSubject(b.ctx, subject); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Fatalf("sub-call %s has a stored result (%v): it went to the fleet", id, err)
	}
}

// wantRefusedComposite fails t unless the run's first call was refused by the planner
// with code, its message saying each of says, and the model was shown the refusal.
func wantRefusedComposite(t *testing.T, run *Run, code tools.Code, says ...string) {
	t.Helper()
	c := run.Calls[0]
	if !c.Local || c.Error == nil || c.Error.Code != code {
		t.Fatalf("the composite call: %s %+v (local %v), want refused with %s", c.Status, c.Error, c.Local, code)
	}
	for _, s := range says {
		if !strings.Contains(c.Error.Message, s) {
			t.Errorf("the refusal %q does not say %q", c.Error.Message, s)
		}
	}
	if seen, isErr := toolResultSeen(t, run); !isErr || !strings.Contains(seen, "sub-call") {
		t.Errorf("the model saw %s (error %v), want the refusal naming the sub-call", seen, isErr)
	}
}

// A composite is a caller like any other: each sub-call of a run's composite call is
// held to the run's tools. With activeTools [combo], combo's note sub-call is refused
// before anything goes out — toolChoice naming combo does not widen that — with a
// message naming the sub-call, and note never runs; with note among the run's tools the
// same call runs it. A composite inside a composite is checked down to its sub-calls.
func TestCompositeSubCallsObeyTheRunsTools(t *testing.T) {
	cb := setupComposite(t, map[string]string{"main": compositeScript, "nested": `
steps:
  - calls: [{name: outer, arguments: {calls: [{name: combo, args: {calls: [{name: note, args: {text: deep}}]}}]}}]
  - text: done
`})

	run := cb.run(t, StartRequest{Input: "note it", Tools: []string{"combo", "note", "add"}, ActiveTools: []string{"combo", "add"}, ToolChoice: "combo"})
	wantRefusedComposite(t, run, tools.CodeNotAllowed, `combo was not run`, `sub-call 1 calls "note"`, "not among this run's tools")
	if n := cb.noted.Load(); n != 0 {
		t.Fatalf("note ran %d times outside the run's tools", n)
	}
	cb.noSubCall(t, run.ID, events.SubCallID(run.Calls[0].ID, 1)) // add, allowed, did not run either

	run = cb.run(t, StartRequest{Input: "note it", Tools: []string{"combo", "note", "add"}, ToolChoice: "combo"})
	c := run.Calls[0]
	if c.Status != string(events.StatusOK) || !strings.Contains(string(c.Output), `"hi"`) || cb.noted.Load() != 1 {
		t.Fatalf("with note among the run's tools: %s %s %+v, note ran %d times", c.Status, c.Output, c.Error, cb.noted.Load())
	}
	if len(c.Subs) != 2 || c.Subs[0].Name != "note" || c.Subs[0].Status != string(events.StatusOK) || c.Subs[1].Status != string(events.StatusOK) {
		t.Fatalf("sub-calls %+v", c.Subs)
	}

	run = cb.run(t, StartRequest{Input: "nest", Model: "nested", Tools: []string{"outer", "combo"}})
	wantRefusedComposite(t, run, tools.CodeNotAllowed, `outer was not run`, `sub-call 1.1 calls "note"`)
	run = cb.run(t, StartRequest{Input: "nest", Model: "nested", Tools: []string{"outer", "combo", "note"}})
	if c := run.Calls[0]; c.Status != string(events.StatusOK) || !strings.Contains(string(c.Output), "deep") || cb.noted.Load() != 2 ||
		len(c.Subs) != 2 || c.Subs[1].ID != c.ID+"-sub-1-sub-1" || c.Subs[1].Status != string(events.StatusOK) {
		t.Fatalf("nested, allowed: %s %s %+v, subs %+v, note ran %d times", c.Status, c.Output, c.Error, c.Subs, cb.noted.Load())
	}
}

// The run's policy hook is asked about a composite call and, in parallel, about each of
// its sub-calls, under the sub-call's own id, tool and arguments, with its composite in
// the metadata: a deny of a sub-call refuses the composite call, naming the sub-call,
// and nothing runs; a modification rewrites that sub-call's arguments inside the
// composite's, and the sub-call runs with them. The decisions are stored with the
// step's record: another planner reads them.
func TestRunPolicyHookAsksAboutEachSubCall(t *testing.T) {
	cb := setupComposite(t, map[string]string{"main": compositeScript})
	var mu sync.Mutex
	asked := map[string][]events.PolicyRequest{} // by run
	sub, err := cb.nc.Subscribe("hooks.composite", func(m *nats.Msg) {
		var req events.PolicyRequest
		_ = json.Unmarshal(m.Data, &req)
		mu.Lock()
		asked[req.RunID] = append(asked[req.RunID], req)
		mu.Unlock()
		answer := map[string]string{
			"deny":   `{"decision":"deny","reason":"no notes today"}`,
			"modify": `{"decision":"modify","reason":"louder","arguments":{"text":"from the hook"}}`,
		}[req.Metadata["case"]]
		if req.Tool != "note" || answer == "" {
			answer = `{"decision":"allow"}`
		}
		_ = m.Respond([]byte(answer))
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := cb.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	start := func(which string) *Run {
		return cb.run(t, StartRequest{Input: "note it", Tools: []string{"combo", "note", "add"}, Metadata: map[string]string{"case": which},
			PolicyHook: &PolicyHook{Subject: "hooks.composite"}})
	}

	t.Run("asked", func(t *testing.T) {
		run := start("allow")
		c := run.Calls[0]
		if c.Status != string(events.StatusOK) {
			t.Fatalf("combo: %s %+v", c.Status, c.Error)
		}
		mu.Lock()
		reqs := asked[run.ID]
		mu.Unlock()
		got := map[string]events.PolicyRequest{}
		for _, r := range reqs {
			got[r.CallID] = r
		}
		note, add := got[c.ID+"-sub-1"], got[c.ID+"-sub-2"]
		if len(reqs) != 3 || got[c.ID].Tool != "combo" || note.Tool != "note" || add.Tool != "add" {
			t.Fatalf("the hook was asked %+v; want combo, then note and add as %s-sub-1 and -sub-2", reqs, c.ID)
		}
		if string(note.Arguments) != `{"text":"hi"}` || !note.Validated || note.Metadata[events.MetaCompositeTool] != "combo" ||
			note.Metadata[events.MetaCompositeCall] != c.ID || note.Metadata["case"] != "allow" || note.Level != events.PolicyLevelRun {
			t.Errorf("the request about note: %+v", note)
		}
		if len(c.Subs) != 2 || len(c.Subs[0].Policy) != 1 || c.Subs[0].Policy[0].Decision != events.PolicyAllow || len(c.Policy) != 1 {
			t.Errorf("records: combo %+v, subs %+v", c.Policy, c.Subs)
		}
	})
	t.Run("deny", func(t *testing.T) {
		before := cb.noted.Load()
		run := start("deny")
		wantRefusedComposite(t, run, tools.CodeDenied, "combo was not run", "sub-call 1", `"note"`, "no notes today")
		if run.Calls[0].Status != string(events.StatusDenied) || cb.noted.Load() != before {
			t.Fatalf("combo %s; note ran %d times", run.Calls[0].Status, cb.noted.Load()-before)
		}
		cb.noSubCall(t, run.ID, events.SubCallID(run.Calls[0].ID, 1))
	})
	t.Run("modify", func(t *testing.T) {
		run := start("modify")
		c := run.Calls[0]
		if c.Status != string(events.StatusOK) || !strings.Contains(string(c.Output), "from the hook") || strings.Contains(string(c.Output), `"hi"`) {
			t.Fatalf("combo: %s %s %+v", c.Status, c.Output, c.Error)
		}
		if !strings.Contains(string(c.Arguments), "from the hook") || !strings.Contains(string(c.ArgumentsOriginal), `"hi"`) {
			t.Errorf("arguments %s, the model's %s", c.Arguments, c.ArgumentsOriginal)
		}
		// Stored with the step's record: a planner started now reads the decisions.
		p := cb.swapPlanner(t, Config{Models: map[string]provider.Model{"main": scriptedModel(t, compositeScript)}, DefaultModel: "main"})
		stored, err := p.Get(cb.ctx, run.ID)
		if err != nil {
			t.Fatal(err)
		}
		s := stored.Calls[0].Subs
		if len(s) != 2 || len(s[0].Policy) != 1 || s[0].Policy[0].Decision != events.PolicyModify ||
			string(s[0].Policy[0].ArgumentsModified) != `{"text":"from the hook"}` || s[0].Status != string(events.StatusOK) {
			t.Fatalf("the stored sub-calls %+v", s)
		}
	})
}
