package planner

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/internal/testsupport/plannertest"
	"github.com/toolfleet/toolfleet/pkg/executor"
	"github.com/toolfleet/toolfleet/pkg/tools"
	"github.com/toolfleet/toolfleet/pkg/toolsfile"
)

// contextScript prints the run context the command was given, or "nothing" when
// neither the variable nor a file is there: the same program for both tools.
const contextScript = `if [ -n "$TOOLFLEET_RUN_CONTEXT" ]; then cat "$TOOLFLEET_RUN_CONTEXT"; else echo '"nothing"'; fi`

// runContextTools writes a tools file with a command tool that asks for the run context
// and one that does not, and serves it, with two Go tools (one asking, one not) that
// keep the CallInfo they are given, from an executor until the test ends.
func runContextTools(t *testing.T, b *testBundle) (goSeen map[string]*tools.RunContext, mu *sync.Mutex) {
	t.Helper()
	dir := t.TempDir()
	file := map[string]any{"tools": []map[string]any{
		{"name": "ctx_reader", "safe": true, "runContext": true, "parameters": map[string]any{"type": "object"},
			"command": map[string]any{"argv": []string{"/bin/sh", "-c", contextScript}}},
		{"name": "ctx_blind", "safe": true, "parameters": map[string]any{"type": "object"},
			"command": map[string]any{"argv": []string{"/bin/sh", "-c", contextScript}, "passEnv": []string{"TOOLFLEET_RUN_CONTEXT"}}},
	}}
	data, _ := json.Marshal(file)
	path := filepath.Join(dir, "tools.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	// The executor's own environment names a file: a tool that did not ask must not
	// get it passed through either.
	t.Setenv("TOOLFLEET_RUN_CONTEXT", path)
	specs, err := toolsfile.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	reg := tools.NewRegistry()
	if err := toolsfile.Register(reg, specs); err != nil {
		t.Fatal(err)
	}
	goSeen, mu = map[string]*tools.RunContext{}, &sync.Mutex{}
	keep := func(name string) tools.Func {
		return func(ctx context.Context, _ json.RawMessage) (any, error) {
			info, _ := tools.CallInfoFrom(ctx)
			mu.Lock()
			goSeen[name] = info.Run
			mu.Unlock()
			return "kept", nil
		}
	}
	for _, d := range []tools.Definition{
		{Name: "ctx_go", Safe: true, RunContext: true, Parameters: json.RawMessage(`{"type":"object"}`)},
		{Name: "ctx_go_blind", Safe: true, Parameters: json.RawMessage(`{"type":"object"}`)},
	} {
		if err := reg.AddFunc(d, keep(d.Name)); err != nil {
			t.Fatal(err)
		}
	}
	ex, err := executor.New(b.srv.Connect(), reg, executor.WithStreamConfig(b.cfg), executor.WithLogger(zerolog.Nop()))
	if err != nil {
		t.Fatal(err)
	}
	plannertest.Serve(t, ex.Run)
	for _, name := range []string{"ctx_reader", "ctx_blind", "ctx_go", "ctx_go_blind"} {
		natstest.Eventually(t, waitTimeout, "the catalog to list "+name, func() bool { _, ok := b.p.cat.get(name); return ok })
	}
	return goSeen, mu
}

// Tools that ask for the run context get the conversation so far (ending with the
// model's message that called them), the step and the run's metadata — a command tool
// in the file TOOLFLEET_RUN_CONTEXT names, a Go tool in CallInfo.Run — and tools that
// did not ask get nothing, not even the executor's own variable of that name. A
// conversation over the claim-check size travels by reference and arrives whole.
func TestRunContextOnlyForToolsThatAsk(t *testing.T) {
	for _, large := range []bool{false, true} {
		t.Run(map[bool]string{false: "inline", true: "by-reference"}[large], func(t *testing.T) {
			b := setup(t, map[string]string{"main": plannerAnswerScript})
			goSeen, mu := runContextTools(t, b)
			all := []provider.ToolCall{callOf("r", "ctx_reader", `{}`), callOf("b", "ctx_blind", `{}`),
				callOf("g", "ctx_go", `{}`), callOf("gb", "ctx_go_blind", `{}`)}
			model := &sequenceModel{answers: []provider.Message{
				{Text: "first a sum", ToolCalls: []provider.ToolCall{callOf("a", "add", `{"a":1,"b":2}`)}},
				{Text: "now the context", ToolCalls: all},
				{Text: "seen"},
			}}
			b.swapPlanner(t, Config{Models: map[string]provider.Model{"main": model}, DefaultModel: "main"})
			input := "the secret plan"
			if large {
				input += strings.Repeat(" and more", b.cfg.WithDefaults().ClaimCheckBytes/9+1)
			}
			run, err := b.p.Start(b.ctx, StartRequest{Input: input, Metadata: map[string]string{"who": "alice"}})
			if err != nil {
				t.Fatal(err)
			}
			run = waitRun(t, b, run.ID)
			if run.Status != StatusDone || run.Answer != "seen" {
				t.Fatalf("the run ended %s/%s (%s) with %q", run.Status, run.Termination, run.Detail, run.Answer)
			}
			outputs := map[string]json.RawMessage{}
			for _, c := range run.Calls {
				if c.Status != "ok" {
					t.Fatalf("call %s of %s: %s %v", c.ID, c.Name, c.Status, c.Error)
				}
				outputs[c.Name] = c.Output
			}
			if got := strings.TrimSpace(string(outputs["ctx_blind"])); got != `"nothing"` {
				t.Fatalf("the command tool that did not ask got %s", got)
			}
			var fromFile tools.RunContext
			if err := json.Unmarshal(outputs["ctx_reader"], &fromFile); err != nil {
				t.Fatalf("the command tool's run context %s: %v", outputs["ctx_reader"], err)
			}
			mu.Lock()
			fromGo, blind := goSeen["ctx_go"], goSeen["ctx_go_blind"]
			mu.Unlock()
			if blind != nil {
				t.Fatalf("the Go tool that did not ask got a run context: %+v", blind)
			}
			if fromGo == nil {
				t.Fatal("the Go tool that asked got no run context")
			}
			for name, rc := range map[string]*tools.RunContext{"command": &fromFile, "go": fromGo} {
				if rc.RunID != run.ID || rc.Step != 1 || rc.Metadata["who"] != "alice" || rc.Omitted != 0 {
					t.Fatalf("the %s tool's run context: run %s step %d metadata %v omitted %d", name, rc.RunID, rc.Step, rc.Metadata, rc.Omitted)
				}
				var msgs []provider.Message
				if err := json.Unmarshal(rc.Messages, &msgs); err != nil {
					t.Fatalf("the %s tool's messages: %v", name, err)
				}
				want := []string{"user:" + input, "assistant:first a sum[call add]", "tool:[result add]",
					"assistant:now the context[call ctx_reader][call ctx_blind][call ctx_go][call ctx_go_blind]"}
				if got := texts(msgs); !slices.Equal(got, want) {
					t.Fatalf("the %s tool's conversation: %.300q, want %.300q", name, got, want)
				}
			}
		})
	}
}
