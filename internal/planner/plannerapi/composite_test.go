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
	"github.com/toolfleet/toolfleet/pkg/events"
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
	b := setup(t, map[string]string{"main": tidyScript})
	plannertest.StartToolsFile(t, b.ctx, b.srv, b.cfg, t.TempDir(), map[string]any{"tools": []map[string]any{
		{"name": "tidy", "description": "Tidies up.", "safe": true, "composite": map[string]any{"tools": []string{"delete_all", "add"}}},
	}})
	natstest.Eventually(t, waitTimeout, "the catalog to list tidy", func() bool { _, ok := b.p.Tool("tidy"); return ok })
	file := filepath.Join(t.TempDir(), "tokens.json")
	if err := os.WriteFile(file, []byte(`[{"token":"acme-admin","tenant":"acme","role":"admin"},
		{"token":"acme-user","tenant":"acme","role":"user"},{"token":"globex-admin","tenant":"globex","role":"admin"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := LoadTokens(file)
	if err != nil {
		t.Fatal(err)
	}
	api := httptest.NewServer(Handler(b.p, Auth{Tokens: tokens}))
	t.Cleanup(api.Close)

	runID := startRun(t, api, "acme-admin", map[string]any{"input": "tidy up", "tools": []string{"tidy", "delete_all", "add"}})
	var page planner.ApprovalPage
	natstest.Eventually(t, waitTimeout, "the sub-call's approval to be listed", func() bool {
		getJSON(t, api, "/v1/approvals", "acme-admin", &page)
		return len(page.Approvals) == 1
	})
	a := page.Approvals[0]
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
