package plannerapi

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/toolfleet/toolfleet/internal/planner"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/internal/testsupport/plannertest"
)

// getAccepting sends a GET with Accept: application/json and decodes the answer into out.
func getAccepting(t *testing.T, srv *httptest.Server, path, token string, out any) int {
	t.Helper()
	req, err := http.NewRequest("GET", srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode == http.StatusOK && out != nil {
		if err := json.Unmarshal(buf.Bytes(), out); err != nil {
			t.Fatalf("GET %s: %v in %s", path, err, buf.String())
		}
	}
	return resp.StatusCode
}

// tenantServer serves b's API for two tokens: acme's admin and globex's user.
func tenantServer(t *testing.T, b *testBundle) (srv *httptest.Server, acme, globex string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "tokens.json")
	if err := os.WriteFile(file, []byte(`[{"token":"acme-token","tenant":"acme","role":"admin"},
		{"token":"globex-token","tenant":"globex","role":"user"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := LoadTokens(file)
	if err != nil {
		t.Fatal(err)
	}
	srv = httptest.NewServer(Handler(b.p, Auth{Tokens: tokens}))
	t.Cleanup(srv.Close)
	return srv, "acme-token", "globex-token"
}

// A run's events read back as a paged JSON list are the events its SSE stream gives,
// in order, from started to done; another tenant gets 404.
func TestAPIRunEventsAsAPagedList(t *testing.T) {
	b := setup(t, map[string]string{"main": plannertest.StopScript})
	srv, acme, globex := tenantServer(t, b)
	status, body := apiCall(t, srv, "POST", "/v1/runs", acme, map[string]any{"input": "go", "wait": true})
	if status != http.StatusOK {
		t.Fatalf("start: %d %v", status, body)
	}
	id := body["id"].(string)
	run, err := b.p.Get(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(b.ctx, waitTimeout)
	defer cancel()
	live, err := b.p.FollowEvents(ctx, run, 0)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for e, err := range live {
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, e.What)
		if e.What == "done" {
			break
		}
	}
	var got []string
	pages, cursor := 0, ""
	for {
		var page planner.EventPage
		if status := getAccepting(t, srv, "/v1/runs/"+id+"/events?limit=3&cursor="+cursor, acme, &page); status != http.StatusOK {
			t.Fatalf("page %d: %d", pages, status)
		}
		pages++
		for _, e := range page.Events {
			var data struct {
				RunID string `json:"run_id"`
			}
			if err := json.Unmarshal(e.Data, &data); err != nil || data.RunID != id {
				t.Fatalf("event %d's data %s does not name the run", e.Seq, e.Data)
			}
			got = append(got, e.What)
		}
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	if len(got) != len(want) || got[0] != "started" || got[len(got)-1] != "done" || pages < 2 {
		t.Fatalf("the list gave %v in %d pages; the stream %v", got, pages, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("event %d is %s in the list, %s in the stream", i, got[i], want[i])
		}
	}
	if status := getAccepting(t, srv, "/v1/runs/"+id+"/events", globex, nil); status != http.StatusNotFound {
		t.Fatalf("another tenant's list: %d, want 404", status)
	}
	if status := getAccepting(t, srv, "/v1/runs/"+id+"/events?cursor=x", acme, nil); status != http.StatusBadRequest {
		t.Fatalf("a bad cursor: %d, want 400", status)
	}
}

// Over HTTP: a fork is 201 with its origin named, listed among the origin's forks, and
// compared with it from the fork point; another tenant can neither fork nor compare
// (404), and a step the run does not have is a 400.
func TestAPIForkAndDiff(t *testing.T) {
	b := setup(t, map[string]string{"main": plannertest.StopScript})
	srv, acme, globex := tenantServer(t, b)
	status, body := apiCall(t, srv, "POST", "/v1/runs", acme, map[string]any{"input": "go", "wait": true})
	if status != http.StatusOK {
		t.Fatalf("start: %d %v", status, body)
	}
	id := body["id"].(string)
	if status, body := apiCall(t, srv, "POST", "/v1/runs/"+id+"/fork", globex, map[string]any{"fromStep": 1}); status != http.StatusNotFound {
		t.Fatalf("another tenant's fork: %d %v, want 404", status, body)
	}
	if status, body := apiCall(t, srv, "POST", "/v1/runs/"+id+"/fork", acme, map[string]any{"fromStep": 9}); status != http.StatusBadRequest {
		t.Fatalf("a fork from step 9 of a 4-step run: %d %v, want 400", status, body)
	}
	status, body = apiCall(t, srv, "POST", "/v1/runs/"+id+"/fork", acme, map[string]any{"fromStep": 1, "input": "and once more"})
	if status != http.StatusCreated {
		t.Fatalf("fork: %d %v, want 201", status, body)
	}
	forkID := body["id"].(string)
	if from, _ := body["forkedFrom"].(map[string]any); from["run"] != id || from["step"] != 1.0 {
		t.Fatalf("the fork names %v as its origin", body["forkedFrom"])
	}
	b.wait(t, forkID)
	var page planner.RunPage
	natstest.Eventually(t, waitTimeout, "the fork to be listed", func() bool {
		return getAccepting(t, srv, "/v1/runs?forkedFrom="+id, acme, &page) == http.StatusOK && len(page.Runs) == 1
	})
	if page.Runs[0].ID != forkID {
		t.Fatalf("the forks of %s: %+v", id, page.Runs)
	}
	var d planner.RunDiff
	if status := getAccepting(t, srv, "/v1/runs/"+id+"/diff/"+forkID, acme, &d); status != http.StatusOK {
		t.Fatalf("diff: %d", status)
	}
	if d.Shared != 1 || d.A.From != 1 || len(d.Steps) == 0 || d.Steps[0].A == nil || *d.Steps[0].A != 1 {
		t.Fatalf("the diff of a run and its fork from step 1: shared %d, from %d, steps %+v", d.Shared, d.A.From, d.Steps)
	}
	if status := getAccepting(t, srv, "/v1/runs/"+id+"/diff/"+forkID, globex, nil); status != http.StatusNotFound {
		t.Fatalf("another tenant's diff: %d, want 404", status)
	}
	var msgs []json.RawMessage
	if status := getAccepting(t, srv, "/v1/runs/"+id+"/messages?view=model&step=1", acme, &msgs); status != http.StatusOK || len(msgs) != 3 {
		t.Fatalf("the model's view at step 1: %d, %d messages; want the input, the call and its result", status, len(msgs))
	}
}
