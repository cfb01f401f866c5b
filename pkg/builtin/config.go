package builtin

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// ErrInvalidConfig is wrapped by every error of [Config.Validate] and [Register].
var ErrInvalidConfig = errors.New("invalid built-in tools configuration")

// Names lists every built-in tool, in the order Register adds them.
func Names() []string {
	return []string{"calculator", "get_time", "echo", "sleep", "http_get", "read_file", "list_dir", "write_file"}
}

// Config configures the built-in tools. The zero Config registers calculator, get_time,
// echo and sleep; the tools that reach outside the process need their setting.
type Config struct {
	// Enable restricts Register to these tool names (see [Names]). Empty means every
	// built-in whose configuration is present. Naming a tool whose configuration is
	// missing (read_file without SandboxRoot) is an error, not a silent omission.
	Enable []string

	// SandboxRoot is the existing directory read_file, list_dir and write_file are
	// confined to. Empty: those three are not registered.
	SandboxRoot string
	// MaxReadBytes cuts read_file's content (flagged truncated). Zero: 1 MiB.
	MaxReadBytes int64
	// MaxWriteBytes is the largest content write_file accepts. Zero: 1 MiB.
	MaxWriteBytes int64
	// MaxListEntries cuts list_dir's answer (flagged truncated). Zero: 1000.
	MaxListEntries int

	// HTTPAllowlist are the host patterns http_get may reach (see [Allowlist]). Empty:
	// http_get is not registered.
	HTTPAllowlist []string
	// HTTPTimeout bounds one http_get request, redirects included. Zero: 10 s.
	HTTPTimeout time.Duration
	// HTTPMaxBytes cuts http_get's body (flagged truncated). Zero: 1 MiB.
	HTTPMaxBytes int64

	// MaxSleep is the longest sleep accepted. Zero: 1 minute.
	MaxSleep time.Duration

	// Now is get_time's clock. Nil: time.Now. Tests set it.
	Now func() time.Time
}

// Validate checks the configuration without registering anything: the sandbox root is an
// existing directory, the allowlist parses, no limit is negative, Enable names known and
// configured tools.
func (c Config) Validate() error {
	_, err := c.resolve()
	return err
}

// resolved is a Config checked and turned into what the tools hold.
type resolved struct {
	enabled map[string]bool
	sb      *sandbox
	http    *httpGetter
}

func (c Config) resolve() (resolved, error) {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	if c.MaxReadBytes < 0 || c.MaxWriteBytes < 0 || c.MaxListEntries < 0 || c.HTTPMaxBytes < 0 {
		bad("size limits cannot be negative")
	}
	if c.HTTPTimeout < 0 || c.MaxSleep < 0 {
		bad("durations cannot be negative")
	}
	var r resolved
	if c.SandboxRoot != "" {
		st, err := os.Stat(c.SandboxRoot)
		switch {
		case err != nil:
			bad("sandbox root: %v", err)
		case !st.IsDir():
			bad("sandbox root %s is not a directory", c.SandboxRoot)
		default:
			r.sb = &sandbox{dir: c.SandboxRoot, maxRead: c.MaxReadBytes, maxWrite: c.MaxWriteBytes, maxEntries: c.MaxListEntries}
		}
	}
	allow, err := ParseAllowlist(c.HTTPAllowlist)
	if err != nil {
		bad("http allowlist: %v", err)
	} else if !allow.Empty() {
		r.http = newHTTPGetter(allow, c.HTTPTimeout, c.HTTPMaxBytes)
	}

	configured := func(name string) bool {
		switch name {
		case "http_get":
			return len(c.HTTPAllowlist) > 0
		case "read_file", "list_dir", "write_file":
			return c.SandboxRoot != ""
		}
		return true
	}
	r.enabled = make(map[string]bool)
	if len(c.Enable) == 0 {
		for _, n := range Names() {
			r.enabled[n] = configured(n)
		}
	}
	for _, n := range c.Enable {
		switch {
		case !slices.Contains(Names(), n):
			bad("unknown built-in tool %q; the built-ins are %s", n, strings.Join(Names(), ", "))
		case !configured(n) && (n == "http_get"):
			bad("http_get is enabled but the http allowlist is empty")
		case !configured(n):
			bad("%s is enabled but no sandbox root is set", n)
		default:
			r.enabled[n] = true
		}
	}
	if len(errs) > 0 {
		return resolved{}, errors.Join(errs...)
	}
	return r, nil
}
