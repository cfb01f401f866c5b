package plannerapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/toolfleet/toolfleet/internal/planner"
	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

const conversationScript = `
steps:
  - calls: [{name: add, arguments: {a: 1, b: 2}}]
  - text: three
  - calls: [{name: add, arguments: {a: 3, b: 4}}]
  - text: seven
`

// getMessagesOf returns GET /v1/runs/{id}/messages as token sees it.
func getMessagesOf(t *testing.T, b *testBundle, srvURL, runID, token string) (int, []provider.Message) {
	t.Helper()
	req, _ := http.NewRequest("GET", srvURL+"/v1/runs/"+runID+"/messages", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var msgs []provider.Message
	_ = json.NewDecoder(resp.Body).Decode(&msgs)
	return resp.StatusCode, msgs
}

// A run that completed is continued by a follow-up: it keeps its id and conversation,
// the model is asked with the whole conversation (the first turn, its answer, the
// follow-up), its steps count again from the continuation, and the messages endpoint
// shows both turns in order. A follow-up repeated with the same id is not added twice;
// another tenant cannot add to the run; a canceled run cannot be continued.
func TestFollowUpContinuesACompletedRun(t *testing.T) {
	b := setup(t, nil)
	models := b.withModels(t, map[string]string{"main": conversationScript, "slow": `
steps:
  - calls: [{name: slow, arguments: {}}]
  - text: the model was asked again
`})
	srv := tenantAPI(t, b)

	status, body := apiCall(t, srv, "POST", "/v1/runs", "acme", map[string]any{"input": "what is 1+2?", "tools": []string{"add"},
		"limits": map[string]any{"maxSteps": 2}, "wait": true})
	if status != http.StatusOK || body["answer"] != "three" {
		t.Fatalf("first turn: %d %v", status, body)
	}
	runID := body["id"].(string)

	if status, body := apiCall(t, srv, "POST", "/v1/runs/"+runID+"/messages", "globex", map[string]any{"input": "and 3+4?"}); status != http.StatusNotFound {
		t.Fatalf("another tenant's follow-up: %d %v, want 404", status, body)
	}
	if status, _ := getMessagesOf(t, b, srv.URL, runID, "globex"); status != http.StatusNotFound {
		t.Fatalf("another tenant's messages: %d, want 404", status)
	}
	follow := map[string]any{"input": "and 3+4?", "id": "msg-2"}
	status, body = apiCall(t, srv, "POST", "/v1/runs/"+runID+"/messages", "acme", follow)
	if status != http.StatusAccepted || body["id"] != runID {
		t.Fatalf("follow-up: %d %v", status, body)
	}
	run := b.wait(t, runID)
	// Two steps per turn with maxSteps 2: the budget of steps is the continuation's.
	if run.Termination != planner.TerminationCompleted || run.Answer != "seven" {
		t.Fatalf("continued run ended %s (%s), answer %q", run.Termination, run.Detail, run.Answer)
	}
	if n := models["main"].Calls(); n != 4 {
		t.Fatalf("the model was asked %d times, want 4", n)
	}
	want := []struct {
		role provider.Role
		text string
		call string
	}{
		{provider.RoleUser, "what is 1+2?", ""}, {provider.RoleAssistant, "", "add"}, {provider.RoleTool, "", ""},
		{provider.RoleAssistant, "three", ""}, {provider.RoleUser, "and 3+4?", ""}, {provider.RoleAssistant, "", "add"},
		{provider.RoleTool, "", ""}, {provider.RoleAssistant, "seven", ""},
	}
	check := func(what string, msgs []provider.Message) {
		t.Helper()
		if len(msgs) != len(want) {
			t.Fatalf("%s: %d messages, want %d: %+v", what, len(msgs), len(want), msgs)
		}
		for i, w := range want {
			m := msgs[i]
			if m.Role != w.role || m.Text != w.text || (w.call != "") != (len(m.ToolCalls) > 0) ||
				w.call != "" && m.ToolCalls[0].Name != w.call {
				t.Fatalf("%s: message %d is %+v, want %+v", what, i, m, w)
			}
		}
	}
	// The model saw the whole conversation but its own last answer.
	check("the model's last request", append(models["main"].Last().Messages, provider.Message{Role: provider.RoleAssistant, Text: "seven"}))
	status, msgs := getMessagesOf(t, b, srv.URL, runID, "acme")
	if status != http.StatusOK {
		t.Fatalf("messages: %d", status)
	}
	check("GET messages", msgs)
	if len(run.Calls) != 2 || run.Calls[1].Status != "ok" || string(run.Calls[1].Output) != `{"sum":7}` {
		t.Fatalf("calls %+v", run.Calls)
	}
	if _, body := apiCall(t, srv, "GET", "/v1/runs/"+runID, "acme", nil); body["steps"] != float64(4) {
		t.Fatalf("steps %v, want 4", body["steps"])
	}

	// The same follow-up again (a retried POST) is not added again.
	status, body = apiCall(t, srv, "POST", "/v1/runs/"+runID+"/messages", "acme", follow)
	if status != http.StatusOK || body["status"] != string(planner.StatusDone) {
		t.Fatalf("repeated follow-up: %d %v, want 200 with the run", status, body)
	}
	if _, msgs := getMessagesOf(t, b, srv.URL, runID, "acme"); len(msgs) != len(want) || models["main"].Calls() != 4 {
		t.Fatalf("after the repeat: %d messages, %d model calls", len(msgs), models["main"].Calls())
	}

	// A canceled run is not continued.
	status, body = apiCall(t, srv, "POST", "/v1/runs", "acme", map[string]any{"input": "wait", "model": "slow", "tools": []string{"slow"}})
	if status != http.StatusAccepted {
		t.Fatalf("start: %d %v", status, body)
	}
	slowID := body["id"].(string)
	if status, body := apiCall(t, srv, "POST", "/v1/runs/"+slowID+"/cancel", "acme", nil); status != http.StatusOK {
		t.Fatalf("cancel: %d %v", status, body)
	}
	if status, body := apiCall(t, srv, "POST", "/v1/runs/"+slowID+"/messages", "acme", map[string]any{"input": "go on"}); status != http.StatusConflict || body["run"] == nil {
		t.Fatalf("follow-up of a canceled run: %d %v, want 409 with the run", status, body)
	}
}

const availabilityScript = `
steps:
  - calls: [{name: hold, arguments: {}}]
  - calls: [{name: add, arguments: {a: 1, b: 2}}]
  - text: add was refused
  - calls: [{name: add, arguments: {a: 2, b: 2}}]
  - text: four
`

// Tools disabled through the API while a run waits for a call are not offered at its
// next step, a call of one is refused not_allowed, and the model sees the reminder
// before that step; enabled again (with a follow-up), the tool runs.
func TestToolAvailabilityThroughTheAPI(t *testing.T) {
	b := setup(t, nil)
	release := make(chan struct{})
	startExecutor(t, b, tools.Definition{Type: "function", Name: "hold", Description: "Waits to be released.", Safe: true,
		Parameters: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, _ json.RawMessage) (any, error) {
			select {
			case <-release:
				return "released", nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		})
	models := b.withModels(t, map[string]string{"main": availabilityScript})
	srv := tenantAPI(t, b)
	status, body := apiCall(t, srv, "POST", "/v1/runs", "acme", map[string]any{"input": "go", "tools": []string{"hold", "add", "echo"}})
	if status != http.StatusAccepted {
		t.Fatalf("start: %d %v", status, body)
	}
	runID := body["id"].(string)
	b.awaitCallStatus(t, runID, callID0(runID), string(planner.CallPending))

	if status, body := apiCall(t, srv, "POST", "/v1/runs/"+runID+"/tools", "acme", map[string]any{"disable": []string{"nope"}}); status != http.StatusBadRequest {
		t.Fatalf("disabling an unknown tool: %d %v, want 400", status, body)
	}
	if status, _ := apiCall(t, srv, "POST", "/v1/runs/"+runID+"/tools", "globex", map[string]any{"disable": []string{"add"}}); status != http.StatusNotFound {
		t.Fatalf("another tenant's change: %d, want 404", status)
	}
	status, body = apiCall(t, srv, "POST", "/v1/runs/"+runID+"/tools", "acme", map[string]any{
		"disable": []string{"add"}, "reminder": "add is switched off; answer from what you know", "id": "r1"})
	if status != http.StatusOK || fmt.Sprint(body["disabled"]) != "[add]" {
		t.Fatalf("disable: %d %v", status, body)
	}
	// A repeat of the same change adds no second reminder.
	if status, body := apiCall(t, srv, "POST", "/v1/runs/"+runID+"/tools", "acme", map[string]any{
		"disable": []string{"add"}, "reminder": "add is switched off; answer from what you know", "id": "r1"}); status != http.StatusOK {
		t.Fatalf("repeat: %d %v", status, body)
	}
	close(release)
	run := b.wait(t, runID)
	if run.Termination != planner.TerminationCompleted || run.Answer != "add was refused" {
		t.Fatalf("run ended %s (%s), answer %q", run.Termination, run.Detail, run.Answer)
	}
	if len(run.Calls) != 2 || run.Calls[1].Name != "add" || run.Calls[1].Error == nil || run.Calls[1].Error.Code != tools.CodeNotAllowed {
		t.Fatalf("the call of the disabled tool: %+v", run.Calls[1])
	}
	if len(run.Offered) < 2 || slices.Contains(run.Offered[1].Tools, "add") || !slices.Contains(run.Offered[1].Tools, "echo") {
		t.Fatalf("offered %+v", run.Offered)
	}
	// The model was offered no add at step 1, and saw the reminder once, before it.
	step1 := models["main"].Requests()[1]
	for _, d := range step1.Tools {
		if d.Name == "add" {
			t.Fatalf("add was offered at step 1: %+v", step1.Tools)
		}
	}
	var reminders int
	for _, m := range step1.Messages {
		if m.Role == provider.RoleUser && strings.HasPrefix(m.Text, "add is switched off") {
			reminders++
		}
	}
	if last := step1.Messages[len(step1.Messages)-1]; reminders != 1 || last.Text != "add is switched off; answer from what you know" {
		t.Fatalf("step 1 messages %+v", step1.Messages)
	}
	if !slices.Contains(run.Disabled, "add") {
		t.Fatalf("the run does not record add as disabled: %v", run.Disabled)
	}

	// Enabled again with a follow-up, add runs.
	status, body = apiCall(t, srv, "POST", "/v1/runs/"+runID+"/messages", "acme", map[string]any{
		"input": "add is back: 2+2?", "tools": map[string]any{"enable": []string{"add"}}})
	if status != http.StatusAccepted {
		t.Fatalf("follow-up: %d %v", status, body)
	}
	run = b.wait(t, runID)
	if run.Answer != "four" || len(run.Calls) != 3 || run.Calls[2].Status != "ok" || len(run.Disabled) != 0 {
		t.Fatalf("after enabling: answer %q, calls %+v, disabled %v", run.Answer, run.Calls, run.Disabled)
	}
}

// GET /v1/runs/{id}/messages answers the conversation in order; GET /v1/runs/{id} the
// same view as before, assembled from the parts.
func TestAPIMessages(t *testing.T) {
	b := setup(t, map[string]string{"main": `
name: one-call
steps:
  - calls: [{name: add, arguments: {a: 2, b: 3}}]
  - text: five
`})
	run := b.run(t, planner.StartRequest{Input: "2+3?", Tools: []string{"add"}})
	h := Handler(b.p, Auth{})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/runs/"+run.ID+"/messages", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	var msgs []provider.Message
	if err := json.Unmarshal(rec.Body.Bytes(), &msgs); err != nil {
		t.Fatal(err)
	}
	var roles []provider.Role
	for _, m := range msgs {
		roles = append(roles, m.Role)
	}
	want := []provider.Role{provider.RoleUser, provider.RoleAssistant, provider.RoleTool, provider.RoleAssistant}
	if fmt.Sprint(roles) != fmt.Sprint(want) || msgs[0].Text != "2+3?" || msgs[3].Text != "five" ||
		string(msgs[2].ToolResults[0].Content) != `{"sum":5}` || msgs[1].ToolCalls[0].ID != msgs[2].ToolResults[0].CallID {
		t.Fatalf("messages %+v; want the input, the call, its result and the answer", msgs)
	}

	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/runs/"+run.ID, nil))
	var view planner.RunView
	if err := json.Unmarshal(rec.Body.Bytes(), &view); err != nil {
		t.Fatal(err)
	}
	if view.Answer != "five" || len(view.Calls) != 1 || string(view.Calls[0].Output) != `{"sum":5}` ||
		string(view.Calls[0].Arguments) != `{"a":2,"b":3}` || view.Calls[0].FinishedAt == nil || len(view.Offered) != 2 {
		t.Fatalf("view %+v; want the answer, the call with its arguments, output and timeline, the tools per step", view)
	}

	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/runs/rnope/messages", nil))
	if rec.Code != http.StatusNotFound {
		t.Fatalf("messages of an unknown run: status %d", rec.Code)
	}
}
