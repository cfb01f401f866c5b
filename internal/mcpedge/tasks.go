package mcpedge

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/pkg/client"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// The tasks extension (io.modelcontextprotocol/tasks, specification 2026-07-28,
// SEP-2663), which the Go SDK does not implement: its three methods are registered as
// custom methods of the SDK's server (mcp.AddReceivingCustomMethod), so they pass the
// SDK's transport, header and _meta checks like any request, and the edge's middleware
// hands them the caller; a task's answers are built here.
//
// Covered:
//
//   - The server declares the extension in its capabilities (server/discover). A
//     tools/call whose per-request capabilities (_meta
//     io.modelcontextprotocol/clientCapabilities) declare the extension always becomes
//     a task: the answer is a CreateTaskResult (resultType "task", status "working"),
//     sent once the task is durably created. Without the declaration a call is answered
//     as before, never with a task.
//   - Task id = the fleet call id: 26 random characters (130 bits, crypto/rand), so it
//     cannot be guessed. "Durably created": a tool_called run event of the call (its
//     own run, its tool) and then the call itself are stored in JetStream (both
//     acknowledged) before the answer.
//   - tasks/get answers from what JetStream stores, by direct gets on the caller's
//     tenant's subjects, so any edge replica answers for any task: the stored result
//     gives "completed" with the CallToolResult tools/call would have answered (a fleet
//     error is a tool error, isError with io.toolfleet/code, which the specification
//     files under completed, not failed), or "cancelled" for a call the fleet answered
//     canceled; a pending approval gives "input_required" with one input request
//     (below); else "working", with the tool's latest progress message as
//     statusMessage. "failed" (a JSON-RPC error) is only for a result that cannot be
//     read. An unknown id and another tenant's task are the same -32602 "task not
//     found": the task's marker is looked up on the caller's tenant's subject. Within
//     the tenant, a task is its creator's call (the marker names the creator's role),
//     and who may see it, answer its approval or cancel it is events.MayAct's decision,
//     as for any call: its creator's role, and the edge's operator roles
//     ([Config].OperatorRoles; for an approval, only a role that may call the tool
//     itself). Another role gets [CodeForbidden] with the rule's message, the API's 403.
//   - input_required = the fleet's approval of an unsafe tool's call: inputRequests
//     holds "approval", an elicitation/create form request whose message says the
//     tool, the arguments and why, whose _meta io.toolfleet/approval is the approval
//     request (tool, callId, arguments, reason, expiresAt), and whose form takes
//     optional replacement arguments (a JSON object, as text) and a reason. tasks/update
//     answers it: action "accept" approves (with the replacement arguments when given:
//     the executor validates them again, and a violation ends the call invalid_input),
//     "decline" or "cancel" denies. A response to any other key, or to an approval
//     answered already, is ignored, as the specification asks.
//   - tasks/cancel publishes the fleet's cancel event: a running tool's context is
//     canceled, a call not started (or waiting for approval) is answered canceled.
//   - Every tasks/* request must declare the extension (else -32021 with
//     requiredCapabilities); over HTTP its Mcp-Name header must be the task id (else
//     -32020, header mismatch).
//   - ttlMs = the call's deadline ([Config].TaskTimeout) plus how long results are kept
//     (events ResultsMaxAge); pollIntervalMs = 1000.
//
// Not covered: notifications/tasks and subscriptions/listen for task ids (clients
// poll), progress notifications of a task's call (the specification has none for
// tasks), and tasks for methods other than tools/call (the specification has none).
// A task's call is not canceled when the creating request's stream closes: it outlives
// its request by design.

const (
	tasksExtension = "io.modelcontextprotocol/tasks"
	// taskPollIntervalMs is the polling interval a task suggests.
	taskPollIntervalMs = 1000
	// approvalKey is the key of a task's only input request, the call's approval: a
	// call asks for approval at most once, so the key is never reused.
	approvalKey = "approval"
)

// wantsTask reports whether a tools/call declares the tasks extension in its
// per-request capabilities.
func wantsTask(p *mcp.CallToolParamsRaw) bool {
	return p != nil && declaresTasks(p.Meta)
}

func declaresTasks(meta map[string]any) bool {
	caps, _ := meta[mcp.MetaKeyClientCapabilities].(map[string]any)
	ext, _ := caps["extensions"].(map[string]any)
	_, ok := ext[tasksExtension]
	return ok
}

// requestInfo is what the edge's middleware hands a tasks/* handler: who calls, and
// the HTTP headers (nil over stdio).
type requestInfo struct {
	caller events.Identity
	header http.Header
}

type requestInfoKey struct{}

func withRequest(ctx context.Context, caller events.Identity, req mcp.Request) context.Context {
	info := requestInfo{caller: caller}
	if extra := req.GetExtra(); extra != nil {
		info.header = extra.Header
	}
	return context.WithValue(ctx, requestInfoKey{}, info)
}

// taskParams are the params of tasks/get, tasks/update and tasks/cancel.
type taskParams struct {
	mcp.ParamsBase
	TaskID string `json:"taskId"`
	// InputResponses (tasks/update) answer input requests by key.
	InputResponses map[string]json.RawMessage `json:"inputResponses,omitempty"`
}

// task is a Task of the specification, with its status's fields: CreateTaskResult
// (resultType "task") and GetTaskResult (resultType "complete").
type task struct {
	mcp.ResultBase
	ResultType     string                  `json:"resultType"`
	TaskID         string                  `json:"taskId"`
	Status         string                  `json:"status"`
	StatusMessage  string                  `json:"statusMessage,omitempty"`
	CreatedAt      string                  `json:"createdAt"`
	LastUpdatedAt  string                  `json:"lastUpdatedAt"`
	TTLMs          int64                   `json:"ttlMs"`
	PollIntervalMs int64                   `json:"pollIntervalMs,omitempty"`
	InputRequests  map[string]inputRequest `json:"inputRequests,omitempty"`
	Result         *mcp.CallToolResult     `json:"result,omitempty"`
	Error          *jsonrpc.Error          `json:"error,omitempty"`
}

// inputRequest is a server-to-client request a task waits for.
type inputRequest struct {
	Method string            `json:"method"`
	Params *mcp.ElicitParams `json:"params"`
}

// ack is the empty acknowledgement of tasks/update and tasks/cancel.
type ack struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
}

// addTaskMethods registers the extension's methods on s.
func (e *Edge) addTaskMethods(s *mcp.Server) {
	for method, h := range map[string]func(context.Context, requestInfo, *taskParams) (mcp.Result, error){
		"tasks/get": e.getTask, "tasks/update": e.updateTask, "tasks/cancel": e.cancelTask,
	} {
		err := mcp.AddReceivingCustomMethod(s, method, func(ctx context.Context, _ *mcp.ServerSession, p *taskParams) (mcp.Result, error) {
			info, _ := ctx.Value(requestInfoKey{}).(requestInfo) // set by the middleware
			if err := checkTaskRequest(method, info, p); err != nil {
				return nil, err
			}
			return h(ctx, info, p)
		})
		if err != nil { // a name the SDK took for itself: a programming error
			panic(err)
		}
	}
}

// tasksRequired is the data of the error refusing a tasks/* request of a client that
// did not declare the tasks extension.
var tasksRequired = json.RawMessage(`{"requiredCapabilities":{"extensions":{"` + tasksExtension + `":{}}}}`)

// checkTaskRequest refuses a tasks/* request without the extension declared, without a
// task id, or whose Mcp-Name header is not its task id.
func checkTaskRequest(method string, info requestInfo, p *taskParams) error {
	if p == nil || !declaresTasks(p.Meta) {
		return &jsonrpc.Error{Code: mcp.CodeMissingRequiredClientCapabilities, Message: "Missing required client capability: " +
			method + " needs the " + tasksExtension + " extension in the request's client capabilities", Data: tasksRequired}
	}
	if p.TaskID == "" {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: method + " needs a taskId"}
	}
	if v := info.header.Get("Mcp-Protocol-Version"); v >= "2026-07-28" {
		if name := info.header.Get("Mcp-Name"); name != p.TaskID {
			return &jsonrpc.Error{Code: mcp.CodeHeaderMismatch,
				Message: fmt.Sprintf("header mismatch: Mcp-Name header value %q is not the taskId %q", name, p.TaskID)}
		}
	}
	return nil
}

// createTask makes a tools/call a task: its marker and its call are stored, then its
// seed state is the answer.
func (e *Edge) createTask(ctx context.Context, caller events.Identity, p *mcp.CallToolParamsRaw) (mcp.Result, error) {
	c, err := e.callable(ctx, caller, p)
	if err != nil {
		return nil, err
	}
	id, now := rand.Text(), time.Now().UTC()
	// The marker first: once the call is stored, tasks/get must find the task. A marker
	// whose call failed to be stored is never seen: its id was not given out.
	detail, err := json.Marshal(markerDetail{Role: caller.Role})
	var marker *nats.Msg
	if err == nil {
		marker, err = events.NewRunEvent("/toolfleet/mcp-edge", "tool_called",
			events.RunEvent{RunID: id, Tenant: caller.Tenant, Tool: p.Name, CallID: id, Detail: detail}, now)
	}
	if err == nil {
		_, err = e.js.PublishMsg(ctx, marker)
	}
	if err == nil {
		_, err = c.Submit(ctx, client.Request{Tool: p.Name, Arguments: callArguments(p.Arguments), ID: id}, now.Add(e.cfg.TaskTimeout))
	}
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the task could not be created: " + err.Error()}
	}
	t := e.newTask(id, now, now, "working")
	t.ResultType = "task"
	t.StatusMessage = "The call is queued on the fleet."
	return t, nil
}

func (e *Edge) newTask(id string, created, updated time.Time, status string) *task {
	return &task{ResultType: "complete", TaskID: id, Status: status, CreatedAt: created.UTC().Format(time.RFC3339Nano),
		LastUpdatedAt: updated.UTC().Format(time.RFC3339Nano), TTLMs: e.taskTTLMs, PollIntervalMs: taskPollIntervalMs}
}

// errTaskNotFound answers an unknown task id, and another tenant's (events.MayAct's
// hidden refusal).
var errTaskNotFound = &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Failed to retrieve task: Task not found"}

// markerDetail is the Detail of a task's marker: the role of the caller that made it
// (its tenant is the marker's subject's).
type markerDetail struct {
	Role string `json:"role"`
}

// found is a task's marker: its tool, when it was created, and by whom (the call's
// owner).
type found struct {
	tool    string
	created time.Time
	owner   events.Identity
}

// lookup reads the marker of task id on the caller's tenant's subject, so that another
// tenant's task does not exist for the caller; what the caller may do with a task of its
// tenant is mayAct's to say.
func (e *Edge) lookup(ctx context.Context, caller events.Identity, id string) (found, error) {
	if events.ValidateID("task id", id) != nil {
		return found{}, errTaskNotFound
	}
	subj, err := events.RunEventSubject(caller.Tenant, id, "tool_called")
	if err != nil {
		return found{}, errTaskNotFound
	}
	// The marker was stored before the task's id was given out, but a follower of a
	// replicated events stream may not have it yet.
	m, err := jsutil.DirectGetWritten(ctx, e.nc, events.StreamEvents, subj)
	if err != nil {
		return found{}, internalError(err)
	}
	if m == nil {
		return found{}, errTaskNotFound
	}
	ev, _, r, err := events.DecodeRunEvent(events.CoreMsg(m))
	var d markerDetail
	if err != nil || r.CallID != id || r.Tool == "" || json.Unmarshal(r.Detail, &d) != nil {
		return found{}, errTaskNotFound
	}
	return found{tool: r.Tool, created: ev.Time, owner: events.Identity{Tenant: caller.Tenant, Role: d.Role}}, nil
}

// mayAct decides, with events.MayAct, whether caller may do what (a verb phrase: "see",
// "cancel", "answer the approvals of") to task f, whose id is id: nil, or the error the
// caller gets. An approval answer (letsRun) also needs a caller that may call the tool.
func (e *Edge) mayAct(ctx context.Context, caller events.Identity, f found, id, what string, letsRun bool) error {
	var tool *tools.Definition
	if letsRun {
		if en, ok := e.view.lookup(ctx, f.tool); ok {
			tool = &en.def
		}
	}
	switch why := events.MayAct(events.Act{Actor: caller, Owner: f.owner, What: what, Kind: "call", ID: id}, e.cfg.OperatorRoles, tool); {
	case why == nil:
		return nil
	case why.Hidden:
		return errTaskNotFound
	default:
		return forbidden(why)
	}
}

// taskClient finds task id for the caller, checks that it may do what to it (mayAct),
// and returns the client that acts for the caller.
func (e *Edge) taskClient(ctx context.Context, caller events.Identity, id, what string) (found, *client.Client, error) {
	f, err := e.lookup(ctx, caller, id)
	if err != nil {
		return found{}, nil, err
	}
	if err := e.mayAct(ctx, caller, f, id, what, false); err != nil {
		return found{}, nil, err
	}
	c, err := e.clientFor(caller)
	if err != nil {
		return found{}, nil, internalError(err)
	}
	return f, c, nil
}

func internalError(err error) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
}

// getTask answers tasks/get from stored state.
func (e *Edge) getTask(ctx context.Context, info requestInfo, p *taskParams) (mcp.Result, error) {
	f, c, err := e.taskClient(ctx, info.caller, p.TaskID, "see")
	if err != nil {
		return nil, err
	}
	id := p.TaskID
	res, done, err := c.StoredResult(ctx, "", id)
	switch {
	case done && err != nil: // stored, but unreadable: the one JSON-RPC failure
		t := e.newTask(id, f.created, f.created, "failed")
		t.StatusMessage = "The call's result cannot be read: " + err.Error()
		t.Error = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
		return t, nil
	case err != nil:
		return nil, internalError(err)
	case done:
		return e.endedTask(id, f, res), nil
	}
	ev, req, pending, err := c.PendingApproval(ctx, f.tool, id)
	if err != nil {
		return nil, internalError(err)
	}
	if pending {
		t := e.newTask(id, f.created, ev.Time, "input_required")
		t.StatusMessage = "The call waits for an approval: " + req.Reason
		t.InputRequests = map[string]inputRequest{approvalKey: {Method: "elicitation/create", Params: approvalForm(req)}}
		return t, nil
	}
	t := e.newTask(id, f.created, f.created, "working")
	if at, msg := e.lastProgress(ctx, info.caller.Tenant, id); !at.IsZero() {
		t.LastUpdatedAt, t.StatusMessage = at.UTC().Format(time.RFC3339Nano), msg
	}
	return t, nil
}

// endedTask is the task of a call the fleet answered.
func (e *Edge) endedTask(id string, f found, res events.Result) *task {
	updated := res.FinishedAt
	if updated.IsZero() {
		updated = f.created
	}
	r := toResult(id, res)
	if res.Status == events.StatusCanceled {
		t := e.newTask(id, f.created, updated, "cancelled")
		t.StatusMessage = firstText(r)
		t.Meta = r.Meta
		return t
	}
	t := e.newTask(id, f.created, updated, "completed")
	t.Result = r
	if r.IsError {
		t.StatusMessage = firstText(r)
	}
	return t
}

func firstText(r *mcp.CallToolResult) string {
	if len(r.Content) == 0 {
		return ""
	}
	if tc, ok := r.Content[0].(*mcp.TextContent); ok {
		return tc.Text
	}
	return ""
}

// lastProgress is the latest progress report of call id: when, and its message (or
// "running" once it started without a report); zero when it has not started.
func (e *Edge) lastProgress(ctx context.Context, tenant, id string) (time.Time, string) {
	for _, what := range []string{"tool_progress", "tool_started"} {
		subj, err := events.RunEventSubject(tenant, id, what)
		if err != nil {
			return time.Time{}, ""
		}
		m, err := jsutil.DirectGetLast(ctx, e.nc, events.StreamEvents, subj)
		if err != nil || m == nil {
			continue
		}
		p, ok := progressOf(m)
		if !ok {
			continue
		}
		ev, _, _, _ := events.DecodeRunEvent(events.CoreMsg(m))
		if p.Message == "started" || p.Message == "" {
			p.Message = "running"
		}
		return ev.Time, p.Message
	}
	return time.Time{}, ""
}

// approvalForm is the elicitation that asks for the approval req.
func approvalForm(req events.ApprovalRequest) *mcp.ElicitParams {
	return &mcp.ElicitParams{
		Mode: "form",
		Message: fmt.Sprintf("Approve the call of %s with arguments %s? It needs an approval because %s. "+
			"Accept to run it (optionally with replacement arguments), decline to deny it.", req.Tool, req.Arguments, req.Reason),
		RequestedSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"arguments": map[string]any{"type": "string", "title": "Replacement arguments",
					"description": "A JSON object to run the call with instead; validated against the tool's schema again. Empty: the call's own arguments."},
				"reason": map[string]any{"type": "string", "title": "Reason", "description": "Why, for the record (shown to the caller when denied)."},
			},
		},
		Meta: mcp.Meta{"io.toolfleet/approval": map[string]any{"tool": req.Tool, "callId": req.CallID,
			"arguments": req.Arguments, "reason": req.Reason, "expiresAt": req.ExpiresAt}},
	}
}

// elicitResponse is an answer to the approval form.
type elicitResponse struct {
	Action  string `json:"action"`
	Content struct {
		Arguments json.RawMessage `json:"arguments"`
		Reason    string          `json:"reason"`
	} `json:"content"`
}

// updateTask answers the task's pending approval with its input response, as the
// caller: the executor records the caller's identity as the approver (and the answer's by
// as what it claimed).
func (e *Edge) updateTask(ctx context.Context, info requestInfo, p *taskParams) (mcp.Result, error) {
	f, err := e.lookup(ctx, info.caller, p.TaskID)
	if err != nil {
		return nil, err
	}
	if err := e.mayAct(ctx, info.caller, f, p.TaskID, "answer the approvals of", true); err != nil {
		return nil, err
	}
	raw, ok := p.InputResponses[approvalKey]
	if !ok { // no response to an outstanding request: nothing to do
		return &ack{ResultType: "complete"}, nil
	}
	var r elicitResponse
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "inputResponses.approval: " + err.Error()}
	}
	by := "MCP client"
	if !info.caller.IsZero() {
		by += " " + info.caller.Tenant + "/" + info.caller.Role
	}
	answer := events.ApprovalAnswer{By: by, Reason: r.Content.Reason}
	switch r.Action {
	case "accept":
		answer.Decision = events.DecisionApprove
		if answer.Arguments, err = replacementArguments(r.Content.Arguments); err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "inputResponses.approval.content.arguments: " + err.Error()}
		}
	case "decline", "cancel":
		answer.Decision = events.DecisionDeny
		if answer.Reason == "" {
			answer.Reason = "the MCP client's user chose " + r.Action
		}
	default:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
			Message: fmt.Sprintf("inputResponses.approval: action %q is none of accept, decline, cancel", r.Action)}
	}
	c, err := e.clientFor(info.caller)
	if err != nil {
		return nil, internalError(err)
	}
	// Only an outstanding approval is answered: one answered already, or a call that
	// asks for none, ignores the response.
	if _, _, pending, err := c.PendingApproval(ctx, f.tool, p.TaskID); err != nil {
		return nil, internalError(err)
	} else if !pending {
		return &ack{ResultType: "complete"}, nil
	}
	if err := c.Answer(ctx, f.tool, p.TaskID, answer); err != nil && !errors.Is(err, client.ErrAnswered) {
		return nil, internalError(err)
	}
	return &ack{ResultType: "complete"}, nil
}

// replacementArguments are an approval's replacement arguments: a JSON object, given as
// its text (what a form takes) or as the object; none for empty text.
func replacementArguments(raw json.RawMessage) (json.RawMessage, error) {
	s := strings.TrimSpace(string(raw))
	if s == "" || s == "null" || s == `""` {
		return nil, nil
	}
	if s[0] == '"' {
		var text string
		if err := json.Unmarshal(raw, &text); err != nil {
			return nil, err
		}
		s = strings.TrimSpace(text)
		if s == "" {
			return nil, nil
		}
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &obj); err != nil || obj == nil {
		return nil, tools.Errorf(tools.CodeInvalidInput, "want a JSON object, got %.80q", s)
	}
	return json.RawMessage(s), nil
}

// cancelTask publishes the fleet's cancel of the task's call.
func (e *Edge) cancelTask(ctx context.Context, info requestInfo, p *taskParams) (mcp.Result, error) {
	f, c, err := e.taskClient(ctx, info.caller, p.TaskID, "cancel")
	if err != nil {
		return nil, err
	}
	if err := c.Cancel(ctx, f.tool, p.TaskID); err != nil {
		return nil, internalError(err)
	}
	return &ack{ResultType: "complete"}, nil
}
