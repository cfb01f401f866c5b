// Package mcptool serves the tools of an MCP server as toolfleet tools: it connects to
// the server (a process over stdio, or a URL over streamable HTTP, through the official
// Go SDK, github.com/modelcontextprotocol/go-sdk), lists its tools, registers each in a
// [tools.Registry] under a prefix, runs their calls with tools/call, and keeps the list
// fresh.
//
// # Start-up
//
// [Start] connects before it returns: an executor serves a server's tools only once it
// has listed them. A server that cannot be reached is tried again with backoff until
// [Config.ConnectTimeout] (30 s) passes; then Start fails with the last error. Every
// listed tool must become a valid definition, or Start fails naming each refused tool and
// why, and registers none of them (exclude a tool with [Policy].Exclude to start without it).
//
// # Names, schemas and safety
//
// A server's tool "read_file" with prefix "fs" is served as "fs_read_file". A name that
// does not then match [tools.NamePattern] is refused; give it a name of its own with
// [Override].Name. The tool's inputSchema becomes the definition's parameters and goes
// through the registry's fail-closed compilation (santhosh-tekuri/jsonschema/v6, no
// remote $ref): a schema that does not compile refuses the tool; every call is validated
// before it reaches the server. The outputSchema is not enforced.
//
// The server's annotations (readOnlyHint and the like) are hints from code toolfleet does
// not control, so they grant nothing: they do not make a tool safe, nor read-only. One
// of them restricts: a tool the [Policy] declares read-only (capabilities: read-only)
// runs without an approval only when the server also declares readOnlyHint for it;
// without the hint each call waits for an approval saying so (see
// tools.Registry.ApprovalReason). What a tool may do is set in [Policy]: an imported
// tool is unsafe (calls wait for an approval) and not idempotent (never run twice for
// one call id) unless its [Override] or the server's default says otherwise; roles,
// timeout, retry, tags and capabilities are set the same way. Every imported tool is
// tagged "mcp" and with the server's name.
//
// # Calls and results
//
// A call is one tools/call with the validated arguments. The result maps to the tool's
// output:
//
//	structuredContent present         the output is structuredContent, as is
//	one text content item             the output is that text, a JSON string
//	no content                        the output is null
//	anything else (images, several    the output is {"content": [...]}, the items in
//	items, resources)                 MCP's own JSON shape
//	isError: true                     tool_error_permanent; the message is the text
//	                                  content (or the structured content), so the
//	                                  model sees what the tool said
//	a JSON-RPC error (unknown tool,   tool_error_permanent, with the server's code
//	invalid params)                   and message
//	the connection lost mid-call      tool_error, saying that the server went away
//	(the process died, the HTTP       during the call and that the call may or may not
//	session ended)                    have taken effect; the adapter reconnects
//	the attempt's deadline            timeout (the request is cancelled on the server)
//
// # Keeping the list fresh
//
// The tools are listed again when the server sends notifications/tools/list_changed,
// when its last list result's ttlMs hint (SEP-2549, protocol 2026-07-28) runs out, and
// otherwise every [Config.Refresh] (5 minutes). A new tool is registered, a changed one
// replaced in place (calls validate against its new schema at once), a removed one
// unregistered (its calls are answered no_such_tool). A tool that cannot be registered
// any more is logged and unregistered: a schema that does not compile is never served.
// [Config.OnChange] hears of every change.
//
// An executor (package executor) builds its consumers and catalog entries once, at
// start: a tool added later is in the registry but served only by an executor started
// after it. The executor program (cmd/executor/executorcli) starts a new executor beside
// the running one on [Config.OnChange] and stops the old one once the new one serves.
//
// # Reconnecting
//
// When the connection ends (a stdio server exits, an HTTP session is lost), the adapter
// connects again with backoff (from 100 ms up to 10 s; it starts over only after a
// connection that lasted a minute, so a server that dies at once is not restarted in a
// tight loop), starting a fresh process for a stdio server, and lists the tools again.
// A call made meanwhile waits for the connection within its own deadline. A call whose
// connection is lost is answered at once (see above) and is not sent again by the
// adapter: only the executor's retry policy, for a tool declared idempotent, repeats it.
package mcptool
