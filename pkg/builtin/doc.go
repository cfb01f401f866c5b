// Package builtin holds the tools every toolfleet executor can serve without writing
// code: calculator, get_time, http_get, read_file, list_dir, write_file, sleep and echo.
// It is public so that an executor built with your own tools can serve these beside them.
//
// # Registering
//
// [Register] adds the built-ins to a registry, configured by one [Config]:
//
//	reg := tools.NewRegistry()
//	err := builtin.Register(reg, builtin.Config{
//		SandboxRoot:   "/var/lib/toolfleet/sandbox", // read_file, list_dir, write_file
//		HTTPAllowlist: []string{"api.example.com", "*.wikipedia.org"},
//	})
//
// Tools that would reach outside the process only exist when configured: without a
// SandboxRoot the file tools are not registered, and without an HTTPAllowlist http_get is
// not registered (and an [HTTPGet] with an empty allowlist refuses every URL: fail closed).
//
// # Safety and idempotency
//
// Every built-in is safe (runs without approval) except write_file, which changes the
// sandbox and so waits for an approval. Every built-in is idempotent, write_file included:
// it replaces the whole file with the given content, atomically, so running a call twice
// leaves the sandbox exactly as running it once. http_get is safe because it only
// performs GET requests and only to allowlisted hosts; an allowlisted endpoint whose GET
// has side effects is the allowlist's author's responsibility.
//
// # Errors
//
// Tools fail with a *[tools.Error] whose code steers the fleet: invalid_tool_input when an
// argument cannot be understood (a malformed expression, an unknown time zone, a URL that
// does not parse), tool_error_permanent when the call is understood but cannot succeed
// however often it is tried (division by zero, a host outside the allowlist, a path
// outside the sandbox, a missing file), tool_error for what may pass on a retry (a
// network failure), timeout and canceled when the context ends.
//
// # Typed tools
//
// Each tool is a struct whose exported fields are its arguments, with a Definition whose
// Parameters are the JSON Schema embedded from schemas/, and a Run method. Tools that need
// configuration keep it in unexported fields that Register fills in; the zero value of
// such a tool refuses to run rather than guess.
package builtin
