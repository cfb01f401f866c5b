// Package toolsfile declares tools without recompiling: a tools file lists tools by their
// canonical definition (the JSON names of tools.Definition) and says how each runs, as a
// process or as an HTTP endpoint, and MCP servers whose tools it imports. A tool can so
// be written in any language.
//
// # The file
//
// YAML (.yaml, .yml) or JSON (.json), chosen by the extension; both have the same shape:
//
//	tools:
//	  - name: word_count
//	    description: Count the words of a text.
//	    safe: true
//	    parameters:
//	      type: object
//	      properties: {text: {type: string}}
//	      required: [text]
//	      additionalProperties: false
//	    command:
//	      argv: [./bin/word_count.sh]   # relative to this file's directory; no shell implied
//	      passEnv: [PATH, LANG]          # all the process sees of the executor's environment
//	      env: {MODE: strict}            # plus these
//	      timeout: 5s                    # then the process group is killed
//	      sandbox:                       # optional: Landlock and seccomp (see below)
//	        read: [/srv/dictionaries]    # read besides the system paths, the program, dir
//	        write: [./scratch]           # write only here (and /dev/null)
//	        network: false               # no socket at all (the default)
//	      runAs: {uid: 1001, gid: 1001}  # optional: run as this user (a root executor)
//	  - name: weather
//	    parameters: {type: object, properties: {city: {type: string}}, required: [city]}
//	    secrets:
//	      - {name: WEATHER_TOKEN, file: /var/run/secrets/toolfleet/weather-token}
//	    http:
//	      url: https://weather.internal/v1/now
//	      headers: {Authorization: "Bearer ${secret:WEATHER_TOKEN}"}
//	      timeout: 3s
//
// [Load] refuses, all problems at once and each with the file and tool it concerns: an
// unknown field anywhere, a tool with no runner or with both, a name the providers refuse,
// a duplicate name, a missing schema without allowNoSchema and a noSchemaMode,
// noSchemaMode read-only on a tool without "capabilities": ["read-only"], a program
// that does not exist or cannot be executed, a header that references a variable not in
// passEnv or a secret the tool does not declare, a malformed or duplicate secret, a
// sandbox path that does not exist, a read-only tool granted sandbox writes or the
// network, runAs with uid or gid 0. [Register] then adds the tools to a registry, whose
// rules also apply (the schema compiles, no remote $ref), and refuses a sandboxed tool
// (read-only, or with the sandbox option) on a kernel whose Landlock or seccomp cannot
// enforce its sandbox, or in a program that did not call sandbox.Init, and a tool with
// runAs in an executor that does not run as root ([ErrNotRoot]).
//
// # Read-only tools and the sandbox
//
// A tool that declares itself read-only ("capabilities": ["read-only"], which
// noSchemaMode read-only requires) runs only where it is kept to reads; otherwise each
// call waits for an approval whose reason says why (see tools.Registry.ApprovalReason):
//   - a command runs in the read-only sandbox (package sandbox: Landlock and a seccomp
//     filter): it may read the system's paths (/bin, /sbin, /usr, /lib*, /etc, /opt,
//     /proc, /dev), its program, its working directory and its sandbox read paths; it
//     may write nothing but /dev/null, change no file's mode, owner, extended
//     attributes or times, open no socket of any kind (TCP, UDP, unix, netlink, raw),
//     and holds no capability, even under a root executor. What it may not do fails
//     inside the program (permission denied, operation not permitted). It needs
//     Landlock ABI 4 (Linux ≥ 6.7) and seccomp on amd64 or arm64; with less, Register
//     refuses the tool and the executor does not start: it is never run unconfined;
//   - an HTTP tool counts as reads with method GET or HEAD only; a read-only POST, PUT
//     or PATCH tool waits for an approval for every call;
//   - an MCP tool counts as reads only when its server declares readOnlyHint for it.
//
// Any command tool may ask for a sandbox of its own with sandbox: read and write list
// files or directories (everything beneath), relative to the tools file's directory;
// each must exist when the file is loaded (Landlock grants existing paths only).
// network: true allows IPv4 and IPv6 TCP and UDP sockets (ABI 3, Linux ≥ 6.2, is then
// enough); without it no socket can be opened (and Landlock denies TCP connect and
// bind, ABI 4). Unix, netlink, packet and raw sockets are denied either way. A
// sandboxed command is started through the executor's own binary, re-executed as a
// launcher that confines itself and then execs the program (about 15 ms more per call
// on a 2-core machine); the process group, timeout, kill and output limits are as for
// any command. The launcher exits with code 125 (sandbox.ExitSetup) and says why on
// stderr when it cannot confine itself or start the program.
//
// A command's runAs: {uid, gid} runs it as that user and group (neither 0), with no
// supplementary groups: it then cannot read or signal the executor, nor the tools of
// other users. An unsandboxed tool without runAs runs as the executor's user and can
// read the memory, environment and open files of that user's processes (the other
// tools', the executor's); a sandboxed one cannot reach any process outside its
// sandbox. Only a root executor can switch users; a sandboxed tool switches in its
// launcher. [File.Unconfined] lists what would run as root unconfined under a root
// executor (the executor program warns of it).
//
// A tool may name a policyHook beside its runner, a service the executor asks before
// each call of the tool runs: allow, deny or modify its arguments (see
// [events.PolicyRequest]):
//
//	policyHook: {subject: hooks.files, timeout: 2s, onError: deny}
//
// Its subject must be one literal NATS subject outside toolfleet.>, $> and _INBOX.>, its
// timeout at most 10s (default 2s), its onError deny (the default) or allow. The hooks
// are not part of the tool's definition (nor of the catalog): [PolicyHooks] returns them
// for the executor (executor.WithPolicyHook), which must be given them.
//
// # The command contract
//
// The process gets the validated arguments, one JSON object, on stdin, and prints its
// result on stdout:
//   - stdout holding one JSON value is the output as is;
//   - empty stdout is null;
//   - any other stdout is text, and the output is that text as a JSON string, so that a
//     plain program (date, wc) is a tool too;
//   - more than maxOutputBytes (1 MiB) of stdout is tool_error_permanent.
//
// Its stdin is a file (a sealed memfd on Linux), not a pipe: it holds the arguments
// whole before the process starts, so that a process never reads a cut input.
//
// A non-zero exit is tool_error (retried by the tool's policy: a program may fail for
// passing reasons), with the exit code and the last 2 KiB of stderr in the message and in
// an [ExitError]. When the timeout or the call's deadline passes, the whole process group
// is killed (what the program started dies with it) and the call is a timeout. The
// process group also dies with the executor, SIGKILL included: the leader by its
// parent-death signal (Linux), the rest by the guard (sandbox.Guard, in a program that
// calls sandbox.Init). The environment holds only passEnv, env, the tool's secrets
// (each as a variable of its name), and TOOLFLEET_TOOL, TOOLFLEET_CALL_ID,
// TOOLFLEET_RUN_ID, TOOLFLEET_ATTEMPT, so that a program can make its effects
// idempotent per call.
//
// A tool whose entry says "runContext": true gets, with each call a planner run makes,
// the run context (tools.RunContext: runId, step, metadata, and messages, the
// conversation so far ending with the model's message that made the call): a command
// on the file descriptor 3 it inherits, whose path, /dev/fd/3, is in
// TOOLFLEET_RUN_CONTEXT (a memfd on Linux: in no directory, so no other tool can find
// it, and nothing is left after a crash; a sandboxed command reads it with no grant). A
// tool that did not ask gets nothing: no variable, no descriptor (TOOLFLEET_RUN_CONTEXT
// is never passed through from the executor's environment).
//
// A command reports its progress with lines on stderr that start with "::progress "
// ([ProgressPrefix]) followed by a JSON object, one per line:
//
//	echo '::progress {"message":"fetched 3 of 10 pages","fraction":0.3,"data":{"pages":3}}' >&2
//
// message (text), fraction (0 to 1) and data (any JSON) are all optional. The executor
// publishes them as tool_progress events of the call's run (at most ten a second per
// call, the latest winning; scrubbed of the tool's secrets). Such lines are left out of
// the stderr a failure shows; every other stderr line, and a progress line whose JSON
// does not parse, stays as it is. A call canceled by its caller (a cancel event) kills
// the process group, as a timeout does, and is answered canceled.
//
// # Secrets
//
// A tool's secrets list names with their source: env (a variable of the executor) or file
// (a mounted Kubernetes Secret, say; a trailing newline is dropped); with neither, the
// secret NAME is read from TOOLFLEET_SECRET_NAME. The executor reads them when it starts
// and refuses to start when one is missing, naming it. A command gets each as a variable
// of the secret's name, which must not also be in env or passEnv; an HTTP tool uses them
// in header values as ${secret:NAME}. Whatever the tool prints or answers, and its error
// messages (stderr, a response's body), are scrubbed of the values before the result is
// stored or logged; the catalog shows only the names (see tools.Secret).
//
// # The HTTP contract
//
// The arguments are POSTed (or PUT, PATCH) as application/json with the headers
// Toolfleet-Tool, Toolfleet-Call-Id, Toolfleet-Run-Id and Toolfleet-Attempt. With method
// GET or HEAD there is no body: each member of the arguments object becomes a query
// parameter added to the URL's own (a string as it is, a number or boolean as its JSON
// text, an array as one parameter per element, an object as its JSON text, null not at
// all). The answer maps to:
//
//	2xx                  the body is the output, by the same rule as a command's stdout
//	408, 429, 5xx        tool_error: retried by the tool's policy
//	other 4xx, any 3xx   tool_error_permanent: retrying the same request cannot help, and
//	                     redirects are not followed (the arguments go where declared only)
//	no answer in time    timeout
//	body over the limit  tool_error_permanent
//
// A failed answer's status and the start of its body are in the message and in a
// [StatusError].
//
// An HTTP tool whose entry says "runContext": true gets the run context in its body:
// {"arguments": <the arguments>, "runContext": {"runId", "step", "metadata", "messages",
// "omitted"}} instead of the arguments alone (calls not made by a planner run carry
// none, and their body is the arguments). A GET or HEAD tool has no body and gets none.
//
// # MCP servers
//
// A file may also list mcpServers (beside tools, or alone): MCP servers whose tools the
// executor serves, through package mcptool. A server is a command speaking MCP over
// stdio, started like a command tool (argv, dir, passEnv, env; no shell; its own process
// group, killed when the connection ends or the executor dies), or a URL speaking
// streamable HTTP, with headers like an HTTP tool's (${NAME} from passEnv,
// ${secret:NAME}):
//
//	mcpServers:
//	  - name: fs                      # in messages, logs and tags
//	    prefix: fs                    # read_file is served as fs_read_file (default: name)
//	    command:
//	      argv: [npx, -y, "@modelcontextprotocol/server-filesystem", /data]
//	      passEnv: [PATH, HOME]
//	    connectTimeout: 60s           # start-up attempts (default 30s)
//	    refresh: 10m                  # list again without a ttl hint (default 5m)
//	    exclude: [move_file]          # or include: [...] to import only those
//	    defaults: {roles: [ops]}      # every tool: unsafe and not idempotent unless set
//	    tools:                        # per tool, by the server's name
//	      read_file: {safe: true, idempotent: true, timeout: 10s}
//	      list_directory: {safe: true, name: fs_ls}
//	  - name: search
//	    secrets: [{name: SEARCH_TOKEN, file: /var/run/secrets/toolfleet/search}]
//	    http:
//	      url: https://mcp.search.internal/mcp
//	      headers: {Authorization: "Bearer ${secret:SEARCH_TOKEN}"}
//
// An override (under defaults or tools) sets safe, idempotent, final, roles, timeout,
// retry, tags, capabilities and, per tool, name. The server's own annotations
// (readOnlyHint, ...) grant nothing; readOnlyHint only lets a tool declared read-only
// here run without an approval (see "Read-only tools and the sandbox").
//
// [LoadFile] checks a server as it checks a tool (its program, URL, variables and the
// secrets its headers use) without connecting; [Load] refuses a file with mcpServers,
// since their tools exist only once listed. [File.Start] (or [StartMCP]) connects: it
// retries each server until its connectTimeout, lists its tools and registers them, all
// or nothing; a server that cannot be reached, a tool whose name does not fit once
// prefixed or whose inputSchema does not compile, a name already taken: each is an error
// naming the server and the tool, and the executor does not start (exclude a tool, or
// rename it, to start without it). The tools are listed again on list_changed, on the
// server's ttl hint or every refresh, and the registry follows (the executor program
// then hands over to a new executor serving the new list). A stdio server that exits is
// restarted, and its tools listed again, for later calls; what it wrote to stderr is logged at debug level and
// the end of it is in start-up errors. The secrets are read at each connection, passed
// to a command as variables of their names, and scrubbed from every output and error of
// the server's tools. The mapping of tools/call results to outputs and errors is in
// package mcptool.
//
// # Composite tools
//
// An entry with composite instead of a runner runs several of the fleet's tools in one
// call (reference 00's composite tools):
//
//	tools:
//	  - name: research
//	    description: Look a city up and convert its figures.
//	    composite: {tools: [calculator, web_search, geo_lookup]}
//
// It is one tool for the model, the picker and the MCP edge: its parameters are the
// union of its sub-tools' calls, {"calls":[{"name":TOOL,"args":{...}}, ...]}, each
// sub-tool's schema embedded under $defs; its output is {"results":[{"name","result"}]}
// in the calls' order. The sub-calls run in order, and a failing one (its error output is
// its result) does not stop the others; a call naming a tool outside the list is answered
// no_such_tool for that entry. Each sub-call is a real fleet call (see [Composite]): it
// runs on whichever executor serves its tool, with that tool's validation, callbacks,
// retries and approvals, under the composite call's caller, run and metadata, and with
// a call id derived from the composite's, so a retried composite does not run a
// sub-call twice. A sub-tool the executor does not serve itself may be served elsewhere:
// its arguments are then any object in the union, and when no executor serves it at
// call time (the catalog does not list it) its entry is no_such_tool. A composite is
// safe when each sub-tool is (one served elsewhere counts as unsafe), unless it sets
// safe itself; it is idempotent only if every sub-tool it knows is. It takes name,
// description, tags, capabilities, safe, roles, tenants, timeout, final, retry, the
// limits, callbacks and policyHook; not parameters, idempotent, secrets or a runner.
// Composites reaching themselves through others of the file are refused.
//
// # Callbacks
//
// Any tool of the file may declare callbacks, reference 00's four hooks without code,
// which run as [tools.Callbacks] do (see [Callbacks]):
//
//	callbacks:
//	  beforeCall: {cache: {key: [/city], ttl: 10m}}      # or {service: SUBJECT, timeout: 2s}
//	  onSuccess: {pointer: /data}                         # or {service: ...} or {template: ...}
//	  onError: {service: errors.explain, timeout: 2s}
//	  formatOutput: {template: "{{.output.temp}} degrees"}
//
// A cache keeps ok outputs in a JetStream key-value bucket shared by the fleet
// (toolfleet-cache unless bucket names another), per tenant, keyed by the arguments the
// key's JSON pointers pick; a hit is the answer and the tool does not run. A service is a
// NATS request to a literal subject outside toolfleet.>, $> and _INBOX.>, carrying
// {"hook","tool","call_id","run_id","caller","metadata","input","output"}: beforeCall's
// answers {"action":"run"} or {"result":...}, the others' {"result":...} (replace) or
// {"action":"keep"}; {"error":"..."} fails the callback. A pointer replaces the output by
// the value it points at; a template (Go text/template over .input and .output, with a
// json function) by its text. A failing callback ends the call with callback_failed
// naming it, as a Go callback's failure does; the executor goes on.
//
// # Retry rules
//
// A tool's retry policy may add when, a rule on the failed attempt's error (see
// [tools.RetryWhen]): message (an RE2 expression), httpStatus and exitCode, each set one
// required to hold. A command's exit code and an HTTP endpoint's status travel in its
// error for the rule to read; a status the runner deems permanent (a 409, say) is retried
// when the rule names it.
package toolsfile
