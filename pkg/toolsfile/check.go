package toolsfile

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/toolfleet/toolfleet/pkg/sandbox"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// check lists what is wrong with a decoded spec, and resolves the command's paths
// against base (the tools file's directory).
func (s *Spec) check(base string) []string {
	var p []string
	d := &s.Definition
	if d.Type != "" && d.Type != "function" {
		p = append(p, fmt.Sprintf("type %q: the only type is \"function\"", d.Type))
	}
	if !tools.NamePattern.MatchString(d.Name) {
		p = append(p, fmt.Sprintf("name %q must match %s", d.Name, tools.NamePattern))
	}
	if d.Retry != nil && d.Retry.When != nil {
		if err := d.Retry.When.Check(); err != nil {
			p = append(p, err.Error())
		}
	}
	if s.Callbacks != nil {
		p = append(p, s.Callbacks.check()...)
	}
	if s.Composite != nil {
		return append(p, s.Composite.check(d.Name)...)
	}
	switch {
	case len(d.Parameters) > 0:
		if t := bytes.TrimSpace(d.Parameters); len(t) == 0 || t[0] != '{' {
			p = append(p, "parameters must be a JSON Schema object")
		}
	case !d.AllowNoSchema:
		p = append(p, "no parameters: give a JSON Schema, or set allowNoSchema: true with a noSchemaMode (read-only, human-approval or full)")
	case !d.NoSchemaMode.Valid():
		p = append(p, fmt.Sprintf("allowNoSchema needs a noSchemaMode of read-only, human-approval or full, not %q", d.NoSchemaMode))
	case d.NoSchemaMode == tools.NoSchemaReadOnly && !d.ReadOnly():
		p = append(p, `noSchemaMode read-only needs the tool to declare itself read-only: add "capabilities": ["read-only"], or use noSchemaMode human-approval or full`)
	}
	p = append(p, s.checkSecrets()...)
	switch {
	case s.Command == nil && s.HTTP == nil:
		p = append(p, "no runner: add command, http or composite")
	case s.Command != nil && s.HTTP != nil:
		p = append(p, "both command and http: a tool has one runner")
	case s.Command != nil:
		p = append(p, s.Command.check(base)...)
		p = append(p, s.Command.checkSandbox(base, d.ReadOnly())...)
	default:
		p = append(p, s.HTTP.check()...)
	}
	return p
}

// checkSecrets checks the secret declarations, and that a command's secrets, which
// reach the process as variables of their names, clash with no other variable.
func (s *Spec) checkSecrets() []string {
	var p []string
	seen := map[string]bool{}
	for _, sec := range s.Definition.Secrets {
		if err := sec.Check(); err != nil {
			p = append(p, err.Error())
		}
		if seen[sec.Name] {
			p = append(p, fmt.Sprintf("secret %s is declared twice", sec.Name))
		}
		seen[sec.Name] = true
		if c := s.Command; c != nil {
			if _, set := c.Env[sec.Name]; set || slices.Contains(c.PassEnv, sec.Name) || strings.HasPrefix(sec.Name, "TOOLFLEET_") {
				p = append(p, fmt.Sprintf("command: secret %s clashes with a variable of the same name (env, passEnv or TOOLFLEET_*)", sec.Name))
			}
		}
	}
	if h := s.HTTP; h != nil {
		for k, v := range h.Headers {
			for _, m := range secretRef.FindAllStringSubmatch(v, -1) {
				if !seen[m[1]] {
					p = append(p, fmt.Sprintf("http: header %s references ${secret:%s}, which is not in the tool's secrets", k, m[1]))
				}
			}
		}
	}
	return p
}

func (c *Command) check(base string) []string {
	var p []string
	if len(c.Argv) == 0 || c.Argv[0] == "" {
		return []string{"command: argv needs at least the program"}
	}
	prog := c.Argv[0]
	switch {
	case strings.ContainsRune(prog, '/'):
		if !filepath.IsAbs(prog) {
			prog = filepath.Join(base, prog)
		}
		st, err := os.Stat(prog)
		switch {
		case err != nil:
			p = append(p, fmt.Sprintf("command: program %s: %v", c.Argv[0], err))
		case st.IsDir() || st.Mode().Perm()&0o111 == 0:
			p = append(p, fmt.Sprintf("command: program %s is not executable", c.Argv[0]))
		}
	default:
		found, err := exec.LookPath(prog)
		if err != nil {
			p = append(p, fmt.Sprintf("command: program %q is not in PATH", prog))
		}
		prog = found
	}
	c.Argv[0] = prog
	dir := c.Dir
	if dir == "" {
		dir = base
	} else if !filepath.IsAbs(dir) {
		dir = filepath.Join(base, dir)
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		p = append(p, fmt.Sprintf("command: dir %s is not a directory", c.Dir))
	}
	c.Dir = dir
	for _, n := range c.PassEnv {
		if !envName.MatchString(n) {
			p = append(p, fmt.Sprintf("command: passEnv %q is not a variable name", n))
		}
	}
	for k := range c.Env {
		if !envName.MatchString(k) {
			p = append(p, fmt.Sprintf("command: env %q is not a variable name", k))
		} else if slices.Contains(c.PassEnv, k) {
			p = append(p, fmt.Sprintf("command: %s is both passed through and set; choose one", k))
		}
	}
	if c.Timeout < 0 || c.MaxOutputBytes < 0 {
		p = append(p, "command: timeout and maxOutputBytes cannot be negative")
	}
	if c.RunAs != nil && (c.RunAs.UID == 0 || c.RunAs.GID == 0) {
		p = append(p, fmt.Sprintf("command: runAs {uid: %d, gid: %d}: give an unprivileged user and group, neither 0", c.RunAs.UID, c.RunAs.GID))
	}
	return p
}

func (h *HTTP) check() []string {
	var p []string
	u, err := url.Parse(h.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		p = append(p, fmt.Sprintf("http: url %q must be an absolute http or https URL", h.URL))
	}
	switch strings.ToUpper(h.Method) {
	case "", http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodGet, http.MethodHead:
		h.Method = strings.ToUpper(h.Method)
	default:
		p = append(p, fmt.Sprintf("http: method %q: use POST, PUT or PATCH (the arguments as the body) or GET or HEAD (as query parameters)", h.Method))
	}
	for _, n := range h.PassEnv {
		if !envName.MatchString(n) {
			p = append(p, fmt.Sprintf("http: passEnv %q is not a variable name", n))
		}
	}
	for k, v := range h.Headers {
		if k == "" || strings.ContainsAny(k, " :\r\n") {
			p = append(p, fmt.Sprintf("http: header name %q is not valid", k))
		}
		for _, m := range envRef.FindAllStringSubmatch(v, -1) {
			if !slices.Contains(h.PassEnv, m[1]) {
				p = append(p, fmt.Sprintf("http: header %s references ${%s}, which is not in passEnv", k, m[1]))
			}
		}
	}
	if h.Timeout < 0 || h.MaxResponseBytes < 0 {
		p = append(p, "http: timeout and maxResponseBytes cannot be negative")
	}
	return p
}

// checkSandbox checks the sandbox option and sets the policy the process runs under:
// the option's, or for a read-only tool the read-only one (with the option's read
// paths). Paths are resolved against base, cleaned, and must exist: Landlock grants
// access to existing files and directories only.
func (c *Command) checkSandbox(base string, readOnly bool) []string {
	if c.Sandbox == nil && !readOnly {
		return nil
	}
	var p []string
	var pol sandbox.Policy
	if c.Sandbox != nil {
		pol = *c.Sandbox
	}
	for _, list := range []struct {
		what  string
		paths []string
	}{{"read", pol.Read}, {"write", pol.Write}} {
		for i, path := range list.paths {
			if path == "" {
				p = append(p, fmt.Sprintf("command: sandbox: %s path %d is empty", list.what, i+1))
				continue
			}
			if !filepath.IsAbs(path) {
				path = filepath.Join(base, path)
			}
			path = filepath.Clean(path)
			if _, err := os.Stat(path); err != nil {
				p = append(p, fmt.Sprintf("command: sandbox: %s path %s does not exist (or cannot be reached): Landlock grants only existing paths", list.what, list.paths[i]))
			}
			list.paths[i] = path
		}
	}
	if readOnly && len(pol.Write) > 0 {
		p = append(p, `command: sandbox: a tool that declares itself read-only ("capabilities": ["read-only"]) cannot be granted write paths`)
	}
	if readOnly && pol.Network {
		p = append(p, `command: sandbox: a tool that declares itself read-only ("capabilities": ["read-only"]) cannot be granted the network`)
	}
	pol.RunAs = c.RunAs // the launcher switches
	c.policy = &pol
	return p
}
