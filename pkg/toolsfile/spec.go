package toolsfile

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/sandbox"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Defaults of the runners, used when a tools file leaves the setting out.
const (
	DefaultTimeout        = 30 * time.Second
	DefaultMaxOutputBytes = 1 << 20 // command stdout, HTTP response body
	stderrTailBytes       = 2048    // how much of a failed command's stderr its error carries
	responseSnippetBytes  = 512     // how much of a failed HTTP response's body its error carries
)

// Spec is one tool of a tools file: its canonical definition and how to run it. Exactly
// one of Command, HTTP and Composite is set.
type Spec struct {
	Definition tools.Definition
	Command    *Command
	HTTP       *HTTP
	// Composite makes the tool a composite of the fleet's tools; its Definition's
	// parameters, safety and idempotence are taken from the sub-tools at [Register].
	Composite *Composite
	// Callbacks, when set, are the tool's declarative callbacks.
	Callbacks *Callbacks
	// safeDeclared says the entry set safe itself (a composite's otherwise comes from
	// its sub-tools).
	safeDeclared bool
	// PolicyHook, when set, is a service the executor asks before each call of the tool
	// runs (or is parked for approval): allow, deny, or modify its arguments (see
	// [events.PolicyRequest]; the executor's WithPolicyHook). Its onError is deny (the
	// default) or allow.
	PolicyHook *events.Hook
	// Source says where the spec was declared ("tools.yaml: tool 3"), for messages.
	Source string
}

// Command runs a tool as a process: the JSON arguments on stdin, the output on stdout.
// No shell is involved unless Argv names one.
type Command struct {
	// Argv is the program and its arguments. A program path containing a slash is
	// relative to the tools file's directory; a bare name is looked up in the executor's
	// PATH when the file is loaded.
	Argv []string `json:"argv"`
	// Dir is the working directory, relative to the tools file's directory. Empty: the
	// tools file's directory.
	Dir string `json:"dir,omitempty"`
	// PassEnv names the executor's environment variables the process sees. Nothing else
	// of the executor's environment is passed, not even PATH or HOME unless listed.
	PassEnv []string `json:"passEnv,omitempty"`
	// Env sets fixed variables. Besides these and PassEnv, the process gets each of the
	// tool's secrets as a variable of the secret's name.
	Env map[string]string `json:"env,omitempty"`
	// Timeout bounds one run; the process group is killed when it is up. Zero: 30 s. The
	// call's own deadline applies as well.
	Timeout tools.Duration `json:"timeout,omitempty"`
	// MaxOutputBytes is the largest stdout accepted. Zero: 1 MiB.
	MaxOutputBytes int64 `json:"maxOutputBytes,omitempty"`
	// Sandbox, when set, runs the process in a Landlock and seccomp sandbox (package
	// sandbox): it may read the system's paths, its program, its working directory and
	// Sandbox.Read, write only Sandbox.Write (and /dev/null), open no socket unless
	// network: true (then TCP and UDP only), and holds no capability. Paths are relative
	// to the tools file's directory and must exist. A tool that declares itself
	// read-only always runs sandboxed, with no write path and no network; Sandbox may
	// then add read paths only.
	Sandbox *sandbox.Policy `json:"sandbox,omitempty"`
	// RunAs, when set, runs the process as this user and group (neither 0), with no
	// supplementary groups: a tool then cannot read or signal the executor, nor the
	// tools that run as other users. Only an executor running as root can switch, and
	// one that is not refuses to serve the tool.
	RunAs *sandbox.User `json:"runAs,omitempty"`

	// policy is the sandbox the process runs in, nil for none: Sandbox, or the read-only
	// one (set by check).
	policy *sandbox.Policy
}

// HTTP runs a tool as an HTTP endpoint: the JSON arguments are the request body, the
// response body is the output.
type HTTP struct {
	// URL is the endpoint, http or https.
	URL string `json:"url"`
	// Method is POST (the default), PUT or PATCH, which send the arguments as the body,
	// or GET or HEAD, which send them as query parameters (see the package doc). Only
	// GET and HEAD count as reads for a tool that declares itself read-only.
	Method string `json:"method,omitempty"`
	// Headers are sent with every request; a value may reference ${NAME} for a variable
	// listed in PassEnv, read from the executor's environment per call, and
	// ${secret:NAME} for one of the tool's secrets (a token, say), which the executor
	// resolved at start-up and scrubs from outputs and errors.
	Headers map[string]string `json:"headers,omitempty"`
	// PassEnv names the variables the header values may reference.
	PassEnv []string `json:"passEnv,omitempty"`
	// Timeout bounds one request. Zero: 30 s. The call's own deadline applies as well.
	Timeout tools.Duration `json:"timeout,omitempty"`
	// MaxResponseBytes is the largest response body accepted. Zero: 1 MiB.
	MaxResponseBytes int64 `json:"maxResponseBytes,omitempty"`

	once   sync.Once
	client *http.Client
}

// Run runs the tool once with the given JSON arguments; it is the tools.Func that
// [Register] registers. Its errors are *tools.Error.
func (s *Spec) Run(ctx context.Context, args json.RawMessage) (any, error) {
	switch {
	case s.Command != nil:
		return s.Command.run(ctx, s.Definition.Name, s.Definition.Secrets, args)
	case s.HTTP != nil:
		return s.HTTP.run(ctx, s.Definition.Name, args)
	case s.Composite != nil:
		return s.Composite.run(ctx, s.Definition.Name, args)
	}
	return nil, tools.Errorf(tools.CodeInvalidDefinition, "tool %s has no runner", s.Definition.Name)
}

func timeoutOr(d tools.Duration) time.Duration {
	if d > 0 {
		return d.D()
	}
	return DefaultTimeout
}

func limitOr(n int64) int64 {
	if n > 0 {
		return n
	}
	return DefaultMaxOutputBytes
}
