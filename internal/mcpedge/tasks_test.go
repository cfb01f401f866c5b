package mcpedge_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/internal/mcpedge"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/client"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// The tasks extension (io.modelcontextprotocol/tasks, 2026-07-28) spoken as raw JSON-RPC
// over HTTP, in the shapes of the specification's examples: no SDK implements it.

// rpcError is a JSON-RPC error object.
type rpcError struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

// taskState is a Task as the specification shapes it, with the fields of each status.
type taskState struct {
	ResultType     string `json:"resultType"`
	TaskID         string `json:"taskId"`
	Status         string `json:"status"`
	StatusMessage  string `json:"statusMessage"`
	CreatedAt      string `json:"createdAt"`
	LastUpdatedAt  string `json:"lastUpdatedAt"`
	TTLMs          *int64 `json:"ttlMs"`
	PollIntervalMs int64  `json:"pollIntervalMs"`
	InputRequests  map[string]struct {
		Method string `json:"method"`
		Params struct {
			Mode            string         `json:"mode"`
			Message         string         `json:"message"`
			RequestedSchema map[string]any `json:"requestedSchema"`
			Meta            map[string]any `json:"_meta"`
		} `json:"params"`
	} `json:"inputRequests"`
	Result *struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		IsError bool           `json:"isError"`
		Meta    map[string]any `json:"_meta"`
	} `json:"result"`
	Error *rpcError      `json:"error"`
	Meta  map[string]any `json:"_meta"`
}

var rpcIDs atomic.Int64

// rpc posts one request as a stateless 2026-07-28 client would, with token when not
// empty, declaring the tasks extension in its per-request capabilities when tasks is
// set; name is the Mcp-Name header. It returns the result, or the error.
func rpc(t *testing.T, url, token, method, name string, params map[string]any, tasks bool) (json.RawMessage, *rpcError) {
	t.Helper()
	caps := map[string]any{}
	if tasks {
		caps["extensions"] = map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}
	}
	params["_meta"] = map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": caps}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": rpcIDs.Add(1), "method": method, "params": params})
	req, _ := http.NewRequestWithContext(t.Context(), "POST", url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	req.Header.Set("Mcp-Name", name)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var answer struct {
		Result json.RawMessage `json:"result"`
		Error  *rpcError       `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		t.Fatalf("%s: status %d, %v", method, resp.StatusCode, err)
	}
	return answer.Result, answer.Error
}

// createTask calls tool as a task and returns its seed state.
func createTask(t *testing.T, url, token, tool string, args any) taskState {
	t.Helper()
	raw, rerr := rpc(t, url, token, "tools/call", tool, map[string]any{"name": tool, "arguments": args}, true)
	if rerr != nil {
		t.Fatalf("tools/call %s as a task: %+v", tool, rerr)
	}
	var ts taskState
	if err := json.Unmarshal(raw, &ts); err != nil {
		t.Fatal(err)
	}
	if ts.ResultType != "task" || ts.TaskID == "" || ts.Status != "working" || ts.TTLMs == nil || *ts.TTLMs <= 0 ||
		ts.PollIntervalMs <= 0 || !isTime(ts.CreatedAt) || !isTime(ts.LastUpdatedAt) {
		t.Fatalf("CreateTaskResult %s", raw)
	}
	return ts
}

func isTime(s string) bool {
	_, err := time.Parse(time.RFC3339, s)
	return err == nil
}

// getTask answers tasks/get for id.
func getTask(t *testing.T, url, token, id string) (taskState, *rpcError) {
	t.Helper()
	raw, rerr := rpc(t, url, token, "tasks/get", id, map[string]any{"taskId": id}, true)
	var ts taskState
	if rerr == nil {
		if err := json.Unmarshal(raw, &ts); err != nil {
			t.Fatal(err)
		}
		if ts.ResultType != "complete" || ts.TaskID != id || !isTime(ts.CreatedAt) || ts.TTLMs == nil {
			t.Fatalf("GetTaskResult %s", raw)
		}
	}
	return ts, rerr
}

// pollTask polls tasks/get for id until want holds.
func pollTask(t *testing.T, url, token, id, what string, want func(taskState) bool) taskState {
	t.Helper()
	var ts taskState
	natstest.EventuallyNil(t, waitTimeout, "task "+id+": "+what, func() error {
		var rerr *rpcError
		ts, rerr = getTask(t, url, token, id)
		if rerr != nil {
			t.Fatalf("tasks/get %s: %+v", id, rerr)
		}
		if !want(ts) {
			return fmt.Errorf("the task is %+v", ts)
		}
		return nil
	})
	return ts
}

func statusIs(status string) func(taskState) bool {
	return func(ts taskState) bool { return ts.Status == status }
}

// update sends tasks/update with the response to the approval and expects the empty ack.
func update(t *testing.T, url, token, id string, response map[string]any) *rpcError {
	t.Helper()
	raw, rerr := rpc(t, url, token, "tasks/update", id, map[string]any{"taskId": id,
		"inputResponses": map[string]any{"approval": response}}, true)
	if rerr == nil && !strings.Contains(string(raw), `"resultType":"complete"`) {
		t.Fatalf("tasks/update ack %s", raw)
	}
	return rerr
}

// A call made as a task answers at once with the task; another edge replica, which did
// not create it, polls it to completion from what the fleet stored, and the completed
// task carries the call's result. A client that does not declare the extension gets the
// result itself.
func TestTaskIsPolledToCompletionOnAnotherReplica(t *testing.T) {
	f := startFleet(t)
	one, _ := f.edge(t, testAuth, 0)
	two, _ := f.edge(t, testAuth, 0)
	raw, rerr := rpc(t, one, userToken, "server/discover", "", map[string]any{}, true)
	if rerr != nil || !strings.Contains(string(raw), `"extensions":{"io.modelcontextprotocol/tasks":{}}`) {
		t.Fatalf("server/discover: the capabilities declare the extension: %s %+v", raw, rerr)
	}

	created := createTask(t, one, userToken, "add", map[string]int{"a": 40, "b": 2})
	done := pollTask(t, two, userToken, created.TaskID, "the task completed", func(ts taskState) bool { return ts.Status != "working" })
	if done.Status != "completed" || done.Result == nil || done.Result.IsError || len(done.Result.Content) != 1 ||
		done.Result.Content[0].Text != `{"sum":42}` || done.Result.Meta["io.toolfleet/callId"] != created.TaskID ||
		done.CreatedAt != created.CreatedAt {
		t.Fatalf("completed task %+v result %+v", done, done.Result)
	}

	raw, rerr = rpc(t, one, userToken, "tools/call", "add", map[string]any{"name": "add", "arguments": map[string]int{"a": 1, "b": 2}}, false)
	if rerr != nil || strings.Contains(string(raw), `"task"`) || !strings.Contains(string(raw), `{\"sum\":3}`) {
		t.Fatalf("a call without the extension: %s %+v", raw, rerr)
	}
}

// A call of an unsafe tool waits for its approval: the task is input_required with the
// approval as an elicitation form, and tasks/update answers it — approve, deny, or
// approve with replacement arguments, which the fleet validates again.
func TestTaskApprovalIsInputRequired(t *testing.T) {
	f := startFleet(t)
	url, _ := f.edge(t, testAuth, 0)
	waitingApproval := func(args any) taskState {
		t.Helper()
		id := createTask(t, url, userToken, "delete_all", args).TaskID
		return pollTask(t, url, userToken, id, "input_required", statusIs("input_required"))
	}

	t.Run("approve", func(t *testing.T) {
		ts := waitingApproval(map[string]string{"where": "tmp"})
		in, ok := ts.InputRequests["approval"]
		approval, _ := in.Params.Meta["io.toolfleet/approval"].(map[string]any)
		if !ok || in.Method != "elicitation/create" || in.Params.Mode != "form" || in.Params.RequestedSchema["type"] != "object" ||
			!strings.Contains(in.Params.Message, "delete_all") || !strings.Contains(in.Params.Message, "tmp") ||
			approval["tool"] != "delete_all" || approval["callId"] != ts.TaskID ||
			!strings.Contains(approval["reason"].(string), "not marked safe") || !jsonEqual(approval["arguments"], map[string]any{"where": "tmp"}) {
			t.Fatalf("input requests %+v", ts.InputRequests)
		}
		// Polled again before the answer: the same request, under the same key.
		if again, _ := getTask(t, url, userToken, ts.TaskID); again.Status != "input_required" || again.InputRequests["approval"].Method != in.Method {
			t.Fatalf("polled again: %+v", again)
		}
		if rerr := update(t, url, userToken, ts.TaskID, map[string]any{"action": "accept"}); rerr != nil {
			t.Fatal(rerr)
		}
		done := pollTask(t, url, userToken, ts.TaskID, "completed", statusIs("completed"))
		if done.Result == nil || done.Result.IsError || !strings.Contains(done.Result.Content[0].Text, "tmp") {
			t.Fatalf("approved: %+v", done.Result)
		}
		// An answer to an approval answered already is ignored.
		if rerr := update(t, url, userToken, ts.TaskID, map[string]any{"action": "decline"}); rerr != nil {
			t.Fatal(rerr)
		}
	})

	t.Run("deny", func(t *testing.T) {
		ts := waitingApproval(map[string]string{"where": "prod"})
		if rerr := update(t, url, userToken, ts.TaskID, map[string]any{"action": "decline", "content": map[string]any{"reason": "not today"}}); rerr != nil {
			t.Fatal(rerr)
		}
		done := pollTask(t, url, userToken, ts.TaskID, "completed", statusIs("completed"))
		// A denial is a tool error (isError), which the specification files under completed.
		if done.Result == nil || !done.Result.IsError || done.Result.Meta["io.toolfleet/code"] != string(tools.CodeDenied) ||
			!strings.Contains(done.Result.Content[0].Text, "not today") || !strings.Contains(done.StatusMessage, "denied") {
			t.Fatalf("denied: %+v %+v", done, done.Result)
		}
	})

	t.Run("modify", func(t *testing.T) {
		ts := waitingApproval(map[string]string{"where": "tmp"})
		if rerr := update(t, url, userToken, ts.TaskID, map[string]any{"action": "accept", "content": map[string]any{"arguments": "not json"}}); rerr == nil || rerr.Code != -32602 {
			t.Fatalf("replacement arguments that are no JSON object: %+v", rerr)
		}
		if rerr := update(t, url, userToken, ts.TaskID, map[string]any{"action": "accept", "content": map[string]any{"arguments": `{"where": 5}`}}); rerr != nil {
			t.Fatal(rerr)
		}
		done := pollTask(t, url, userToken, ts.TaskID, "completed", statusIs("completed"))
		if done.Result == nil || !done.Result.IsError || done.Result.Meta["io.toolfleet/code"] != string(tools.CodeInvalidInput) ||
			!strings.Contains(done.Result.Content[0].Text, "/where") {
			t.Fatalf("modified with invalid arguments: %+v", done.Result)
		}

		ts = waitingApproval(map[string]string{"where": "tmp"})
		if rerr := update(t, url, userToken, ts.TaskID, map[string]any{"action": "accept", "content": map[string]any{"arguments": `{"where":"logs"}`}}); rerr != nil {
			t.Fatal(rerr)
		}
		done = pollTask(t, url, userToken, ts.TaskID, "completed", statusIs("completed"))
		if done.Result == nil || done.Result.IsError || !strings.Contains(done.Result.Content[0].Text, "logs") {
			t.Fatalf("modified with valid arguments: %+v", done.Result)
		}
	})
}

// tasks/cancel of a running task cancels its call on the fleet: the tool sees its
// context canceled, and the task ends cancelled.
func TestTaskCancel(t *testing.T) {
	f := startFleet(t)
	url, _ := f.edge(t, testAuth, 0)
	id := createTask(t, url, userToken, "slow", map[string]any{}).TaskID
	running := pollTask(t, url, userToken, id, "the tool's progress", func(ts taskState) bool {
		return ts.Status == "working" && strings.HasPrefix(ts.StatusMessage, "step ")
	})
	if running.LastUpdatedAt < running.CreatedAt {
		t.Errorf("lastUpdatedAt %s before createdAt %s", running.LastUpdatedAt, running.CreatedAt)
	}
	raw, rerr := rpc(t, url, userToken, "tasks/cancel", id, map[string]any{"taskId": id}, true)
	if rerr != nil || !strings.Contains(string(raw), `"resultType":"complete"`) {
		t.Fatalf("tasks/cancel: %s %+v", raw, rerr)
	}
	done := pollTask(t, url, userToken, id, "cancelled", func(ts taskState) bool { return ts.Status != "working" })
	if done.Status != "cancelled" || done.Meta["io.toolfleet/code"] != string(tools.CodeCanceled) || done.Result != nil {
		t.Fatalf("canceled task %+v", done)
	}
	awaitSlow(t, f.slowCanceled, id, "it saw its context canceled")
}

// An unknown task id and another tenant's task are the same invalid-params error, for
// every method; another role of the tenant is refused by the owner rule (CodeForbidden,
// the message events.MayAct gives); a request that does not declare the extension, or
// whose Mcp-Name is not its task id, is refused.
func TestTaskErrors(t *testing.T) {
	f := startFleet(t)
	url, _ := f.edge(t, testAuth, 0)
	id := createTask(t, url, userToken, "add", map[string]int{"a": 1, "b": 1}).TaskID
	pollTask(t, url, userToken, id, "completed", statusIs("completed"))

	for method, what := range map[string]string{"tasks/get": "see", "tasks/update": "answer the approvals of", "tasks/cancel": "cancel"} {
		params := func(id string) map[string]any {
			return map[string]any{"taskId": id, "inputResponses": map[string]any{"approval": map[string]any{"action": "accept"}}}
		}
		// An unknown id; the task of acme's user asked by another tenant.
		for _, probe := range []struct{ token, id string }{{userToken, "NOSUCHTASK"}, {userToken, "not.an.id"}, {globexToken, id}} {
			_, rerr := rpc(t, url, probe.token, method, probe.id, params(probe.id), true)
			if rerr == nil || rerr.Code != -32602 || rerr.Message != "Failed to retrieve task: Task not found" {
				t.Errorf("%s of %s with %s: %+v", method, probe.id, probe.token, rerr)
			}
		}
		// Asked by another role of acme, which is no operator role.
		want := events.MayAct(events.Act{Actor: events.Identity{Tenant: "acme", Role: "admin"}, Owner: events.Identity{Tenant: "acme", Role: "user"},
			What: what, Kind: "call", ID: id}, operatorRoles, nil)
		if _, rerr := rpc(t, url, adminToken, method, id, params(id), true); rerr == nil || rerr.Code != mcpedge.CodeForbidden ||
			want == nil || rerr.Message != want.Message {
			t.Errorf("%s of acme's user's task by acme's admin: %+v; want %d %v", method, rerr, mcpedge.CodeForbidden, want)
		}
	}

	_, rerr := rpc(t, url, userToken, "tasks/get", id, map[string]any{"taskId": id}, false)
	if rerr == nil || rerr.Code != -32021 || !strings.Contains(string(rerr.Data), `"requiredCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}`) {
		t.Errorf("tasks/get without the extension declared: %+v", rerr)
	}
	_, rerr = rpc(t, url, userToken, "tasks/get", "another", map[string]any{"taskId": id}, true)
	if rerr == nil || rerr.Code != -32020 {
		t.Errorf("tasks/get whose Mcp-Name is not its task id: %+v", rerr)
	}
}

// Who may answer a task's approval over MCP is one rule, events.MayAct, as at the API and
// the executors: another role of the tenant (acme's admin, on acme's user's task) is
// refused with the rule's message, word for word what the executors decide on that
// answer over NATS (the API's 403), and the call keeps waiting; an operator role's answer
// is carried out, and the result records the authenticated identity as the approver
// (the by the edge writes, naming the MCP client, is kept as claimed_by). Before, any
// other role was told the task did not exist, operator roles included.
func TestTaskApprovalFollowsTheOwnerRule(t *testing.T) {
	f := startFleet(t)
	url, _ := f.edge(t, testAuth, 0)
	id := createTask(t, url, userToken, "delete_all", map[string]string{"where": "tmp"}).TaskID
	pollTask(t, url, userToken, id, "input_required", statusIs("input_required"))

	var def tools.Definition
	for _, tt := range testTools {
		if tt.def.Name == "delete_all" {
			def = tt.def
		}
	}
	admin, user := events.Identity{Tenant: "acme", Role: "admin"}, events.Identity{Tenant: "acme", Role: "user"}
	want := events.MayAct(events.Act{Actor: admin, Owner: user, What: "answer the approvals of", Kind: "call", ID: id}, operatorRoles, &def)
	rerr := update(t, url, adminToken, id, map[string]any{"action": "accept", "content": map[string]any{"arguments": `{"where":"prod"}`}})
	if want == nil || want.Hidden || rerr == nil || rerr.Code != mcpedge.CodeForbidden || rerr.Message != want.Message || string(rerr.Data) != `{"status":403}` {
		t.Fatalf("acme's admin answering acme's user's approval: %+v; want %d %v", rerr, mcpedge.CodeForbidden, want)
	}
	if ts, rerr := getTask(t, url, userToken, id); rerr != nil || ts.Status != "input_required" {
		t.Fatalf("after the refused answer the task is %+v (%+v); want it waiting still", ts, rerr)
	}

	if rerr := update(t, url, approverToken, id, map[string]any{"action": "accept"}); rerr != nil {
		t.Fatalf("the operator's answer: %+v", rerr)
	}
	done := pollTask(t, url, approverToken, id, "completed", statusIs("completed"))
	if done.Result == nil || done.Result.IsError || !strings.Contains(done.Result.Content[0].Text, "tmp") {
		t.Fatalf("approved by the operator: %+v", done.Result)
	}
	c, err := client.New(f.js.NC, client.WithIdentity(user))
	if err != nil {
		t.Fatal(err)
	}
	res, found, err := c.StoredResult(t.Context(), "", id)
	if err != nil || !found || res.Approval == nil || res.Approval.By != "acme/approver" || res.Approval.ClaimedBy != "MCP client acme/approver" {
		t.Fatalf("the stored result's approval %+v (found %v, %v); want by acme/approver, claimed by the MCP client", res.Approval, found, err)
	}
}
