package planner

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/executor"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

const policyScript = `
steps:
  - calls: [{name: read_file, arguments: {path: /etc/shadow}}]
  - text: done
`

// policyBundle is a bundle whose fleet also serves read_file, which records the
// arguments of every call it runs, and a policy hook on hooks.policy (a plain nats.go
// subscription, as any language could serve it) that decides by the run's metadata
// "case"; hooks.silent never answers.
type policyBundle struct {
	*testBundle
	mu    sync.Mutex
	ran   []string
	asked []events.PolicyRequest
}

func setupPolicy(t *testing.T, scripts map[string]string) *policyBundle {
	t.Helper()
	pb := &policyBundle{testBundle: setup(t, scripts)}
	startExecutor(t, pb.testBundle, tools.Definition{Name: "read_file", Description: "Reads a file.", Safe: true,
		Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}`)},
		func(_ context.Context, args json.RawMessage) (any, error) {
			pb.mu.Lock()
			pb.ran = append(pb.ran, string(args))
			pb.mu.Unlock()
			return map[string]string{"content": "the file"}, nil
		})
	sub, err := pb.nc.Subscribe("hooks.policy", func(m *nats.Msg) {
		var req events.PolicyRequest
		_ = json.Unmarshal(m.Data, &req)
		pb.mu.Lock()
		pb.asked = append(pb.asked, req)
		pb.mu.Unlock()
		answer := map[string]string{
			"deny":    `{"decision":"deny","reason":"system files are off limits"}`,
			"modify":  `{"decision":"modify","reason":"the public copy","arguments":{"path":"/srv/public.txt"}}`,
			"invalid": `{"decision":"modify","arguments":{"path":42,"mode":"rw"}}`,
		}[req.Metadata["case"]]
		if answer == "" {
			answer = `{"decision":"allow"}`
		}
		_ = m.Respond([]byte(answer))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := pb.nc.Flush(); err != nil { // the hook listens before anyone asks
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	silent, err := pb.nc.Subscribe("hooks.silent", func(*nats.Msg) {})
	if err != nil {
		t.Fatal(err)
	}
	if err := pb.nc.Flush(); err != nil { // the hook listens before anyone asks
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = silent.Unsubscribe() })
	return pb
}

func (pb *policyBundle) runs() []string {
	pb.mu.Lock()
	defer pb.mu.Unlock()
	return append([]string(nil), pb.ran...)
}

// toolResultSeen returns the content the model was shown for the run's first call.
func toolResultSeen(t *testing.T, run *Run) (string, bool) {
	t.Helper()
	for _, m := range run.Messages {
		if m.Role == provider.RoleTool && len(m.ToolResults) > 0 {
			return string(m.ToolResults[0].Content), m.ToolResults[0].IsError
		}
	}
	t.Fatalf("no tool result in the conversation %+v", run.Messages)
	return "", false
}

// A run's policy hook is asked before each call goes to the fleet: a deny is a denied
// result the model sees, with the reason, and the tool never runs; a modification runs
// instead of the model's arguments, and the run records both; a modification the
// schema refuses is not run and says why; a hook that does not answer in time denies,
// unless its onError is allow.
func TestRunPolicyHook(t *testing.T) {
	pb := setupPolicy(t, map[string]string{"main": policyScript})
	start := func(t *testing.T, which string, hook PolicyHook) *Run {
		t.Helper()
		return pb.run(t, StartRequest{Input: "read it", Tools: []string{"read_file"}, Metadata: map[string]string{"case": which},
			PolicyHook: &hook})
	}
	hook := PolicyHook{Subject: "hooks.policy"}

	t.Run("deny", func(t *testing.T) {
		before := len(pb.runs())
		run := start(t, "deny", hook)
		c := run.Calls[0]
		if run.Termination != TerminationCompleted || c.Status != string(events.StatusDenied) || c.Error == nil ||
			c.Error.Code != tools.CodeDenied || !strings.Contains(c.Error.Message, "system files are off limits") {
			t.Fatalf("run %s (%s), call %+v (error %+v)", run.Termination, run.Detail, c, c.Error)
		}
		if len(pb.runs()) != before {
			t.Fatalf("the denied call ran: %v", pb.runs())
		}
		if seen, isErr := toolResultSeen(t, run); !isErr || !strings.Contains(seen, "system files are off limits") || !strings.Contains(seen, "denied") {
			t.Fatalf("the model saw %s (error %v)", seen, isErr)
		}
		if len(c.Policy) != 1 || c.Policy[0].Decision != events.PolicyDeny || c.Policy[0].Level != events.PolicyLevelRun || c.Policy[0].Hook != "hooks.policy" {
			t.Fatalf("policy record %+v", c.Policy)
		}
		pb.mu.Lock()
		req := pb.asked[len(pb.asked)-1]
		pb.mu.Unlock()
		if req.Level != events.PolicyLevelRun || req.RunID != run.ID || req.CallID != c.ID || req.Tool != "read_file" ||
			req.Step != 0 || string(req.Arguments) != `{"path":"/etc/shadow"}` || !req.Validated {
			t.Fatalf("the hook was asked %+v", req)
		}
	})
	t.Run("modify", func(t *testing.T) {
		run := start(t, "modify", hook)
		c := run.Calls[0]
		if c.Status != "ok" || string(c.Arguments) != `{"path":"/srv/public.txt"}` || string(c.ArgumentsOriginal) != `{"path":"/etc/shadow"}` {
			t.Fatalf("call %s arguments %s (original %s)", c.Status, c.Arguments, c.ArgumentsOriginal)
		}
		if ran := pb.runs(); len(ran) == 0 || ran[len(ran)-1] != `{"path":"/srv/public.txt"}` {
			t.Fatalf("the tool ran with %v", ran)
		}
		p := c.Policy
		if len(p) != 1 || p[0].Decision != events.PolicyModify || p[0].Reason != "the public copy" ||
			string(p[0].ArgumentsOriginal) != `{"path":"/etc/shadow"}` || string(p[0].ArgumentsModified) != `{"path":"/srv/public.txt"}` {
			t.Fatalf("policy record %+v", p)
		}
		// The record is the stored run's, as any replica reads it.
		stored, err := pb.p.Get(pb.ctx, run.ID)
		if err != nil {
			t.Fatal(err)
		}
		if sc := stored.Calls[0]; string(sc.Arguments) != string(c.Arguments) || string(sc.ArgumentsOriginal) != string(c.ArgumentsOriginal) || len(sc.Policy) != 1 {
			t.Fatalf("stored call %+v", sc)
		}
	})
	t.Run("modify into invalid arguments", func(t *testing.T) {
		before := len(pb.runs())
		run := start(t, "invalid", hook)
		c := run.Calls[0]
		if c.Status != string(events.StatusInvalid) || c.Error == nil || c.Error.Code != tools.CodeInvalidInput ||
			len(c.Error.Violations) == 0 || !strings.Contains(c.Error.Message, "policy hook hooks.policy modified its arguments") {
			t.Fatalf("call %+v (error %+v)", c, c.Error)
		}
		if len(pb.runs()) != before {
			t.Fatalf("the refused call ran: %v", pb.runs())
		}
	})
	t.Run("timeout denies by default", func(t *testing.T) {
		before := len(pb.runs())
		run := start(t, "allow", PolicyHook{Subject: "hooks.silent", Timeout: tools.Duration(100 * time.Millisecond)})
		c := run.Calls[0]
		if c.Status != string(events.StatusDenied) || !strings.Contains(c.Error.Message, "onError is deny") ||
			len(c.Policy) != 1 || c.Policy[0].Error == "" {
			t.Fatalf("call %+v (error %+v)", c, c.Error)
		}
		if len(pb.runs()) != before {
			t.Fatalf("the call ran: %v", pb.runs())
		}
	})
	t.Run("timeout with onError allow", func(t *testing.T) {
		before := len(pb.runs())
		run := start(t, "allow", PolicyHook{Subject: "hooks.silent", Timeout: tools.Duration(100 * time.Millisecond), OnError: "allow"})
		c := run.Calls[0]
		if c.Status != "ok" || len(c.Policy) != 1 || c.Policy[0].Decision != events.PolicyAllow || c.Policy[0].Error == "" {
			t.Fatalf("call %+v (policy %+v)", c, c.Policy)
		}
		if len(pb.runs()) != before+1 {
			t.Fatalf("the call did not run once: %v", pb.runs())
		}
	})
	t.Run("refused at the start", func(t *testing.T) {
		for _, h := range []PolicyHook{{Subject: "toolfleet.call.read_file"}, {Subject: "hooks.>"}, {Subject: "hooks.p", OnError: "continue"}} {
			if _, err := pb.p.Start(pb.ctx, StartRequest{Input: "go", PolicyHook: &h}); err == nil || !strings.Contains(err.Error(), "policyHook") {
				t.Errorf("hook %+v: %v", h, err)
			}
		}
	})
}

// A nested run is held to its parent's policy hook.
func TestRunPolicyHookHoldsNestedRuns(t *testing.T) {
	pb := setupPolicy(t, map[string]string{
		"main": `
steps:
  - calls: [{name: run_agent, arguments: {task: "read the shadow file", tools: [read_file], model: child}}]
  - text: delegated
`,
		"child": policyScript,
	})
	run := pb.run(t, StartRequest{Input: "delegate", Tools: []string{"read_file", "run_agent"}, Metadata: map[string]string{"case": "deny"},
		PolicyHook: &PolicyHook{Subject: "hooks.policy"}})
	child, err := pb.p.Get(pb.ctx, childID(run.Calls[0].ID))
	if err != nil {
		t.Fatal(err)
	}
	if child.PolicyHook == nil || child.PolicyHook.Subject != "hooks.policy" || len(child.Calls) != 1 ||
		child.Calls[0].Status != string(events.StatusDenied) || len(pb.runs()) != 0 {
		t.Fatalf("child run hook %+v, calls %+v, tool ran %v", child.PolicyHook, child.Calls, pb.runs())
	}
}

// A call the run's policy hook modified asks for its approval with the hook's
// arguments, and an approval (without new arguments) keeps them: the call record shows
// what ran and the model's beside it.
func TestRunPolicyHookThenApproval(t *testing.T) {
	b := setup(t, map[string]string{"main": approvalScript})
	sub, err := b.nc.Subscribe("hooks.deletes", func(m *nats.Msg) {
		_ = m.Respond([]byte(`{"decision":"modify","reason":"dry runs only","arguments":{"where":"staging-copy"}}`))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.nc.Flush(); err != nil { // the hook listens before anyone asks
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	run, err := b.p.Start(b.ctx, StartRequest{Input: "clean up", Tools: []string{"delete_all"}, PolicyHook: &PolicyHook{Subject: "hooks.deletes"}})
	if err != nil {
		t.Fatal(err)
	}
	c := b.awaitApproval(t, run.ID)
	if err := b.p.Approve(b.ctx, c.ID, events.Identity{}, events.ApprovalAnswer{Decision: events.DecisionApprove, By: "ann"}); err != nil {
		t.Fatal(err)
	}
	got := b.wait(t, run.ID).Calls[0]
	if got.Status != "ok" || !strings.Contains(string(got.Output), "staging-copy") ||
		string(got.Arguments) != `{"where":"staging-copy"}` || string(got.ArgumentsOriginal) != `{"where":"staging"}` ||
		got.Approval == nil || got.Approval.ClaimedBy != "ann" || len(got.Policy) != 1 {
		t.Fatalf("call %s output %s arguments %s (original %s), approval %+v, policy %+v",
			got.Status, got.Output, got.Arguments, got.ArgumentsOriginal, got.Approval, got.Policy)
	}
}

// A tool's own policy hook (asked by its executor) is recorded on the run's call from the
// result: its decision, and the arguments that ran beside the model's.
func TestToolPolicyHookInARun(t *testing.T) {
	b := setup(t, map[string]string{"main": `
steps:
  - calls: [{name: greet, arguments: {name: world}}]
  - text: done
`})
	sub, err := b.nc.Subscribe("hooks.greet", func(m *nats.Msg) {
		_ = m.Respond([]byte(`{"decision":"modify","arguments":{"name":"everyone"}}`))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.nc.Flush(); err != nil { // the hook listens before anyone asks
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	startExecutor(t, b, tools.Definition{Name: "greet", Description: "Greets.", Safe: true,
		Parameters: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`)},
		func(_ context.Context, args json.RawMessage) (any, error) { return args, nil },
		executor.WithPolicyHook("greet", events.Hook{Subject: "hooks.greet"}))
	c := b.run(t, StartRequest{Input: "hi", Tools: []string{"greet"}}).Calls[0]
	if c.Status != "ok" || string(c.Arguments) != `{"name":"everyone"}` || string(c.ArgumentsOriginal) != `{"name":"world"}` ||
		len(c.Policy) != 1 || c.Policy[0].Level != events.PolicyLevelTool || c.Policy[0].Decision != events.PolicyModify {
		t.Fatalf("call %s arguments %s (original %s), policy %+v", c.Status, c.Arguments, c.ArgumentsOriginal, c.Policy)
	}
}
