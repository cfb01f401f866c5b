// Package tools defines what an agent may call: canonical tool definitions, a registry
// that fails closed, JSON Schema validation compiled once per tool, hydration of a
// model's raw arguments into typed values, the callbacks around a run, composite tools,
// and translation to and from the model providers' tool formats.
//
// # Writing a tool
//
// A typed tool is a struct whose fields are its arguments, with a Definition method (read
// once, on a zero value) and a Run method (called on a fresh value per call):
//
//	type GetWeather struct {
//		City  string `json:"city"`
//		Units string `json:"units,omitempty"`
//	}
//
//	func (GetWeather) Definition() tools.Definition {
//		return tools.Definition{Name: "get_weather", Description: "Current weather for a city.",
//			Parameters: getWeatherSchema, Safe: true} // kept byte for byte
//	}
//
//	func (g *GetWeather) Run(ctx context.Context) (any, error) { return lookUp(ctx, g.City, g.Units) }
//
// Register it with [MustAdd] at start-up (it panics on a broken definition) or [Add]
// (which returns the error). A one-liner can be a [Func] registered with
// [Registry.AddFunc]; it receives the validated arguments as JSON. Leave Parameters empty
// and a schema is derived from the struct's fields and tags ([SchemaFor]).
//
// # Dependencies
//
// A tool that needs a database handle or an HTTP client keeps it in a field the
// arguments cannot reach (unexported, or tagged `json:"-"`) and is registered with
// [AddWith], whose constructor makes the value every call starts from; the call's
// arguments are decoded into it:
//
//	type GetWeather struct {
//		City string `json:"city"`
//
//		http *http.Client // a dependency, not an argument
//	}
//
//	client := &http.Client{Timeout: 5 * time.Second}
//	tools.MustAddWith(reg, func() GetWeather { return GetWeather{http: client} })
//
// The constructor runs once per call, so it hands out what it captured rather than
// making it anew. Per-call facts (call id, run id, attempt, the caller's metadata) come
// from the context instead: [CallInfoFrom]. A long tool tells its caller how far it got
// with [ReportProgress] (a no-op outside an executor), and stops when its context ends:
// the caller may cancel the call.
//
// # Secrets
//
// An API key or a password is declared in [Definition].Secrets by name and source, never
// put in a struct literal, an argument or a result:
//
//	Secrets: []tools.Secret{{Name: "API_KEY", Env: "TOOLFLEET_SECRET_API_KEY"}} // or File: "/var/run/secrets/..."
//
// The executor reads every declared secret when it starts (a missing one stops it, naming
// the secret and its source) and puts the tool's own secrets in the context of each run:
// [MustSecret](ctx, "API_KEY"), or [SecretFrom]. Before a result is published or logged,
// every secret value is replaced with "[redacted:API_KEY]" in the output and in the
// error's message, violations and cause, also in its JSON-escaped, base64 and URL-escaped
// forms ([Secrets.Scrub] says what is not found). Only the names are marshalled, so the
// catalog and the model learn which secrets a tool uses, never their sources or values.
//
// # Definitions fail closed
//
// A [Definition] is the contract of a tool. Its Parameters are a JSON Schema kept byte for
// byte; a tool without one is refused unless it opts in with AllowNoSchema and a
// [NoSchemaMode], and its calls then report validated:false and the mode everywhere: the
// result's no_schema_mode, the planner's call record (noSchemaMode), the executor's "call
// answered" log line and execute_tool span. The mode says how far such a tool may go:
//   - [NoSchemaReadOnly] runs it, and is allowed only for a tool that declares it has no
//     side effects with [CapabilityReadOnly] among its Capabilities; without it,
//     registration fails with invalid_definition, saying what to add. The
//     declaration is then enforced where the tool runs (see "Read-only is enforced").
//   - [NoSchemaHumanApproval] parks every call until a human approves it.
//   - [NoSchemaFull] runs it with no further gate.
//
// Safe still applies on top: a read-only or full tool that is not Safe waits for
// approval too.
//
// # Read-only is enforced
//
// A tool that declares [CapabilityReadOnly] (which noSchemaMode read-only requires) runs
// only where something keeps it to reads; otherwise each call waits for an approval
// ("side effects prohibited unless explicitly approved"). The runner says which, when it
// registers the tool with [WithConfinement]: the tools-file adapters (package
// toolsfile) run a command in a Landlock sandbox with no writes and no TCP (package
// sandbox), count only GET and HEAD HTTP tools as reads, and an MCP tool only when its
// server declares readOnlyHint for it. A Go tool registered without WithConfinement
// keeps its author's word: its declaration is a promise the author makes.
// [Registry.ApprovalReason] gives the executor's decision and the reason an approval
// request carries.
//
// Names follow [NamePattern]. Schemas compile once, at registration, with draft 2020-12
// unless they name draft-07 or 2019-09 in $schema; a $ref must point inside the schema ($defs,
// definitions, anchors): http, https, file, urn and relative references are refused then,
// so that validating a call never touches the network or the disk. Registering a name
// again replaces the tool; [Registry.Only] and [Registry.Without] give cheap snapshot
// views of a registry.
//
// # Hydrate, then run
//
// [Registry.Hydrate] turns what a model sent into a [Call]: it checks the size, parses the
// arguments once (an object, or a JSON string holding one), validates them and
// instantiates the tool. Nothing runs if any step fails, and the [*Error] says why: for
// invalid input, every violation with the JSON Pointer of the offending value, ready to
// show the model so it can repair its call ([Error.ForModel]).
//
// [Call.Run] executes the call through its [Callbacks] — beforeCall, the tool, onSuccess
// or onError, formatOutput, then the responseSchema check — and returns an [Outcome]
// whose Output is always valid JSON. Panics in tools and callbacks are contained; a
// passed deadline is a timeout even for a tool that ignores its context.
//
//	call, err := reg.Hydrate("get_weather", rawArguments)
//	if err != nil {
//		return tools.AsError(err, tools.CodeInternal).ForModel() // let the model repair it
//	}
//	out := call.Run(tools.WithCallInfo(ctx, info))
//
// # Composite tools
//
// [Registry.AddComposite] bundles registered tools into one whose arguments are
// {"calls":[{"name","args"}]}; each sub-call runs in order through its own callbacks and
// the result lists every sub-call's output or error.
//
// # Performance
//
// Validation is the hot path. The arguments are parsed once into the generic form the
// validator walks; schemas made of the common keywords (type, properties, required,
// additionalProperties, items, enum, const, bounds, lengths, pattern) are first checked by
// a direct walk that can only answer "valid" or "not sure", and the compiled validator
// decides whenever it is not sure and writes every error message. Typed tools are then
// filled straight from the parsed value, with encoding/json's rules, unless their type
// needs encoding/json itself (custom unmarshalers, embedded structs, ...). Hydration
// costs about as much as decoding the same bytes with encoding/json (BenchmarkHydrate).
//
// # Errors
//
// Every failure is an [*Error] with a [Code]. Match codes with errors.Is against the
// sentinels ([ErrInvalidInput], [ErrNoSuchTool], ...). Codes decide retries: see
// [Code.Retryable] and [RetryPolicy]. A model is shown a failure as
// {"error":{"code","message","violations"}} ([Error.ForModel], [ErrorOutput]), by an
// executor as by the planner.
package tools
