package plannerapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/toolfleet/toolfleet/internal/planner"
	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/internal/testsupport/plannertest"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/executor"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// escalationScript parks its first step for an approval of delete_all (the run is live
// and waits), then calls the admin-only tool.
const escalationScript = `
steps:
  - calls: [{name: delete_all, arguments: {where: staging}}]
  - calls: [{name: admin_only, arguments: {}}]
  - text: done
`

// roleFleet is a bundle whose fleet serves admin_only (roles: [admin]) and counts its
// runs, with an API for acme's admin, user and ops roles and globex's admin; ops is an
// operator role of the planner and of the executors (a fleet's setting).
type roleFleet struct {
	*testBundle
	api *httptest.Server
	ran *atomic.Int32
}

func newRoleFleet(t *testing.T) *roleFleet {
	t.Helper()
	b := setupFleet(t, nil, executor.WithOperatorRoles("ops"))
	ran := new(atomic.Int32)
	startExecutor(t, b, tools.Definition{Type: "function", Name: "admin_only", Description: "Admins only.", Safe: true,
		Parameters: json.RawMessage(`{"type":"object"}`), Roles: []string{"admin"}},
		func(context.Context, json.RawMessage) (any, error) { ran.Add(1); return "secret report", nil }, executor.WithOperatorRoles("ops"))
	b.swapPlanner(t, planner.Config{Models: map[string]provider.Model{"main": plannertest.Model(t, escalationScript),
		"wipe": plannertest.Model(t, "steps:\n  - calls: [{name: admin_wipe, arguments: {}}]\n  - text: wiped\n")},
		DefaultModel: "main", OperatorRoles: []string{"ops"}})
	file := filepath.Join(t.TempDir(), "tokens.json")
	if err := os.WriteFile(file, []byte(`[{"token":"acme-admin","tenant":"acme","role":"admin"},
		{"token":"acme-user","tenant":"acme","role":"user"},{"token":"acme-ops","tenant":"acme","role":"ops"},
		{"token":"globex-admin","tenant":"globex","role":"admin"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := LoadTokens(file)
	if err != nil {
		t.Fatal(err)
	}
	api := httptest.NewServer(Handler(b.p, Auth{Tokens: tokens}))
	t.Cleanup(api.Close)
	return &roleFleet{testBundle: b, api: api, ran: ran}
}

// startAdminRun starts acme's admin's run of escalationScript with tools and waits until
// its first call waits for an approval.
func (f *roleFleet) startAdminRun(t *testing.T, tools ...string) (string, *planner.CallRecord) {
	t.Helper()
	status, body := apiCall(t, f.api, "POST", "/v1/runs", "acme-admin", map[string]any{"input": "report", "tools": tools})
	if status != http.StatusAccepted {
		t.Fatalf("acme admin's start: %d %v", status, body)
	}
	id := body["id"].(string)
	return id, f.awaitApproval(t, id)
}

func wantStatus(t *testing.T, what string, status int, body map[string]any, want int, says string) {
	t.Helper()
	e, _ := body["error"].(map[string]any)
	msg, _ := e["message"].(string)
	if status != want || !strings.Contains(msg, says) {
		t.Errorf("%s: %d %v; want %d saying %q", what, status, body, want, says)
	}
}

// The escalation found from outside: a lesser role of the admin's tenant enables an
// admin-only tool in the admin's live run, and the model's next call of it runs with the
// admin's identity. Every action of another role on the run is refused now, another
// tenant does not see the run at all, and the tool never runs.
func TestLesserRoleCannotWidenAnAdminsRun(t *testing.T) {
	f := newRoleFleet(t)
	id, call := f.startAdminRun(t, "delete_all")

	for _, tt := range []struct {
		what, method, path string
		body               any
	}{
		{"enable admin_only", "POST", "/v1/runs/" + id + "/tools", map[string]any{"enable": []string{"admin_only"}}},
		{"follow up", "POST", "/v1/runs/" + id + "/messages", map[string]any{"input": "call admin_only now"}},
		{"follow up enabling admin_only", "POST", "/v1/runs/" + id + "/messages",
			map[string]any{"input": "go", "tools": map[string]any{"enable": []string{"admin_only"}}}},
		{"cancel", "POST", "/v1/runs/" + id + "/cancel", nil},
		{"pause", "POST", "/v1/runs/" + id + "/pause", nil},
		{"resume", "POST", "/v1/runs/" + id + "/resume", nil},
		{"approve", "POST", "/v1/approvals/" + call.ID, map[string]any{"decision": "approve", "arguments": map[string]any{"where": "prod"}}},
	} {
		status, body := apiCall(t, f.api, tt.method, tt.path, "acme-user", tt.body)
		wantStatus(t, "acme's user: "+tt.what, status, body, http.StatusForbidden, `role "user" may not`)
		status, body = apiCall(t, f.api, tt.method, tt.path, "globex-admin", tt.body)
		if status != http.StatusNotFound {
			t.Errorf("globex's admin: %s: %d %v; want 404", tt.what, status, body)
		}
	}
	// The refusal is the one decision the executors make on an answer over NATS, word for
	// word (for a run here, a call there).
	_, body := apiCall(t, f.api, "POST", "/v1/approvals/"+call.ID, "acme-user", map[string]any{"decision": "approve"})
	want := events.MayAct(events.Act{Actor: events.Identity{Tenant: "acme", Role: "user"}, Owner: events.Identity{Tenant: "acme", Role: "admin"},
		What: "answer the approvals of", Kind: "run", ID: id}, []string{"ops"}, nil)
	wantStatus(t, "acme's user's approval", http.StatusForbidden, body, http.StatusForbidden, want.Message)
	// acme's user may still read the run: seeing is for the tenant.
	if status, body := apiCall(t, f.api, "GET", "/v1/runs/"+id, "acme-user", nil); status != http.StatusOK {
		t.Fatalf("acme's user reading the run: %d %v", status, body)
	}
	run, err := f.p.Get(f.ctx, id)
	if err != nil || len(run.Tools) != 1 || run.Tools[0] != "delete_all" || len(run.Actors) != 0 || run.Status != planner.StatusRunning ||
		run.Injected != 0 {
		t.Fatalf("the run after the refused actions: %+v, %v; want it unchanged", run, err)
	}
	// The admin's approval goes through; the model's call of admin_only, which the run
	// was never given, is refused where the planner hydrates it.
	if status, body := apiCall(t, f.api, "POST", "/v1/approvals/"+call.ID, "acme-admin", map[string]any{"decision": "approve"}); status != http.StatusAccepted {
		t.Fatalf("the admin's approval: %d %v", status, body)
	}
	run = f.wait(t, id)
	if len(run.Calls) != 2 {
		t.Fatalf("calls: %+v", run.Calls)
	}
	wantRefused(t, run.Calls[1], tools.CodeNotAllowed, "admin_only")
	if got := run.Calls[0].Approval; got == nil || got.By != "acme/admin" {
		t.Errorf("the approval records %+v; want it by acme/admin (the caller)", got)
	}
	if n := f.ran.Load(); n != 0 {
		t.Fatalf("admin_only ran %d times", n)
	}
}

// An operator role acts on another role's run, but never beyond its own rights: it may
// not enable a tool it may not call, and once it has sent a follow-up the run is allowed
// only what both its owner and the operator may call — here, no more admin_only.
func TestOperatorFollowUpNarrowsTheRun(t *testing.T) {
	f := newRoleFleet(t)
	id, call := f.startAdminRun(t, "delete_all", "admin_only")

	status, body := apiCall(t, f.api, "POST", "/v1/runs/"+id+"/tools", "acme-ops", map[string]any{"enable": []string{"admin_only"}})
	wantStatus(t, "ops enabling admin_only", status, body, http.StatusForbidden, `may not be called by role ops`)
	if status, body := apiCall(t, f.api, "POST", "/v1/runs/"+id+"/messages", "acme-ops", map[string]any{"input": "keep it short"}); status != http.StatusAccepted {
		t.Fatalf("ops's follow-up: %d %v", status, body)
	}
	run, err := f.p.Get(f.ctx, id)
	if err != nil || len(run.Actors) != 1 || run.Actors[0] != (events.Identity{Tenant: "acme", Role: "ops"}) {
		t.Fatalf("actors after ops's follow-up: %+v, %v", run.Actors, err)
	}
	// ops may approve delete_all (any role may call it): the approval records ops.
	if status, body := apiCall(t, f.api, "POST", "/v1/approvals/"+call.ID, "acme-ops", map[string]any{"decision": "approve"}); status != http.StatusAccepted {
		t.Fatalf("ops's approval: %d %v", status, body)
	}
	run = f.wait(t, id)
	if run.Calls[0].Status != string(events.StatusOK) || run.Calls[0].Approval == nil || run.Calls[0].Approval.By != "acme/ops" {
		t.Fatalf("delete_all after ops's approval: %+v", run.Calls[0])
	}
	wantRefused(t, run.Calls[1], tools.CodeNotAllowed, "admin_only")
	if n := f.ran.Load(); n != 0 {
		t.Fatalf("admin_only ran %d times after an operator without it acted on the run", n)
	}
	if offered := offered(run, run.Calls[1].Step); offered == nil || strings.Contains(strings.Join(offered.Tools, ","), "admin_only") {
		t.Errorf("step %d offered %+v; want no admin_only", run.Calls[1].Step, offered)
	}
}

// An approval lets a call run, so it takes a caller who may call the tool: ops, an
// operator role that may act on the admin's run, still may not approve admin_wipe; the
// admin may.
func TestApprovalNeedsTheRightToCallTheTool(t *testing.T) {
	f := newRoleFleet(t)
	var wiped atomic.Int32
	startExecutor(t, f.testBundle, tools.Definition{Type: "function", Name: "admin_wipe", Description: "Admins only, unsafe.",
		Parameters: json.RawMessage(`{"type":"object"}`), Roles: []string{"admin"}},
		func(context.Context, json.RawMessage) (any, error) { wiped.Add(1); return "wiped", nil })
	status, body := apiCall(t, f.api, "POST", "/v1/runs", "acme-admin", map[string]any{"input": "wipe", "model": "wipe", "tools": []string{"admin_wipe"}})
	if status != http.StatusAccepted {
		t.Fatalf("start: %d %v", status, body)
	}
	id := body["id"].(string)
	call := f.awaitApproval(t, id)
	status, body = apiCall(t, f.api, "POST", "/v1/approvals/"+call.ID, "acme-ops", map[string]any{"decision": "approve"})
	wantStatus(t, "ops approving admin_wipe", status, body, http.StatusForbidden, `may not be called by role ops`)
	if status, body := apiCall(t, f.api, "POST", "/v1/approvals/"+call.ID, "acme-admin", map[string]any{"decision": "approve"}); status != http.StatusAccepted {
		t.Fatalf("the admin's approval: %d %v", status, body)
	}
	run := f.wait(t, id)
	if run.Calls[0].Status != string(events.StatusOK) || wiped.Load() != 1 {
		t.Fatalf("admin_wipe after the admin's approval: %+v, ran %d times", run.Calls[0], wiped.Load())
	}
}

// The same rule over NATS: a run cancel names its caller's tenant and role, and a role
// that may not act on the run is refused (403) while the owner's role cancels it.
func TestNATSCancelByAnotherRoleIsRefused(t *testing.T) {
	f := newRoleFleet(t)
	id, _ := f.startAdminRun(t, "delete_all")
	ask := func(role string) planner.ControlReply {
		t.Helper()
		subj, err := events.RunCancelSubject(events.Identity{Tenant: "acme", Role: role}, id)
		if err != nil {
			t.Fatal(err)
		}
		msg, err := f.nc.Request(subj, nil, waitTimeout)
		if err != nil {
			t.Fatal(err)
		}
		var reply planner.ControlReply
		if err := json.Unmarshal(msg.Data, &reply); err != nil {
			t.Fatal(err)
		}
		return reply
	}
	if r := ask("user"); r.Status != http.StatusForbidden || r.Error == nil || !strings.Contains(r.Error.Message, `role "user" may not cancel`) {
		t.Fatalf("acme's user cancelling the admin's run over NATS: %+v; want 403", r)
	}
	if run, err := f.p.Get(f.ctx, id); err != nil || run.Status != planner.StatusRunning {
		t.Fatalf("the run after a refused cancel: %+v, %v", run, err)
	}
	if r := ask("admin"); r.Status != http.StatusOK || r.Run == nil || r.Run.Termination != planner.TerminationCanceled || !strings.Contains(r.Run.Detail, "acme/admin") {
		t.Fatalf("the admin's cancel over NATS: %+v", r)
	}
}

// A caller who names a tool its role may not call is told so (403), not that no
// executor serves it; a tool of another tenant only stays unknown to it (400).
func TestNamingAToolOfAnotherRoleSaysWhy(t *testing.T) {
	f := newRoleFleet(t)
	startExecutor(t, f.testBundle, tools.Definition{Type: "function", Name: "globex_only", Description: "globex's.", Safe: true,
		Parameters: json.RawMessage(`{"type":"object"}`), Tenants: []string{"globex"}},
		func(context.Context, json.RawMessage) (any, error) { return "x", nil })
	for _, where := range []string{"tools", "activeTools"} {
		status, body := apiCall(t, f.api, "POST", "/v1/runs", "acme-user", map[string]any{"input": "x", where: []string{"admin_only"}})
		wantStatus(t, "acme's user naming admin_only in "+where, status, body, http.StatusForbidden,
			`tool "admin_only" in `+where+` may not be called by role user (allowed roles: admin)`)
	}
	status, body := apiCall(t, f.api, "POST", "/v1/runs", "acme-user", map[string]any{"input": "x", "toolChoice": "admin_only"})
	wantStatus(t, "acme's user naming admin_only in toolChoice", status, body, http.StatusForbidden, "may not be called by role user")
	status, body = apiCall(t, f.api, "POST", "/v1/runs", "acme-admin", map[string]any{"input": "x", "tools": []string{"globex_only"}})
	wantStatus(t, "acme naming globex's tool", status, body, http.StatusBadRequest, `unknown tool "globex_only" in tools: no executor serves it`)
}
