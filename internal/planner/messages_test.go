package planner

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/pkg/events"
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
	if run.Termination != TerminationCompleted || run.Answer != "seven" {
		t.Fatalf("continued run ended %s (%s), answer %q", run.Termination, run.Detail, run.Answer)
	}
	if n := models["main"].calls(); n != 4 {
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
	check("the model's last request", append(models["main"].last().Messages, provider.Message{Role: provider.RoleAssistant, Text: "seven"}))
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
	if status != http.StatusOK || body["status"] != string(StatusDone) {
		t.Fatalf("repeated follow-up: %d %v, want 200 with the run", status, body)
	}
	if _, msgs := getMessagesOf(t, b, srv.URL, runID, "acme"); len(msgs) != len(want) || models["main"].calls() != 4 {
		t.Fatalf("after the repeat: %d messages, %d model calls", len(msgs), models["main"].calls())
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

const waitThenAnswer = `
steps:
  - calls: [{name: add, arguments: {a: 1, b: 1}}]
  - text: two
  - text: noted
`

// A follow-up to a run that is still running joins it before its next model call.
func TestFollowUpToARunningRun(t *testing.T) {
	b := setup(t, nil)
	gate := make(chan struct{})
	kept := &keptModel{Model: scriptedModel(t, waitThenAnswer)}
	b.swapPlanner(t, Config{Models: map[string]provider.Model{"main": &gatedModel{keptModel: kept, gate: gate}}, DefaultModel: "main"})
	models := map[string]*keptModel{"main": kept}
	run, err := b.p.Start(b.ctx, StartRequest{Input: "1+1", Tools: []string{"add"}})
	if err != nil {
		t.Fatal(err)
	}
	gate <- struct{}{} // step 0 answers with the call
	// While the call runs or its step waits, a follow-up comes.
	if _, added, err := b.p.Continue(b.ctx, run.ID, FollowUp{Input: "also: be brief"}); err != nil || !added {
		t.Fatalf("follow-up: added %v, %v", added, err)
	}
	close(gate)
	done := b.wait(t, run.ID)
	if done.Termination != TerminationCompleted || done.Answer != "two" {
		t.Fatalf("run ended %s (%s), answer %q", done.Termination, done.Detail, done.Answer)
	}
	var texts []string
	for _, m := range models["main"].last().Messages {
		if m.Role == provider.RoleUser {
			texts = append(texts, m.Text)
		}
	}
	if len(texts) != 2 || texts[1] != "also: be brief" {
		t.Fatalf("the model's last request had user messages %q", texts)
	}
	if got := done.Messages[len(done.Messages)-2]; got.Role != provider.RoleUser || got.Text != "also: be brief" {
		t.Fatalf("the follow-up is not before the answer: %+v", done.Messages)
	}
}

// gatedModel answers once the gate lets it (a receive; a closed gate lets every call).
type gatedModel struct {
	*keptModel
	gate chan struct{}
}

func (m *gatedModel) Generate(ctx context.Context, req provider.Request) (*provider.Response, error) {
	select {
	case <-m.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return m.keptModel.Generate(ctx, req)
}

// Stream is what the loop calls: gated like Generate, streaming nothing.
func (m *gatedModel) Stream(ctx context.Context, req provider.Request, _ func(provider.Delta)) (*provider.Response, error) {
	return m.Generate(ctx, req)
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
	b.awaitCallStatus(t, runID, callID0(runID), string(CallPending))

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
	if run.Termination != TerminationCompleted || run.Answer != "add was refused" {
		t.Fatalf("run ended %s (%s), answer %q", run.Termination, run.Detail, run.Answer)
	}
	if len(run.Calls) != 2 || run.Calls[1].Name != "add" || run.Calls[1].Error == nil || run.Calls[1].Error.Code != tools.CodeNotAllowed {
		t.Fatalf("the call of the disabled tool: %+v", run.Calls[1])
	}
	if len(run.Offered) < 2 || slices.Contains(run.Offered[1].Tools, "add") || !slices.Contains(run.Offered[1].Tools, "echo") {
		t.Fatalf("offered %+v", run.Offered)
	}
	// The model was offered no add at step 1, and saw the reminder once, before it.
	models["main"].mu.Lock()
	step1 := models["main"].reqs[1]
	models["main"].mu.Unlock()
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

// A run stopped by max_steps is continued with a fresh budget of steps: the step it
// could not take is taken in the continuation, with the follow-up in the conversation.
func TestFollowUpContinuesARunThatUsedItsSteps(t *testing.T) {
	b := setup(t, map[string]string{"main": `
steps:
  - calls: [{name: add, arguments: {a: 1, b: 2}}]
  - text: three, as you asked
`})
	run := b.run(t, StartRequest{Input: "1+2", Tools: []string{"add"}, Limits: Limits{MaxSteps: 1}})
	if run.Termination != TerminationMaxSteps {
		t.Fatalf("first turn ended %s", run.Termination)
	}
	if _, added, err := b.p.Continue(b.ctx, run.ID, FollowUp{Input: "go on"}); err != nil || !added {
		t.Fatalf("follow-up: %v, %v", added, err)
	}
	run = b.wait(t, run.ID)
	if run.Termination != TerminationCompleted || run.Answer != "three, as you asked" || run.Turn != 1 || run.stepsTaken() != 2 {
		t.Fatalf("continued run ended %s (%s), answer %q, turn %d, steps %d", run.Termination, run.Detail, run.Answer, run.Turn, run.stepsTaken())
	}
	roles := ""
	for _, m := range run.Messages {
		roles += string(m.Role)[:1]
	}
	if roles != "uatua" || run.Messages[3].Text != "go on" {
		t.Fatalf("conversation %s: %+v", roles, run.Messages)
	}
}

// A run that timed out while a call ran is continued: a call still without a result is
// answered canceled (and the tool is told to stop), and the model goes on with it.
func TestFollowUpAfterATimeoutWithACallRunning(t *testing.T) {
	b := setup(t, map[string]string{"main": `
steps:
  - calls: [{name: slow, arguments: {}}]
  - text: moved on
`})
	// 2s, not 1s: the continuation gets the same limit, and on a loaded machine one in
	// about 30 took longer than 1s to be stepped (seen before this round's changes too).
	run := b.run(t, StartRequest{Input: "wait", Tools: []string{"slow"}, Limits: Limits{Timeout: tools.Duration(2 * time.Second)}})
	if run.Termination != TerminationTimeout || len(run.Calls) != 1 {
		t.Fatalf("first turn ended %s with calls %+v", run.Termination, run.Calls)
	}
	if _, added, err := b.p.Continue(b.ctx, run.ID, FollowUp{Input: "go on without it"}); err != nil || !added {
		t.Fatalf("follow-up: %v, %v", added, err)
	}
	run = b.wait(t, run.ID)
	// The call carries the run's deadline: the executor may have answered it timeout
	// first; otherwise the continuation answered it canceled.
	if st := run.Calls[0].Status; run.Termination != TerminationCompleted || run.Answer != "moved on" ||
		st != string(events.StatusCanceled) && st != string(events.StatusTimeout) {
		t.Fatalf("continued run ended %s (%s), answer %q, calls %+v", run.Termination, run.Detail, run.Answer, run.Calls)
	}
}
