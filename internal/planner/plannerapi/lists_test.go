package plannerapi

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/internal/planner"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/events"
)

const (
	acmeToken   = "acme-user-token"
	globexToken = "globex-user-token"
	// calcScript calls add once, then answers.
	calcScript = `
steps:
  - calls: [{name: add, arguments: {a: 2, b: 3}}]
  - text: five
`
	// failScript calls fail once, then answers.
	failScript = `
steps:
  - calls: [{name: fail, arguments: {}}]
  - text: it failed
`
	// delegateScript delegates to a nested run of the calc model.
	delegateScript = `
steps:
  - calls: [{name: run_agent, arguments: {task: "add 2 and 3", tools: [add], model: calc}}]
  - text: delegated
`
)

// listServer serves the API of a planner with the models the list tests use, for two
// tenants (acme, globex; role user each).
func listServer(t *testing.T) (*testBundle, *httptest.Server) {
	t.Helper()
	b := setup(t, map[string]string{"main": answerScript, "calc": calcScript, "fails": failScript,
		"delegate": delegateScript, "approval": approvalScript})
	srv := httptest.NewServer(Handler(b.p, Auth{Tokens: map[string]events.Identity{
		HashToken(acmeToken):   {Tenant: "acme", Role: "user"},
		HashToken(globexToken): {Tenant: "globex", Role: "user"},
	}}))
	t.Cleanup(srv.Close)
	return b, srv
}

// getJSON sends GET path with token and decodes the answer into out; it returns the
// status.
func getJSON(t *testing.T, srv *httptest.Server, path, token string, out any) int {
	t.Helper()
	req, _ := http.NewRequest("GET", srv.URL+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("GET %s: %d, body not JSON: %v", path, resp.StatusCode, err)
	}
	return resp.StatusCode
}

// startRun starts a run over the API as token and returns its id (waiting for its end
// when wait).
func startRun(t *testing.T, srv *httptest.Server, token string, req map[string]any) string {
	t.Helper()
	status, body := apiCall(t, srv, "POST", "/v1/runs", token, req)
	if status != http.StatusAccepted && status != http.StatusOK {
		t.Fatalf("start %v: %d %v", req, status, body)
	}
	return body["id"].(string)
}

// listRuns lists runs with query as token; a non-200 answer fails.
func listRuns(t *testing.T, srv *httptest.Server, token, query string) planner.RunPage {
	t.Helper()
	var page planner.RunPage
	if status := getJSON(t, srv, "/v1/runs?"+query, token, &page); status != http.StatusOK {
		t.Fatalf("GET /v1/runs?%s: %d", query, status)
	}
	return page
}

func ids(runs []planner.RunSummary) []string {
	out := make([]string, len(runs))
	for i, r := range runs {
		out[i] = r.ID
	}
	return out
}

// awaitListed waits until the runs list of token holds n runs (the index follows the
// runs bucket's watch).
func awaitListed(t *testing.T, srv *httptest.Server, token, query string, n int) planner.RunPage {
	t.Helper()
	var page planner.RunPage
	natstest.Eventually(t, waitTimeout, "the runs list to hold the runs", func() bool {
		page = listRuns(t, srv, token, query)
		return len(page.Runs) == n
	})
	return page
}

// Every filter of GET /v1/runs selects what it says, on real runs of two tenants; the
// other tenant's runs never appear.
func TestListRunsFilters(t *testing.T) {
	b, srv := listServer(t)
	alpha := startRun(t, srv, acmeToken, map[string]any{"input": "Say hello to ALPHA", "metadata": map[string]string{"team": "ops"}, "wait": true})
	calc := startRun(t, srv, acmeToken, map[string]any{"input": "add two numbers", "model": "calc", "metadata": map[string]string{"team": "ops", "env": "prod"}, "wait": true})
	fails := startRun(t, srv, acmeToken, map[string]any{"input": "try the failing tool", "model": "fails", "wait": true})
	capped := startRun(t, srv, acmeToken, map[string]any{"input": "add, one step only", "model": "calc", "limits": map[string]any{"maxSteps": 1}, "wait": true})
	parent := startRun(t, srv, acmeToken, map[string]any{"input": "delegate the sum", "model": "delegate", "tools": []string{"add", "run_agent"}, "wait": true})
	waiting := startRun(t, srv, acmeToken, map[string]any{"input": "clean up", "model": "approval", "tools": []string{"delete_all"}})
	b.awaitApproval(t, waiting)
	other := startRun(t, srv, globexToken, map[string]any{"input": "Say hello to ALPHA from globex", "wait": true})
	child := "c" + parent + "_0_0"

	all := awaitListed(t, srv, acmeToken, "", 7)
	if slices.Contains(ids(all.Runs), other) || all.Next != "" {
		t.Fatalf("acme's list: %v (next %q); another tenant's run %s must not appear", ids(all.Runs), all.Next, other)
	}
	for i := 1; i < len(all.Runs); i++ {
		if all.Runs[i].CreatedAt.After(all.Runs[i-1].CreatedAt) {
			t.Fatalf("not newest first: %v", ids(all.Runs))
		}
	}
	byID := map[string]planner.RunSummary{}
	for _, r := range all.Runs {
		byID[r.ID] = r
	}
	if s := byID[calc]; s.Status != planner.StatusDone || s.Termination != planner.TerminationCompleted || s.Calls != 1 ||
		!slices.Equal(s.Tools, []string{"add"}) || s.Steps != 2 || s.Input != "add two numbers" || s.Tenant != "acme" || s.Role != "user" || s.Model != "calc" || s.FinishedAt == nil ||
		s.Outcome != planner.OutcomeClean || s.ToolErrors != 0 || s.DurationMS != s.FinishedAt.Sub(s.CreatedAt).Milliseconds() || s.Metadata["env"] != "prod" {
		t.Fatalf("summary of the calc run: %+v", s)
	}
	if s := byID[fails]; s.Outcome != planner.OutcomeToolErrors || s.ToolErrors != 1 || s.Termination != planner.TerminationCompleted {
		t.Fatalf("summary of the run whose tool failed: %+v", s)
	}
	// A run whose calls wait on a person says so, with when its approval is denied: the
	// run's own deadline here (a day away), or the request's expiry, whichever is first.
	if s := byID[waiting]; s.Status != planner.StatusAwaitingApproval || s.PendingApprovals != 1 || s.ApprovalDeadline == nil ||
		!s.ApprovalDeadline.After(s.CreatedAt) || s.Outcome != "" || s.FinishedAt != nil {
		t.Fatalf("summary of the run waiting for an approval: %+v", s)
	}
	var view planner.RunView
	getJSON(t, srv, "/v1/runs/"+waiting, acmeToken, &view)
	if view.Status != planner.StatusAwaitingApproval || view.ApprovalDeadline == nil || !view.ApprovalDeadline.Equal(*byID[waiting].ApprovalDeadline) {
		t.Fatalf("the view of the run waiting for an approval: %s %v, the list's %v", view.Status, view.ApprovalDeadline, byID[waiting].ApprovalDeadline)
	}
	var clean []string
	for _, r := range all.Runs {
		if r.ID != fails && r.ID != waiting {
			clean = append(clean, r.ID)
		}
	}
	if s := byID[child]; s.ParentID != parent || s.Depth != 1 {
		t.Fatalf("summary of the nested run: %+v", s)
	}

	for _, tt := range []struct {
		query string
		want  []string
	}{
		{"status=running", nil},
		{"status=awaiting_approval", []string{waiting}},
		{"outcome=tool_errors", []string{fails}},
		{"outcome=clean", clean},
		{"metadata.team=ops", []string{calc, alpha}},
		{"metadata.team=ops&metadata.env=prod", []string{calc}},
		{"metadata.team=dev", nil},
		{"termination=max_steps", []string{capped}},
		{"tool=add", []string{child, capped, calc}},
		{"tool=fail", []string{fails}},
		{"parent=" + parent, []string{child}},
		{"q=alpha", []string{alpha}},
		{"q=" + url.QueryEscape("ONE STEP"), []string{capped}},
		{"since=" + url.QueryEscape(byID[fails].CreatedAt.Format(time.RFC3339Nano)) + "&until=" + url.QueryEscape(byID[capped].CreatedAt.Format(time.RFC3339Nano)), []string{fails}},
		{"status=done&tool=add&limit=1", []string{child}},
	} {
		page := listRuns(t, srv, acmeToken, tt.query)
		if got := ids(page.Runs); !slices.Equal(got, tt.want) && len(got)+len(tt.want) > 0 {
			t.Errorf("%s: %v, want %v", tt.query, ids(page.Runs), tt.want)
		}
	}
	// The other tenant sees its own run only, and a filter cannot reach acme's.
	if got := ids(listRuns(t, srv, globexToken, "q=alpha").Runs); !slices.Equal(got, []string{other}) {
		t.Fatalf("globex q=alpha: %v, want only its own %s", got, other)
	}
	if got := listRuns(t, srv, globexToken, "parent="+parent).Runs; len(got) != 0 {
		t.Fatalf("globex listing acme's nested runs: %v", ids(got))
	}
}

// A bad filter is a 400 that names it; a missing token is a 401.
func TestListBadFilters(t *testing.T) {
	_, srv := listServer(t)
	for _, tt := range []struct{ path, names string }{
		{"/v1/runs?status=finished", "status"},
		{"/v1/runs?termination=exploded", "termination"},
		{"/v1/runs?tool=no.such", "tool"},
		{"/v1/runs?since=yesterday", "since"},
		{"/v1/runs?until=2025-13-01", "until"},
		{"/v1/runs?since=2025-02-01T00:00:00Z&until=2025-01-01T00:00:00Z", "until"},
		{"/v1/runs?limit=0", "limit"},
		{"/v1/runs?limit=501", "limit"},
		{"/v1/runs?limit=ten", "limit"},
		{"/v1/runs?cursor=not-a-cursor", "cursor"},
		{"/v1/runs?stauts=done", "stauts"},
		{"/v1/runs?outcome=fine", "outcome"},
		{"/v1/runs?metadata.=x", "metadata."},
		{"/v1/runs?metadata.a=1&metadata.a=2", "metadata.a"},
		{"/v1/approvals?status=maybe", "status"},
		{"/v1/approvals?cursor=zz", "cursor"},
		{"/v1/dead-letters?tool=a.b", "tool"},
		{"/v1/dead-letters?cursor=x", "cursor"},
		{"/v1/tools?tool=add", "tool"},
	} {
		var body struct {
			Error planner.APIError `json:"error"`
		}
		status := getJSON(t, srv, tt.path, acmeToken, &body)
		if status != http.StatusBadRequest || body.Error.Status != http.StatusBadRequest || !strings.Contains(body.Error.Message, "bad filter "+tt.names) {
			t.Errorf("GET %s: %d %+v; want 400 naming %s", tt.path, status, body.Error, tt.names)
		}
	}
	for _, path := range []string{"/v1/runs", "/v1/approvals", "/v1/tools", "/v1/dead-letters", "/v1/events"} {
		var body map[string]any
		if status := getJSON(t, srv, path, "", &body); status != http.StatusUnauthorized {
			t.Errorf("GET %s without a token: %d, want 401", path, status)
		}
	}
}

// Walking the pages with the cursor gives every run once, newest first, while new runs
// keep arriving (they are newer than the cursor: the walk does not see them).
func TestListRunsPagination(t *testing.T) {
	_, srv := listServer(t)
	var started []string
	for range 7 {
		started = append(started, startRun(t, srv, acmeToken, map[string]any{"input": "hello", "wait": true}))
	}
	awaitListed(t, srv, acmeToken, "limit=500", 7)
	var walked []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatalf("the walk does not end: %v", walked)
		}
		page := listRuns(t, srv, acmeToken, "limit=3&cursor="+url.QueryEscape(cursor))
		if len(page.Runs) > 3 {
			t.Fatalf("page of %d runs with limit 3", len(page.Runs))
		}
		walked = append(walked, ids(page.Runs)...)
		// A run arrives between pages.
		startRun(t, srv, acmeToken, map[string]any{"input": "newcomer"})
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	slices.Reverse(started)
	if !slices.Equal(walked, started) {
		t.Fatalf("walked %v, want every run once, newest first: %v", walked, started)
	}
}

// GET /v1/approvals lists the tenant's calls waiting for an approval with the request's
// details, and once answered, the decision.
func TestListApprovals(t *testing.T) {
	b, srv := listServer(t)
	runID := startRun(t, srv, acmeToken, map[string]any{"input": "clean up", "model": "approval", "tools": []string{"delete_all"}})
	call := b.awaitApproval(t, runID)
	other := startRun(t, srv, globexToken, map[string]any{"input": "clean up", "model": "approval", "tools": []string{"delete_all"}})
	b.awaitApproval(t, other)

	var page planner.ApprovalPage
	natstest.Eventually(t, waitTimeout, "the pending approval to be listed", func() bool {
		getJSON(t, srv, "/v1/approvals", acmeToken, &page)
		return len(page.Approvals) == 1
	})
	a := page.Approvals[0]
	if a.CallID != call.ID || a.RunID != runID || a.Tool != "delete_all" || a.Status != planner.ApprovalPending ||
		string(a.Arguments) != `{"where":"staging"}` || a.Reason == "" || a.ExpiresAt == nil || a.Caller != (events.Identity{Tenant: "acme", Role: "user"}) ||
		!slices.Equal(a.AnswerableBy.Roles, []string{"user"}) || a.Approval != nil {
		t.Fatalf("pending approval: %+v", a)
	}
	if status, body := apiCall(t, srv, "POST", "/v1/approvals/"+call.ID, acmeToken, map[string]string{"decision": "approve", "by": "alice"}); status != http.StatusAccepted {
		t.Fatalf("approve: %d %v", status, body)
	}
	natstest.Eventually(t, waitTimeout, "the approval to be listed as answered", func() bool {
		getJSON(t, srv, "/v1/approvals?status=answered", acmeToken, &page)
		return len(page.Approvals) == 1
	})
	if a := page.Approvals[0]; a.CallID != call.ID || a.Status != planner.ApprovalApproved || a.Approval == nil || a.Approval.By != "acme/user" || a.Approval.ClaimedBy != "alice" || string(a.Arguments) != `{"where":"staging"}` {
		t.Fatalf("answered approval: %+v", a)
	}
	getJSON(t, srv, "/v1/approvals", acmeToken, &page)
	if len(page.Approvals) != 0 {
		t.Fatalf("pending after the answer: %+v", page.Approvals)
	}
	// globex sees its own pending approval only, in every list.
	getJSON(t, srv, "/v1/approvals?status=all", globexToken, &page)
	if len(page.Approvals) != 1 || page.Approvals[0].RunID != other {
		t.Fatalf("globex's approvals: %+v", page.Approvals)
	}
}

// GET /v1/tools shows the catalog with each tool's consumer and recent calls;
// GET /v1/dead-letters the tenant's dead letters only.
func TestListToolsAndDeadLetters(t *testing.T) {
	b, srv := listServer(t)
	startRun(t, srv, acmeToken, map[string]any{"input": "add", "model": "calc", "wait": true})
	startRun(t, srv, acmeToken, map[string]any{"input": "fail", "model": "fails", "wait": true})
	var list struct {
		Tools []planner.ToolStatus `json:"tools"`
	}
	natstest.Eventually(t, waitTimeout, "the recent calls of add and fail", func() bool {
		getJSON(t, srv, "/v1/tools", acmeToken, &list)
		n := 0
		for _, s := range list.Tools {
			if s.Name == "add" && s.Recent.Calls == 1 && s.Recent.Errors == 0 || s.Name == "fail" && s.Recent.Calls == 1 && s.Recent.Errors == 1 {
				n++
			}
		}
		return n == 2
	})
	names := make([]string, len(list.Tools))
	for i, s := range list.Tools {
		names[i] = s.Name
		if s.Name == "add" && (s.Executors < 1 || len(s.ExecutorIDs) != 1 || s.Recent.Window != "5m" || len(s.Parameters) == 0 || !s.Safe) {
			t.Fatalf("add: %+v", s)
		}
		if s.Name == "delete_all" && s.Safe {
			t.Fatalf("delete_all: %+v", s)
		}
	}
	if !slices.IsSorted(names) || !slices.Contains(names, "echo") {
		t.Fatalf("tools %v: want the catalog, sorted", names)
	}

	// Calls that cannot be read (not a CloudEvent) are dead-lettered with the subject
	// they came on, which names the caller's tenant.
	for _, subj := range []string{"toolfleet.call.echo.acme.user", "toolfleet.call.echo.globex.user", "toolfleet.call.echo.acme.user"} {
		if err := b.nc.Publish(subj, []byte("not an event from "+subj)); err != nil {
			t.Fatal(err)
		}
	}
	var dl planner.DeadLetterPage
	natstest.Eventually(t, waitTimeout, "acme's two dead letters", func() bool {
		getJSON(t, srv, "/v1/dead-letters?tool=echo", acmeToken, &dl)
		return len(dl.DeadLetters) == 2
	})
	for _, d := range dl.DeadLetters {
		if d.Subject != "toolfleet.call.echo.acme.user" || d.Tool != "echo" || d.Body != "not an event from toolfleet.call.echo.acme.user" || d.Reason == "" {
			t.Fatalf("acme's dead letter: %+v", d)
		}
	}
	if dl.DeadLetters[0].Seq <= dl.DeadLetters[1].Seq {
		t.Fatalf("not newest first: %+v", dl.DeadLetters)
	}
	// One a page: the cursor goes on to the older one.
	getJSON(t, srv, "/v1/dead-letters?limit=1", acmeToken, &dl)
	if len(dl.DeadLetters) != 1 || dl.Next == "" {
		t.Fatalf("first page: %+v", dl)
	}
	first := dl.DeadLetters[0].Seq
	getJSON(t, srv, "/v1/dead-letters?limit=1&cursor="+dl.Next, acmeToken, &dl)
	if len(dl.DeadLetters) != 1 || dl.DeadLetters[0].Seq >= first {
		t.Fatalf("second page: %+v", dl)
	}
	getJSON(t, srv, "/v1/dead-letters", globexToken, &dl)
	if len(dl.DeadLetters) != 1 || dl.DeadLetters[0].Subject != "toolfleet.call.echo.globex.user" {
		t.Fatalf("globex's dead letters: %+v", dl.DeadLetters)
	}
}

// readSSE sends the events of an SSE stream (as readEvents parses them) to ch until it
// ends.
func readSSE(body *bufio.Reader, ch chan<- sseEvent) {
	defer close(ch)
	var e sseEvent
	for {
		line, err := body.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			ch <- e
			e = sseEvent{}
		case strings.HasPrefix(line, "id: "):
			e.ID, _ = strconv.ParseUint(line[4:], 10, 64)
		case strings.HasPrefix(line, "event: "):
			e.Event = line[7:]
		case strings.HasPrefix(line, "data: "):
			e.Data = json.RawMessage(line[6:])
		}
	}
}

// GET /v1/events streams the events of every run of the caller's tenant as they
// happen: two runs' events arrive, another tenant's do not; a reconnection with
// Last-Event-ID resumes after it.
func TestTenantEvents(t *testing.T) {
	_, srv := listServer(t)
	open := func(lastID uint64) (chan sseEvent, func()) {
		req, _ := http.NewRequest("GET", srv.URL+"/v1/events", nil)
		req.Header.Set("Authorization", "Bearer "+acmeToken)
		if lastID != 0 {
			req.Header.Set("Last-Event-ID", strconv.FormatUint(lastID, 10))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("GET /v1/events: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		ch := make(chan sseEvent, 100)
		go readSSE(bufio.NewReader(resp.Body), ch)
		return ch, func() { resp.Body.Close() }
	}
	ch, stop := open(0)
	defer stop()
	other := startRun(t, srv, globexToken, map[string]any{"input": "globex's", "wait": true})
	one := startRun(t, srv, acmeToken, map[string]any{"input": "first", "wait": true})
	two := startRun(t, srv, acmeToken, map[string]any{"input": "second", "model": "calc", "wait": true})
	done := map[string]bool{}
	var seen []sseEvent
	timeout := time.After(waitTimeout)
	for !done[one] || !done[two] {
		select {
		case e, ok := <-ch:
			if !ok {
				t.Fatal("the stream ended")
			}
			var data events.RunEvent
			if err := json.Unmarshal(e.Data, &data); err != nil || e.ID == 0 {
				t.Fatalf("event %+v: %v", e, err)
			}
			if data.RunID == other || data.Tenant != "acme" {
				t.Fatalf("another tenant's event: %+v", e)
			}
			if e.Event == "done" {
				done[data.RunID] = true
			}
			seen = append(seen, e)
		case <-timeout:
			t.Fatalf("events seen: %+v; want both runs' done", seen)
		}
	}
	// Resuming after the first event gives the second next.
	ch2, stop2 := open(seen[0].ID)
	defer stop2()
	select {
	case e := <-ch2:
		if e.ID != seen[1].ID || e.Event != seen[1].Event {
			t.Fatalf("resumed with %+v, want %+v", e, seen[1])
		}
	case <-time.After(waitTimeout):
		t.Fatal("nothing after resuming")
	}
}
