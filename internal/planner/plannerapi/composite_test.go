package plannerapi

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toolfleet/toolfleet/internal/planner"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/internal/testsupport/plannertest"
	"github.com/toolfleet/toolfleet/pkg/client"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/executor"
)

// tidyScript calls tidy, a composite, with a sub-call of delete_all (unsafe: it waits
// for an approval) and one of add, then answers.
const tidyScript = `
steps:
  - calls: [{name: tidy, arguments: {calls: [{name: delete_all, args: {where: staging}}, {name: add, args: {a: 2, b: 2}}]}}]
  - text: tidied
`

// A sub-call of a run's composite call that waits for an approval is an approval like
// any call's: GET /v1/approvals lists it under its own id (<call>-sub-1), naming its
// composite call; the run shows it waiting in the composite call's record; another role
// of the tenant may not answer it (403), another tenant does not see it (404); the run
// owner's approval lets it run, and the composite's result carries its output.
func TestSubCallApprovalIsListedAndAnswered(t *testing.T) {
	b, api := tidyFleet(t, tidyScript)
	runID := startRun(t, api, "acme-admin", map[string]any{"input": "tidy up", "tools": []string{"tidy", "delete_all", "add"}})
	a := awaitSubCallApproval(t, api)
	var page planner.ApprovalPage
	parent := strings.TrimSuffix(a.CallID, "-sub-1")
	if a.RunID != runID || a.Tool != "delete_all" || a.ParentCallID != parent || parent == a.CallID || a.Status != planner.ApprovalPending ||
		string(a.Arguments) != `{"where":"staging"}` || a.Caller != (events.Identity{Tenant: "acme", Role: "admin"}) ||
		!slices.Equal(a.AnswerableBy.Roles, []string{"admin"}) {
		t.Fatalf("the sub-call's approval: %+v", a)
	}
	run, err := b.p.Get(b.ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	if c := run.Calls[0]; c.ID != parent || c.Status != string(planner.CallPending) || len(c.Subs) != 2 ||
		c.Subs[0].ID != a.CallID || c.Subs[0].Status != string(planner.CallAwaitingApproval) || c.Subs[0].ApprovalRequestedAt == nil {
		t.Fatalf("the run's composite call while its sub-call waits: %+v, subs %+v", c, c.Subs)
	}

	status, body := apiCall(t, api, "POST", "/v1/approvals/"+a.CallID, "acme-user", map[string]any{"decision": "approve"})
	wantStatus(t, "acme's user approving the sub-call", status, body, http.StatusForbidden, `role "user" may not`)
	if status, body := apiCall(t, api, "POST", "/v1/approvals/"+a.CallID, "globex-admin", map[string]any{"decision": "approve"}); status != http.StatusNotFound {
		t.Fatalf("globex's admin approving the sub-call: %d %v; want 404", status, body)
	}
	if status, body := apiCall(t, api, "POST", "/v1/approvals/"+a.CallID, "acme-admin", map[string]any{"decision": "approve"}); status != http.StatusAccepted {
		t.Fatalf("the owner's approval of the sub-call: %d %v", status, body)
	}
	run = b.wait(t, runID)
	c := run.Calls[0]
	if run.Answer != "tidied" || c.Status != string(events.StatusOK) || !strings.Contains(string(c.Output), `"deleted":{"where":"staging"}`) ||
		!strings.Contains(string(c.Output), `"sum":4`) {
		t.Fatalf("the run ended %s with %q; the composite call %s %s %+v", run.Termination, run.Answer, c.Status, c.Output, c.Error)
	}
	if s := c.Subs[0]; s.Status != string(events.StatusOK) || s.Approval == nil || s.Approval.Decision != events.DecisionApprove ||
		s.Approval.By != "acme/admin" {
		t.Fatalf("the sub-call's record: %+v (approval %+v)", s, s.Approval)
	}
	natstest.Eventually(t, waitTimeout, "the approval to be listed as answered", func() bool {
		getJSON(t, api, "/v1/approvals?status=answered", "acme-admin", &page)
		return len(page.Approvals) == 1
	})
	if a := page.Approvals[0]; a.Status != planner.ApprovalApproved || a.ParentCallID != parent {
		t.Fatalf("the answered approval: %+v", a)
	}
}

// tidyFleet serves, beside the fleet's tools, a tools file's composites tidy (over
// delete_all and add) and tidy_soon (the same, whose one attempt lasts 3s), and the API
// with tokens of acme's admin and user and of globex's admin; runs use script.
func tidyFleet(t *testing.T, script string) (*testBundle, *httptest.Server) {
	t.Helper()
	b, api, _ := tidyFleetStoppable(t, script)
	return b, api
}

// tidyFleetStoppable is tidyFleet whose composites' executor stops when stopFile is
// called, handing back at once the calls it holds.
func tidyFleetStoppable(t *testing.T, script string) (b *testBundle, api *httptest.Server, stopFile func()) {
	t.Helper()
	b = setup(t, map[string]string{"main": script})
	stopFile = plannertest.StartToolsFile(t, b.ctx, b.srv, b.cfg, t.TempDir(), map[string]any{"tools": []map[string]any{
		{"name": "tidy", "description": "Tidies up.", "safe": true, "composite": map[string]any{"tools": []string{"delete_all", "add"}}},
		{"name": "tidy_soon", "description": "Tidies up, or gives up.", "safe": true, "timeout": "3s", "retry": map[string]any{"maxRetries": 0},
			"composite": map[string]any{"tools": []string{"delete_all", "add"}}},
	}}, executor.WithGracePeriod(0))
	for _, name := range []string{"tidy", "tidy_soon"} {
		natstest.Eventually(t, waitTimeout, "the catalog to list "+name, func() bool { _, ok := b.p.Tool(name); return ok })
	}
	file := filepath.Join(t.TempDir(), "tokens.json")
	if err := os.WriteFile(file, []byte(`[{"token":"acme-admin","tenant":"acme","role":"admin"},
		{"token":"acme-user","tenant":"acme","role":"user"},{"token":"globex-admin","tenant":"globex","role":"admin"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := LoadTokens(file)
	if err != nil {
		t.Fatal(err)
	}
	api = httptest.NewServer(Handler(b.p, Auth{Tokens: tokens}))
	t.Cleanup(api.Close)
	return b, api, stopFile
}

// awaitSubCallApproval waits until acme's admin has one approval pending, and returns it.
func awaitSubCallApproval(t *testing.T, api *httptest.Server) planner.ApprovalItem {
	t.Helper()
	var page planner.ApprovalPage
	natstest.Eventually(t, waitTimeout, "the sub-call's approval to be listed", func() bool {
		getJSON(t, api, "/v1/approvals?status=pending", "acme-admin", &page)
		return len(page.Approvals) == 1
	})
	return page.Approvals[0]
}

// A composite call that ends while its sub-call waits for an approval — its own cancel,
// its time running out, or its run canceled — cancels the sub-call as its caller: the
// executor answers it canceled, and the owner's approval, sent afterwards straight over
// NATS (the API refuses it, 409), runs nothing. Before, the sub-call stayed parked until
// its approval expired, the run recording it canceled, and that approval ran delete_all
// after its composite and its run had ended (or, past the sub-call's deadline, answered
// it timeout).
func TestAnEndedCompositeCancelsItsSubCall(t *testing.T) {
	for _, tt := range []struct {
		name, tool string
		end        func(t *testing.T, b *testBundle, api *httptest.Server, owner *client.Client, runID, callID string)
		says       string
	}{
		{"its call canceled", "tidy", func(t *testing.T, b *testBundle, _ *httptest.Server, owner *client.Client, _, callID string) {
			if err := owner.Cancel(b.ctx, "tidy", callID); err != nil {
				t.Fatal(err)
			}
		}, "was canceled"},
		{"its time ran out", "tidy_soon", func(*testing.T, *testBundle, *httptest.Server, *client.Client, string, string) {}, "ran out of time"},
		{"its run canceled", "tidy", func(t *testing.T, _ *testBundle, api *httptest.Server, _ *client.Client, runID, _ string) {
			if status, body := apiCall(t, api, "POST", "/v1/runs/"+runID+"/cancel", "acme-admin", nil); status != http.StatusOK {
				t.Fatalf("cancel the run: %d %v", status, body)
			}
		}, "canceled"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b, api := tidyFleet(t, strings.ReplaceAll(tidyScript, "name: tidy,", "name: "+tt.tool+","))
			owner, err := client.New(b.nc, client.WithIdentity(events.Identity{Tenant: "acme", Role: "admin"}))
			if err != nil {
				t.Fatal(err)
			}
			runID := startRun(t, api, "acme-admin", map[string]any{"input": "tidy up", "tools": []string{tt.tool, "delete_all", "add"}})
			a := awaitSubCallApproval(t, api)
			tt.end(t, b, api, owner, runID, a.ParentCallID)
			run := b.wait(t, runID)
			if c := run.Calls[0]; c.Status == string(events.StatusOK) || c.Subs[0].Status != string(events.StatusCanceled) {
				t.Fatalf("the composite call %s %+v, its sub-call %s", c.Status, c.Error, c.Subs[0].Status)
			}
			if status, body := apiCall(t, api, "POST", "/v1/approvals/"+a.CallID, "acme-admin", map[string]any{"decision": "approve"}); status != http.StatusConflict {
				t.Fatalf("the API's approval of the ended sub-call: %d %v; want 409", status, body)
			}
			if err := owner.Answer(b.ctx, "delete_all", a.CallID, events.ApprovalAnswer{Decision: events.DecisionApprove}); err != nil {
				t.Fatal(err)
			}
			var res events.Result
			natstest.Eventually(t, waitTimeout, "the sub-call's result", func() bool {
				var found bool
				res, found, err = owner.StoredResult(b.ctx, runID, a.CallID)
				return err == nil && found
			})
			if res.Status != events.StatusCanceled || res.Error == nil || !strings.Contains(res.Error.Message, "canceled by acme/admin") ||
				!strings.Contains(res.Error.Message, tt.says) {
				t.Fatalf("the sub-call's result: %s %+v (output %s); want canceled by acme/admin, saying %q", res.Status, res.Error, res.Output, tt.says)
			}
		})
	}
}

// A canceled run cancels its composite calls' open sub-calls itself, with the identity of
// whoever canceled it: a sub-call waiting for an approval whose composite runs nowhere
// (its executor stopped and handed it back) is answered canceled, and the owner's
// approval sent afterwards over NATS runs nothing. Before, only the composite call got a
// cancel, and that approval ran delete_all after its run had ended.
func TestACanceledRunCancelsItsCompositesSubCalls(t *testing.T) {
	b, api, stopFile := tidyFleetStoppable(t, tidyScript)
	owner, err := client.New(b.nc, client.WithIdentity(events.Identity{Tenant: "acme", Role: "admin"}))
	if err != nil {
		t.Fatal(err)
	}
	runID := startRun(t, api, "acme-admin", map[string]any{"input": "tidy up", "tools": []string{"tidy", "delete_all", "add"}})
	a := awaitSubCallApproval(t, api)
	stopFile()
	if status, body := apiCall(t, api, "POST", "/v1/runs/"+runID+"/cancel", "acme-user", nil); status != http.StatusForbidden {
		t.Fatalf("acme's user canceling acme's admin's run: %d %v", status, body)
	}
	if status, body := apiCall(t, api, "POST", "/v1/runs/"+runID+"/cancel", "acme-admin", map[string]any{"reason": "enough"}); status != http.StatusOK {
		t.Fatalf("cancel the run: %d %v", status, body)
	}
	if err := owner.Answer(b.ctx, "delete_all", a.CallID, events.ApprovalAnswer{Decision: events.DecisionApprove}); err != nil {
		t.Fatal(err)
	}
	var res events.Result
	natstest.Eventually(t, waitTimeout, "the sub-call's result", func() bool {
		var found bool
		res, found, err = owner.StoredResult(b.ctx, runID, a.CallID)
		return err == nil && found
	})
	if res.Status != events.StatusCanceled || res.Error == nil || !strings.Contains(res.Error.Message, "canceled by acme/admin: the run was canceled: enough") {
		t.Fatalf("the sub-call's result: %s %+v (output %s); want canceled by acme/admin with the run", res.Status, res.Error, res.Output)
	}
}
