package executor_test

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/executor"
)

// A tool's policy hook is asked before its call is parked for approval: a modification
// is what the approver is asked about and what runs once approved, and the result
// records both decisions; a deny answers the call without asking anyone to approve it.
func TestPolicyHookBeforeApproval(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sub, err := b.nc.Subscribe("hooks.writes", func(m *nats.Msg) {
		var req events.PolicyRequest
		_ = json.Unmarshal(m.Data, &req)
		answer := `{"decision":"modify","reason":"only under /tmp","arguments":{"path":"/tmp/a.txt","text":"hi"}}`
		if strings.Contains(string(req.Arguments), "passwd") {
			answer = `{"decision":"deny","reason":"never"}`
		}
		_ = m.Respond([]byte(answer))
	})
	must(t, err)
	must(t, b.nc.Flush()) // the hook listens before anyone asks
	defer sub.Unsubscribe()
	var written sync.Map
	b.start(t, writeRegistry(t, &written), executor.WithApprovalTimeout(time.Minute),
		executor.WithPolicyHook("write_file", events.Hook{Subject: "hooks.writes"}))
	requests := subscribe(t, b, "toolfleet.event.approval.requested.write_file.*")

	b.call(t, "write_file", "pol-1", "run-pol", `{"path":"a.txt","text":"hi"}`)
	req := awaitRequest(t, requests)
	if req.CallID != "pol-1" || string(req.Arguments) != `{"path":"/tmp/a.txt","text":"hi"}` {
		t.Fatalf("approval asked for %s with %s, want the policy's arguments", req.CallID, req.Arguments)
	}
	b.answer(t, req, events.ApprovalAnswer{Decision: events.DecisionApprove, By: "ann"})
	res := b.results.one(t, "pol-1")
	if res.Status != events.StatusOK {
		t.Fatalf("result %+v", res)
	}
	if w, _ := written.Load("pol-1"); w != "/tmp/a.txt=hi" {
		t.Fatalf("wrote %v", w)
	}
	if p := res.Policy; p == nil || p.Decision != events.PolicyModify || string(p.ArgumentsOriginal) != `{"path":"a.txt","text":"hi"}` ||
		res.Approval == nil || res.Approval.ClaimedBy != "ann" {
		t.Fatalf("policy %+v, approval %+v", res.Policy, res.Approval)
	}

	b.call(t, "write_file", "pol-2", "run-pol", `{"path":"/etc/passwd","text":"x"}`)
	res = b.results.one(t, "pol-2")
	if res.Status != events.StatusDenied || !strings.Contains(res.Error.Message, "never") || res.Approval != nil {
		t.Fatalf("result %+v (error %+v)", res, res.Error)
	}
	if _, ok := written.Load("pol-2"); ok {
		t.Fatal("the denied call ran")
	}
	if m, err := requests.NextMsg(200 * time.Millisecond); err == nil {
		t.Fatalf("an approval was asked for a denied call: %s", m.Data)
	}
}

// A policy hook is checked when the executor is built.
func TestPolicyHookOptionIsChecked(t *testing.T) {
	b := setup(t)
	for _, opt := range []executor.Option{
		executor.WithPolicyHook("echo", events.Hook{Subject: "$SYS.x"}),
		executor.WithPolicyHook("echo", events.Hook{Subject: "hooks.p", OnError: "stop"}),
		executor.WithPolicyHook("not_served", events.Hook{Subject: "hooks.p"}),
	} {
		if _, err := executor.New(b.nc, echoRegistry(t), opt); err == nil {
			t.Error("no error")
		}
	}
}
