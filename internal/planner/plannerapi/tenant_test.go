package plannerapi

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

const adminScript = `
steps:
  - calls: [{name: admin_only, arguments: {}}]
  - text: done
`

// apiCall sends a request to the API with token (none when empty) and returns the status
// and the decoded body.
func apiCall(t *testing.T, srv *httptest.Server, method, path, token string, body any) (int, map[string]any) {
	t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, _ := http.NewRequest(method, srv.URL+path, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// Bearer tokens map API callers onto tenants and roles: a run carries its caller's
// identity, its calls are published with it (executors see it), and another tenant can
// neither see the run, follow it, nor answer its approvals — all of it "not found". A
// tool restricted to a role is not there for another role: not in its tools, not offered,
// and refused when the model calls it anyway.
func TestAPITenantsAndRoles(t *testing.T) {
	b := setup(t, map[string]string{"main": approvalScript, "admin": adminScript})
	var saw atomic.Value
	var ran atomic.Int32
	startExecutor(t, b, tools.Definition{Type: "function", Name: "admin_only", Description: "Admins only.", Safe: true,
		Parameters: json.RawMessage(`{"type":"object"}`), Roles: []string{"admin"}},
		func(ctx context.Context, _ json.RawMessage) (any, error) {
			info, _ := tools.CallInfoFrom(ctx)
			saw.Store(info.Tenant + "/" + info.Role)
			ran.Add(1)
			return "secret report", nil
		})

	file := filepath.Join(t.TempDir(), "tokens.json")
	if err := os.WriteFile(file, []byte(`[{"token":"acme-admin-token","tenant":"acme","role":"admin"},
		{"sha256":"`+HashToken("globex-user-token")+`","tenant":"globex","role":"user"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := LoadTokens(file)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(Handler(b.p, Auth{Tokens: tokens}))
	defer srv.Close()
	const acme, globex = "acme-admin-token", "globex-user-token"

	if status, _ := apiCall(t, srv, "POST", "/v1/runs", "", map[string]any{"input": "x"}); status != http.StatusUnauthorized {
		t.Fatalf("no token: %d, want 401", status)
	}
	if status, _ := apiCall(t, srv, "POST", "/v1/runs", "wrong", map[string]any{"input": "x"}); status != http.StatusUnauthorized {
		t.Fatalf("unknown token: %d, want 401", status)
	}
	// The body cannot choose the identity.
	if status, _ := apiCall(t, srv, "POST", "/v1/runs", globex, map[string]any{"input": "x", "caller": map[string]string{"tenant": "acme", "role": "admin"}}); status != http.StatusBadRequest {
		t.Fatalf("an identity in the body: %d, want 400", status)
	}

	// acme's run waits for an approval of delete_all.
	status, body := apiCall(t, srv, "POST", "/v1/runs", acme, map[string]any{"input": "clean up", "tools": []string{"delete_all"}})
	if status != http.StatusAccepted {
		t.Fatalf("acme start: %d %v", status, body)
	}
	runID := body["id"].(string)
	call := b.awaitApproval(t, runID)
	run, err := b.p.Get(b.ctx, runID)
	if err != nil || run.Tenant != "acme" || run.Role != "admin" {
		t.Fatalf("run identity %q/%q, %v; want acme/admin", run.Tenant, run.Role, err)
	}
	// Its approval request came on acme's subject, published for acme's call subject.
	reqSubj, _ := events.ApprovalRequestedSubject("acme", "delete_all", call.ID)
	stream, err := b.js.Stream(b.ctx, events.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	if m, err := stream.GetLastMsgForSubject(b.ctx, reqSubj); err != nil || m == nil {
		t.Fatalf("approval request on %s: %v", reqSubj, err)
	}

	for _, tt := range []struct{ method, path string }{
		{"GET", "/v1/runs/" + runID},
		{"GET", "/v1/runs/" + runID + "/events"},
		{"POST", "/v1/approvals/" + call.ID},
	} {
		var payload any
		if tt.method == "POST" {
			payload = map[string]string{"decision": "deny"}
		}
		if status, body := apiCall(t, srv, tt.method, tt.path, globex, payload); status != http.StatusNotFound {
			t.Errorf("globex %s %s: %d %v; want 404", tt.method, tt.path, status, body)
		}
	}
	if status, body := apiCall(t, srv, "POST", "/v1/approvals/"+call.ID, acme, map[string]string{"decision": "approve", "by": "alice"}); status != http.StatusAccepted {
		t.Fatalf("acme approving its call: %d %v", status, body)
	}
	run, err = b.p.Wait(b.ctx, runID)
	if err != nil || run.Answer != "deleted" || run.Calls[0].Status != string(events.StatusOK) {
		t.Fatalf("acme's run after approval: %+v, %v", run, err)
	}
	if status, body := apiCall(t, srv, "GET", "/v1/runs/"+runID, acme, nil); status != http.StatusOK || body["id"] != runID {
		t.Fatalf("acme reading its run: %d %v", status, body)
	}

	// Roles: globex's user cannot name admin_only (its role is why), and a model calling
	// it is refused.
	if status, body := apiCall(t, srv, "POST", "/v1/runs", globex, map[string]any{"input": "x", "model": "admin", "tools": []string{"admin_only"}}); status != http.StatusForbidden {
		t.Fatalf("globex naming admin_only: %d %v; want 403", status, body)
	}
	status, body = apiCall(t, srv, "POST", "/v1/runs", globex, map[string]any{"input": "report", "model": "admin", "wait": true})
	if status != http.StatusOK {
		t.Fatalf("globex run: %d %v", status, body)
	}
	grun, err := b.p.Get(b.ctx, body["id"].(string))
	if err != nil {
		t.Fatal(err)
	}
	wantRefused(t, grun.Calls[0], tools.CodeNotAllowed, "not offered")
	if ran.Load() != 0 {
		t.Fatalf("admin_only ran %d times for globex's user", ran.Load())
	}
	status, body = apiCall(t, srv, "POST", "/v1/runs", acme, map[string]any{"input": "report", "model": "admin", "wait": true})
	arun, err := b.p.Get(b.ctx, body["id"].(string))
	if status != http.StatusOK || err != nil || arun.Calls[0].Status != string(events.StatusOK) {
		t.Fatalf("acme's admin run: %d %v", status, body)
	}
	natstest.Eventually(t, waitTimeout, "admin_only to run once", func() bool { return ran.Load() == 1 })
	if got := saw.Load(); got != "acme/admin" {
		t.Fatalf("admin_only saw caller %v; want acme/admin (from the call's subject)", got)
	}
}
