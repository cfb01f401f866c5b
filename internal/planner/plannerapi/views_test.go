package plannerapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/internal/planner"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/client"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/executor"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

const (
	// historyScript calls delete_all (which waits for an approval), then echo, then
	// answers: the approved call's result completes its step, and is stored with the
	// next step's calls.
	historyScript = `
steps:
  - calls: [{name: delete_all, arguments: {where: staging}}]
  - calls: [{name: echo, arguments: {text: after}}]
  - text: done
`
	// nestScript delegates to a nested run of the expiring model, which waits for an
	// approval of risky.
	nestScript = `
steps:
  - calls: [{name: run_agent, arguments: {task: "clean up", tools: [risky, echo], model: expire}}]
  - text: delegated
`
	// expireScript is historyScript with risky, whose approvals expire.
	expireScript = `
steps:
  - calls: [{name: risky, arguments: {}}]
  - calls: [{name: echo, arguments: {text: after}}]
  - text: done
`
)

// viewsServer serves the API of a planner with the history models, for tenant acme,
// and a tool risky whose approvals expire after expiry.
func viewsServer(t *testing.T, expiry time.Duration) (*testBundle, *httptest.Server) {
	t.Helper()
	b := setup(t, map[string]string{"main": answerScript, "history": historyScript, "expire": expireScript,
		"approval": approvalScript, "fails": failScript, "calc": calcScript, "nest": nestScript})
	startExecutor(t, b, tools.Definition{Type: "function", Name: "risky", Description: "Needs approval.",
		Parameters: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, json.RawMessage) (any, error) { return "ran", nil },
		executor.WithApprovalTimeout(expiry))
	srv := httptest.NewServer(Handler(b.p, Auth{Tokens: map[string]events.Identity{HashToken(acmeToken): {Tenant: "acme", Role: "user"}}}))
	t.Cleanup(srv.Close)
	return b, srv
}

// Every answered approval is in the history, whatever the decision, with who answered
// and when: approved (plain and with other arguments), denied, expired, canceled; and
// the runs' views and list items tell a clean run from a denied one.
func TestApprovalHistoryKeepsEveryAnswer(t *testing.T) {
	b, srv := viewsServer(t, 3*time.Second)
	start := func(model string) (string, *planner.CallRecord) {
		id := startRun(t, srv, acmeToken, map[string]any{"input": "clean up " + model, "model": model})
		return id, b.awaitApproval(t, id)
	}
	answer := func(call string, body map[string]any) {
		t.Helper()
		if status, resp := apiCall(t, srv, "POST", "/v1/approvals/"+call, acmeToken, body); status != http.StatusAccepted {
			t.Fatalf("answer %s: %d %v", call, status, resp)
		}
	}
	// The expiring run waits on a person: listed as such until its request's expiry
	// (before the run's own deadline, 5 minutes away).
	expired, expiredCall := start("expire")
	var page planner.RunPage
	natstest.Eventually(t, waitTimeout, "the waiting run listed as awaiting_approval", func() bool {
		page = listRuns(t, srv, acmeToken, "status=awaiting_approval")
		return len(page.Runs) == 1
	})
	if s := page.Runs[0]; s.ID != expired || s.ApprovalDeadline == nil || !s.ApprovalDeadline.Before(s.CreatedAt.Add(time.Minute)) {
		t.Fatalf("the expiring run: %+v, want its approval deadline at its request's expiry", s)
	}
	approved, approvedCall := start("history")
	modified, modifiedCall := start("history")
	denied, deniedCall := start("history")
	canceled, canceledCall := start("history")

	answer(approvedCall.ID, map[string]any{"decision": "approve", "by": "alice"})
	answer(modifiedCall.ID, map[string]any{"decision": "approve", "by": "bob", "arguments": map[string]string{"where": "dev"}})
	answer(deniedCall.ID, map[string]any{"decision": "deny", "reason": "not today"})
	if status, resp := apiCall(t, srv, "POST", "/v1/runs/"+canceled+"/cancel", acmeToken, map[string]string{"reason": "stop"}); status != http.StatusOK {
		t.Fatalf("cancel: %d %v", status, resp)
	}
	for _, id := range []string{approved, modified, denied, canceled, expired} {
		b.wait(t, id)
	}

	var list planner.ApprovalPage
	natstest.Eventually(t, waitTimeout, "five answered approvals", func() bool {
		getJSON(t, srv, "/v1/approvals?status=answered", acmeToken, &list)
		return len(list.Approvals) == 5
	})
	byCall := map[string]planner.ApprovalItem{}
	for _, a := range list.Approvals {
		byCall[a.CallID] = a
		if a.AnsweredAt.IsZero() || a.AnsweredAt.Before(a.RequestedAt) {
			t.Errorf("%s answered at %v, requested at %v", a.CallID, a.AnsweredAt, a.RequestedAt)
		}
	}
	for _, tt := range []struct {
		call                 string
		status               planner.ApprovalStatus
		by, claimedBy, added string
	}{
		{approvedCall.ID, planner.ApprovalApproved, "acme/user", "alice", ""},
		{modifiedCall.ID, planner.ApprovalApproved, "acme/user", "bob", `{"where":"dev"}`},
		{deniedCall.ID, planner.ApprovalDenied, "acme/user", "", ""},
		{canceledCall.ID, planner.ApprovalCanceled, "acme/user", "", ""},
		{expiredCall.ID, planner.ApprovalExpired, "", "", ""},
	} {
		a, ok := byCall[tt.call]
		if !ok || a.Status != tt.status || a.By != tt.by || a.ClaimedBy != tt.claimedBy {
			t.Errorf("approval of %s: %+v (listed %v), want %s by %q (%q)", tt.call, a, ok, tt.status, tt.by, tt.claimedBy)
			continue
		}
		if tt.added != "" && (a.Approval == nil || string(a.Approval.ArgumentsApproved) != tt.added) {
			t.Errorf("approval of %s: %+v, want the approved arguments %s", tt.call, a.Approval, tt.added)
		}
	}
	var all planner.ApprovalPage
	getJSON(t, srv, "/v1/approvals?status=all", acmeToken, &all)
	if len(all.Approvals) != 5 {
		t.Errorf("status=all: %d approvals, want the 5 answered", len(all.Approvals))
	}

	// A call's time parked for approval is reported apart from its duration.
	var view planner.RunView
	getJSON(t, srv, "/v1/runs/"+approved, acmeToken, &view)
	c := view.Calls[0]
	if c.ApprovalWaitMS <= 0 || c.FinishedAt == nil || c.DurationMS != c.FinishedAt.Sub(c.CalledAt).Milliseconds()-c.ApprovalWaitMS {
		t.Errorf("approved call: wait %dms, duration %dms, called %v finished %v", c.ApprovalWaitMS, c.DurationMS, c.CalledAt, c.FinishedAt)
	}
	if view.Outcome != planner.OutcomeClean || view.Status != planner.StatusDone {
		t.Errorf("approved run: %s %s", view.Status, view.Outcome)
	}
	getJSON(t, srv, "/v1/runs/"+denied, acmeToken, &view)
	if view.Outcome != planner.OutcomeDenied || view.Denials != 1 || view.ToolErrors != 0 {
		t.Errorf("denied run: outcome %q, %d denials, %d tool errors", view.Outcome, view.Denials, view.ToolErrors)
	}
	var got []string
	natstest.Eventually(t, waitTimeout, "the denied runs listed by outcome", func() bool {
		got = ids(listRuns(t, srv, acmeToken, "outcome=denied").Runs)
		return slices.Equal(got, []string{denied, expired})
	})
}

// A run whose only call in flight is a nested run waiting on a person waits on that
// person too: its view and its list item show it awaiting_approval, with the nested
// request's expiry as its deadline, and status=awaiting_approval lists it beside the
// nested run; once the approval is answered both run on and complete.
func TestParentOfAWaitingNestedRunAwaitsApproval(t *testing.T) {
	b, srv := viewsServer(t, time.Hour)
	parent := startRun(t, srv, acmeToken, map[string]any{"input": "delegate the clean-up", "model": "nest",
		"tools": []string{"risky", "echo", "run_agent"}})
	child := "c" + parent + "_0_0"
	call := b.awaitApproval(t, child)
	var page planner.RunPage
	natstest.Eventually(t, waitTimeout, "the parent and its nested run listed as awaiting_approval", func() bool {
		page = listRuns(t, srv, acmeToken, "status=awaiting_approval")
		return len(page.Runs) == 2
	})
	byID := map[string]planner.RunSummary{}
	for _, s := range page.Runs {
		byID[s.ID] = s
	}
	p, c := byID[parent], byID[child]
	if p.ApprovalDeadline == nil || c.ApprovalDeadline == nil || !p.ApprovalDeadline.Equal(*c.ApprovalDeadline) {
		t.Fatalf("listed: parent %+v, nested %+v; want both awaiting approval until the nested request's expiry", p, c)
	}
	if p.PendingApprovals != 0 || c.PendingApprovals != 1 {
		t.Errorf("pending approvals: parent %d, nested %d; want 0 and 1 (the request is the nested run's)", p.PendingApprovals, c.PendingApprovals)
	}
	var view planner.RunView
	getJSON(t, srv, "/v1/runs/"+parent, acmeToken, &view)
	if view.Status != planner.StatusAwaitingApproval || view.ApprovalDeadline == nil || !view.ApprovalDeadline.Equal(*p.ApprovalDeadline) {
		t.Fatalf("GET the parent: %s until %v; want awaiting_approval until %v", view.Status, view.ApprovalDeadline, p.ApprovalDeadline)
	}

	if status, resp := apiCall(t, srv, "POST", "/v1/approvals/"+call.ID, acmeToken, map[string]any{"decision": "approve"}); status != http.StatusAccepted {
		t.Fatalf("approve: %d %v", status, resp)
	}
	if run := b.wait(t, parent); run.Termination != planner.TerminationCompleted || run.Answer != "delegated" {
		t.Fatalf("parent ended %s (%s) with %q", run.Termination, run.Detail, run.Answer)
	}
	natstest.Eventually(t, waitTimeout, "no run awaiting approval", func() bool {
		return len(listRuns(t, srv, acmeToken, "status=awaiting_approval").Runs) == 0
	})
	view = planner.RunView{}
	getJSON(t, srv, "/v1/runs/"+parent, acmeToken, &view)
	if view.Status != planner.StatusDone || view.ApprovalDeadline != nil {
		t.Errorf("the parent once done: %s until %v", view.Status, view.ApprovalDeadline)
	}
}

// A run whose time runs out while its call waits for an approval says so.
func TestTimeoutWhileAwaitingApprovalSaysSo(t *testing.T) {
	b, srv := viewsServer(t, time.Hour)
	id := startRun(t, srv, acmeToken, map[string]any{"input": "clean up", "model": "approval", "limits": map[string]any{"timeout": "1s"}})
	b.awaitApproval(t, id)
	var page planner.RunPage
	natstest.Eventually(t, waitTimeout, "the run listed as awaiting approval", func() bool {
		page = listRuns(t, srv, acmeToken, "status=awaiting_approval")
		return len(page.Runs) == 1
	})
	// Its deadline is the run's: the request's expiry is an hour away.
	if d := page.Runs[0].ApprovalDeadline; d == nil || d.After(page.Runs[0].CreatedAt.Add(2*time.Second)) {
		t.Fatalf("approval deadline %v of a run created at %v with a 1s timeout", d, page.Runs[0].CreatedAt)
	}
	run := b.wait(t, id)
	if run.Termination != planner.TerminationTimeout || !strings.Contains(run.Detail, "no approval arrived") {
		t.Fatalf("run ended %s: %q, want timeout saying no approval arrived", run.Termination, run.Detail)
	}
}

// GET /v1/tools counts every call of a tool that has its result, from the broker:
// calls made straight to the fleet (pkg/client) and calls of planner runs alike, and
// none stays in flight once answered.
func TestToolCountsComeFromTheBroker(t *testing.T) {
	b, srv := listServer(t)
	const n = 3
	direct, err := client.New(b.srv.Connect(), client.WithIdentity(events.Identity{Tenant: "acme", Role: "user"}))
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		res, err := direct.Call(b.ctx, client.Request{Tool: "add", Arguments: json.RawMessage(`{"a": 1, "b": ` + strconv.Itoa(i) + `}`)})
		if err != nil || res.Status != events.StatusOK {
			t.Fatalf("direct call %d: %+v %v", i, res, err)
		}
		startRun(t, srv, acmeToken, map[string]any{"input": "add", "model": "calc", "wait": true})
	}
	var list struct {
		Tools []planner.ToolStatus `json:"tools"`
	}
	var add planner.ToolStatus
	natstest.Eventually(t, waitTimeout, "add's 2n calls counted, none in flight", func() bool {
		getJSON(t, srv, "/v1/tools", acmeToken, &list)
		for _, s := range list.Tools {
			if s.Name == "add" {
				add = s
			}
		}
		return add.Recent.Calls == 2*n && add.InFlight == 0 && add.Waiting == 0
	})
	if add.Recent.Errors != 0 || add.Executors < 1 || len(add.ExecutorIDs) == 0 {
		t.Fatalf("add: %+v", add)
	}
}
