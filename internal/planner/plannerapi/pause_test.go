package plannerapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/toolfleet/toolfleet/internal/planner"
	"github.com/toolfleet/toolfleet/internal/provider"
)

// getMessages returns GET /v1/runs/{id}/messages (view: "" or "model") as acme sees it.
func getMessages(t *testing.T, srvURL, runID, view string) []provider.Message {
	t.Helper()
	path := srvURL + "/v1/runs/" + runID + "/messages"
	if view != "" {
		path += "?view=" + view
	}
	req, err := http.NewRequest("GET", path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer acme")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var msgs []provider.Message
	if err := json.NewDecoder(resp.Body).Decode(&msgs); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d, %v", path, resp.StatusCode, err)
	}
	return msgs
}

// callIDs returns the ids of the calls that message i of msgs makes.
func callIDs(t *testing.T, msgs []provider.Message, i int) []string {
	t.Helper()
	var ids []string
	for _, c := range msgs[i].ToolCalls {
		ids = append(ids, c.ID)
	}
	if len(ids) == 0 {
		t.Fatalf("message %d makes no call: %+v", i, msgs[i])
	}
	return ids
}

func results(ids ...string) provider.Message {
	m := provider.Message{Role: provider.RoleTool}
	for _, id := range ids {
		m.ToolResults = append(m.ToolResults, provider.ToolResult{CallID: id, Name: "add", Content: json.RawMessage(`3`)})
	}
	return m
}

// refusedEdit posts a resume with edit to the paused run id and checks that it is a
// 400 naming wantID, and that it changed nothing: the run is still paused, and both
// views of its conversation are what they were.
func refusedEdit(t *testing.T, b *testBundle, srv *httptest.Server, id, what string, edit map[string]any, wantID string) {
	t.Helper()
	srvURL := srv.URL
	model, record := getMessages(t, srvURL, id, "model"), getMessages(t, srvURL, id, "")
	status, body := apiCall(t, srv, "POST", "/v1/runs/"+id+"/resume", "acme", edit)
	msg := fmt.Sprint(body["error"])
	if status != http.StatusBadRequest || !strings.Contains(msg, `"`+wantID+`"`) {
		t.Fatalf("%s: %d %q, want 400 naming call %q", what, status, msg, wantID)
	}
	if got := getMessages(t, srvURL, id, "model"); !reflect.DeepEqual(got, model) {
		t.Fatalf("%s changed the model's conversation:\n%+v\nwas\n%+v", what, got, model)
	}
	if got := getMessages(t, srvURL, id, ""); !reflect.DeepEqual(got, record) {
		t.Fatalf("%s changed the run's messages", what)
	}
	if run, err := b.p.Get(b.ctx, id); err != nil || run.Status != planner.StatusPaused {
		t.Fatalf("%s: the run is %+v (%v), want still paused", what, run, err)
	}
}

// A resume's edit keeps every call paired with exactly one result: an edit that adds a
// call without its result, leaves a call without one, answers a call twice, or leaves
// a result without its call is a 400 naming the call, and the run stays paused with its
// conversation as it was. This holds on a run whose conversation, given at its start,
// answers a step's calls in one tool message per result (OpenAI's own form), where the
// check used to be skipped, and a valid edit there still goes through.
func TestResumeEditKeepsEveryCallPaired(t *testing.T) {
	b := setup(t, nil)
	b.withModels(t, map[string]string{
		"main": `
steps:
  - calls: [{name: add, arguments: {a: 1, b: 2}}, {name: echo, arguments: {text: hi}}]
  - text: done
`,
		"history": `
steps:
  - text: the conversation's own answer
  - calls: [{name: add, arguments: {a: 1, b: 2}}]
  - text: done
`})
	srv := tenantAPI(t, b)
	start := func(body map[string]any) string {
		t.Helper()
		body["tools"], body["pause"], body["wait"] = []string{"add", "echo"}, map[string]any{"afterEveryStep": true}, true
		status, run := apiCall(t, srv, "POST", "/v1/runs", "acme", body)
		if status != http.StatusOK || run["status"] != string(planner.StatusPaused) {
			t.Fatalf("start: %d %v", status, run)
		}
		return run["id"].(string)
	}

	// user, assistant (two calls), tool (their results).
	id := start(map[string]any{"input": "add, then echo"})
	msgs := getMessages(t, srv.URL, id, "model")
	if len(msgs) != 3 {
		t.Fatalf("the model's view of the paused run: %+v", msgs)
	}
	calls := callIDs(t, msgs, 1)
	withCalls := func(ids ...string) provider.Message {
		m := provider.Message{Role: provider.RoleAssistant}
		for _, c := range ids {
			m.ToolCalls = append(m.ToolCalls, provider.ToolCall{ID: c, Name: "add", Arguments: json.RawMessage(`{"a":1,"b":2}`)})
		}
		return m
	}
	replace := func(i int, m provider.Message) map[string]any {
		return map[string]any{"replace": []map[string]any{{"index": i, "message": m}}}
	}
	refusedEdit(t, b, srv, id, "a replaced message adding a call", replace(1, withCalls(calls[0], calls[1], "extra")), "extra")
	refusedEdit(t, b, srv, id, "replaced results leaving a call out", replace(2, results(calls[0])), calls[1])
	refusedEdit(t, b, srv, id, "replaced results answering a call twice", replace(2, results(calls[0], calls[0], calls[1])), calls[0])
	refusedEdit(t, b, srv, id, "replaced results answering another call", replace(2, results(calls[0], calls[1], "other")), "other")
	refusedEdit(t, b, srv, id, "dropping the results", map[string]any{"drop": []int{2}}, calls[0])
	refusedEdit(t, b, srv, id, "dropping the calls", map[string]any{"drop": []int{1}}, calls[0])
	refusedEdit(t, b, srv, id, "compacting the calls without their results",
		map[string]any{"compact": map[string]any{"from": 0, "to": 2, "summary": "asked to add"}}, calls[0])
	// A valid edit goes through: the calls and their results replaced together.
	if status, body := apiCall(t, srv, "POST", "/v1/runs/"+id+"/resume", "acme",
		map[string]any{"replace": []map[string]any{{"index": 1, "message": withCalls("x1")}, {"index": 2, "message": results("x1")}}}); status != http.StatusOK {
		t.Fatalf("a paired replacement: %d %v", status, body)
	}
	if run := b.wait(t, id); run.Termination != planner.TerminationCompleted {
		t.Fatalf("the resumed run ended %s (%s)", run.Termination, run.Detail)
	}

	// A conversation whose calls are answered by one tool message per result.
	id = start(map[string]any{"model": "history", "messages": []provider.Message{
		{Role: provider.RoleUser, Text: "add and echo"},
		withCalls("h1", "h2"), results("h1"), results("h2"),
		{Role: provider.RoleUser, Text: "once more"},
	}})
	refusedEdit(t, b, srv, id, "a result replaced by one of no call", replace(2, results("hx")), "hx")
	refusedEdit(t, b, srv, id, "dropping one of two results", map[string]any{"drop": []int{3}}, "h2")
	if status, body := apiCall(t, srv, "POST", "/v1/runs/"+id+"/resume", "acme", replace(4, provider.Message{Role: provider.RoleUser, Text: "again"})); status != http.StatusOK {
		t.Fatalf("a valid edit of a conversation answered one result per message: %d %v", status, body)
	}
	if run := b.wait(t, id); run.Termination != planner.TerminationCompleted {
		t.Fatalf("the resumed run ended %s (%s)", run.Termination, run.Detail)
	}
}
