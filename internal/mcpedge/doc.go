// Package mcpedge serves the fleet as an MCP server: one job, the live tool catalog as
// MCP tools over streamable HTTP (protocol 2026-07-28, stateless), each tools/call a
// fleet call.
//
// # Transport
//
// [Edge.Handler] is the official Go SDK's stateless streamable HTTP handler
// (mcp.NewStreamableHTTPHandler with Stateless: true): every POST stands alone, no
// Mcp-Session-Id is issued, a 2026-07-28 client needs no initialize handshake and sends
// MCP-Protocol-Version, Mcp-Method and Mcp-Name headers (the SDK checks them against the
// body), and an older client that does initialize is answered as well. The edge keeps no
// per-session state: its only memory is a copy of the catalog, so any replica answers any
// request. Answers are plain JSON, except for a request that asks for progress, whose
// answer is an SSE stream (progress.go). A plain stateless tools/call (2026-07-28, no
// progress, no task) is answered by a fast path in the HTTP handler, without the SDK's
// per-request session and its repeated decoding, exactly as the SDK would answer it;
// any request it does not cover goes to the SDK (fastcall.go).
//
// # tools/list
//
// The tools are the catalog's (jsutil.Catalog, loaded once and then followed with its
// watch; a tools/call of a tool this copy has not seen yet reads the catalog directly),
// sorted by name, paged by name (the cursor is the last name of the previous page, so
// every replica continues any other's page). Each tool shows:
//
//	inputSchema     the definition's parameters, byte for byte; a tool registered
//	                without a schema shows the permissive {"type":"object"} and its
//	                description says that its arguments are not validated
//	description     the definition's
//	annotations     readOnlyHint = capability "read-only"; destructiveHint = !safe;
//	                idempotentHint = the definition's idempotent (default true)
//	_meta           io.toolfleet/needsApproval when a call waits for an approval
//
// The result carries ttlMs = the catalog's refresh interval (CatalogTTL/3: how stale an
// executor's entry may be anyway) and cacheScope "public" on an open edge, where every
// caller gets the same list, else "private": with tokens a list is the caller's own.
//
// # Auth
//
// Bearer tokens map to identities with internal/apiauth (the planner's tokens file):
// an unknown or missing token is answered 401 before MCP is spoken. A caller lists only
// the tools its identity may call (tools.Definition.AllowsCaller), and its calls are
// published with its identity on its call subjects (client.WithIdentity), so executors
// enforce roles and tenants again. An open edge (no token configured) is anonymous.
//
// A task (tasks.go) is a call of its creator: who may see it, answer its approval
// (tasks/update) or cancel it is events.MayAct's decision, as at the planner's API and the
// executors — its creator's role and the fleet's operator roles of its tenant
// ([Config].OperatorRoles), an approval only by a role that may call the tool itself.
// Another role gets [CodeForbidden] with the rule's message (the API's 403), another
// tenant "task not found" (its 404). The answer and the cancel go out with the caller's
// identity, which the executors check again and record (an approval's by, "MCP client
// <tenant>/<role>", is kept as claimed_by). The edge reaches only its own tasks: a
// planner run's calls and a composite's sub-calls are no tasks ("task not found"), and
// are answered over the API or NATS.
//
// # tools/call
//
// The call is made with pkg/client under a fresh call id and the caller's identity: it
// is published on the caller's call subject, and its result awaited on its result
// subject (an output stored by reference is read back). The answer maps the result:
//
//	status ok, output a JSON object   content: its JSON text; structuredContent: the object
//	status ok, output a JSON string   content: the string's text (what pkg/mcptool reads back
//	                                  as that string, so the edge imports into a fleet faithfully)
//	status ok, any other output       content: its JSON text; null or none: no content
//	any other status                  isError: true; the text is "<code>: <message>" and
//	                                  one line per schema violation; the tool's error
//	                                  output, if any, follows as a second text item
//
// Every result's _meta holds io.toolfleet/callId and io.toolfleet/status, a failed one's
// io.toolfleet/code (and io.toolfleet/violations). Schema violations are tool errors
// (isError), not protocol errors, as the specification asks since 2025-11-25, so a model
// sees them and can correct its call; the executor validates, as for every caller.
//
// A tool that is not in the catalog, or that the caller may not call, is a JSON-RPC
// error -32602 (invalid params) "unknown tool": the specification's answer for an unknown
// tool, and the same answer for both so that a caller cannot tell a tool it may not see
// from one that does not exist. A call whose result does not come within
// [Config].MaxWait (and no sooner than the client goes away) is a timeout tool error
// that names the call id; its deadline travelled with the call, so the fleet gives up on
// it too. A call JetStream does not take now (no responders while its stream elects a
// leader, a server that says it is unavailable or too busy) is the JSON-RPC error
// [CodeBusy] with data {"retryAfter":1}: nothing was called, and the same call may be
// sent again after that many seconds, as the planner API's 429 says. A fleet that cannot
// be reached otherwise (the connection closed) is a JSON-RPC internal error.
//
// # Progress and cancel
//
// A tools/call with a progressToken gets its call's tool_started and tool_progress run
// events as notifications/progress before its result (progress.go). When the request's
// context ends before the result — the client closed the stream (HTTP, 2026-07-28:
// PropagateRequestCancellation) or sent notifications/cancelled (stdio; the SDK cancels
// the handler's context) — the edge publishes the fleet's cancel of the call
// (client.Cancel): the executor cancels the tool's context, and the call is answered
// canceled.
//
// # Tasks
//
// The tasks extension (io.modelcontextprotocol/tasks) makes a tools/call a task when
// the request declares the extension: tasks.go says what of the specification is
// covered and how each state is read from what the fleet stores.
package mcpedge
