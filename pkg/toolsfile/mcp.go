package toolsfile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os/exec"
	"slices"
	"sort"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/pkg/mcptool"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// MCPServer is one entry of a tools file's mcpServers: an MCP server whose tools the
// executor serves (see package mcptool). Exactly one of Command and HTTP is set.
type MCPServer struct {
	// Name names the server in messages, logs and tags.
	Name string `json:"name"`
	// Prefix goes before each tool's name, with "_". Empty: Name.
	Prefix string `json:"prefix,omitempty"`
	// Command runs the server as a process speaking MCP over stdin/stdout.
	Command *MCPCommand `json:"command,omitempty"`
	// HTTP reaches the server over streamable HTTP.
	HTTP *MCPHTTP `json:"http,omitempty"`
	// Secrets are read when the executor starts (and again at each reconnection), passed
	// to a command as variables of their names or used in HTTP headers as
	// ${secret:NAME}, and scrubbed from every output and error of the server's tools.
	Secrets []tools.Secret `json:"secrets,omitempty"`
	// ConnectTimeout bounds the attempts to connect at start-up. Zero: 30 s.
	ConnectTimeout tools.Duration `json:"connectTimeout,omitempty"`
	// Refresh is how often the tools are listed again when the server gives no ttl hint.
	// Zero: 5 minutes. Notifications of a changed list are always followed.
	Refresh tools.Duration `json:"refresh,omitempty"`
	mcptool.Policy
	// Callbacks are declarative callbacks of the server's tools, by the server's name of
	// the tool, as a tool of the file declares them (see [Callbacks]).
	Callbacks map[string]*Callbacks `json:"callbacks,omitempty"`
	// Source says where the server was declared ("tools.yaml: mcpServers 1 (fs)").
	Source string `json:"-"`
}

// MCPCommand is how a stdio server is started: like a command tool's process, with no
// shell, only the declared environment, and its own process group, which is killed when
// the connection ends.
type MCPCommand struct {
	// Argv is the program and its arguments; a program path with a slash is relative to
	// the tools file's directory, a bare name is looked up in PATH when the file is loaded.
	Argv []string `json:"argv"`
	// Dir is the working directory, relative to the tools file's directory.
	Dir string `json:"dir,omitempty"`
	// PassEnv names the executor's variables the process sees.
	PassEnv []string `json:"passEnv,omitempty"`
	// Env sets fixed variables.
	Env map[string]string `json:"env,omitempty"`
}

// MCPHTTP is how a streamable HTTP server is reached.
type MCPHTTP struct {
	// URL is the server's MCP endpoint, http or https.
	URL string `json:"url"`
	// Headers are sent with every request; a value may reference ${NAME} for a variable
	// in PassEnv and ${secret:NAME} for one of the server's secrets.
	Headers map[string]string `json:"headers,omitempty"`
	// PassEnv names the variables the header values may reference.
	PassEnv []string `json:"passEnv,omitempty"`
}

// check lists what is wrong with a decoded server, and resolves the command's paths
// against base.
func (m *MCPServer) check(base string) []string {
	var p []string
	if !tools.NamePattern.MatchString(m.Name) {
		p = append(p, fmt.Sprintf("name %q must match %s", m.Name, tools.NamePattern))
	}
	if m.Prefix != "" && !tools.NamePattern.MatchString(m.Prefix) {
		p = append(p, fmt.Sprintf("prefix %q must match %s", m.Prefix, tools.NamePattern))
	}
	if m.ConnectTimeout < 0 || m.Refresh < 0 {
		p = append(p, "connectTimeout and refresh cannot be negative")
	}
	p = append(p, m.Policy.Check()...)
	for _, name := range slices.Sorted(maps.Keys(m.Callbacks)) {
		if cb := m.Callbacks[name]; cb == nil {
			p = append(p, fmt.Sprintf("callbacks: %s: declare at least one callback", name))
		} else {
			for _, q := range cb.check() {
				p = append(p, fmt.Sprintf("%s (tool %s)", q, name))
			}
		}
	}
	// The runners' own checks apply: the same program, directory, variable and header
	// rules as a command or an HTTP tool.
	spec := Spec{Definition: tools.Definition{Secrets: m.Secrets}}
	switch {
	case m.Command == nil && m.HTTP == nil:
		return append(p, "no transport: add command (a stdio server) or http (a streamable HTTP server)")
	case m.Command != nil && m.HTTP != nil:
		return append(p, "both command and http: a server has one transport")
	case m.Command != nil:
		c := &Command{Argv: m.Command.Argv, Dir: m.Command.Dir, PassEnv: m.Command.PassEnv, Env: m.Command.Env}
		spec.Command = c
		p = append(p, c.check(base)...)
		m.Command.Argv, m.Command.Dir = c.Argv, c.Dir
	default:
		h := &HTTP{URL: m.HTTP.URL, Headers: m.HTTP.Headers, PassEnv: m.HTTP.PassEnv}
		spec.HTTP = h
		p = append(p, h.check()...)
	}
	return append(p, spec.checkSecrets()...)
}

// Config is the adapter's configuration of the server.
func (m *MCPServer) Config(log zerolog.Logger) mcptool.Config {
	cfg := mcptool.Config{Name: m.Name, Prefix: m.Prefix, Policy: m.Policy, Secrets: m.Secrets,
		Refresh: m.Refresh.D(), ConnectTimeout: m.ConnectTimeout.D(), Logger: log}
	if len(m.Callbacks) > 0 {
		cfg.ToolOptions = func(name string) []tools.Option {
			if cb := m.Callbacks[name]; cb != nil {
				return []tools.Option{tools.WithCallbacks(cb.hooks(m.Name + "_" + name))}
			}
			return nil
		}
	}
	switch {
	case m.Command != nil:
		cfg.Transport = func(ctx context.Context) (mcp.Transport, error) { return m.commandTransport(ctx, log) }
	case m.HTTP != nil:
		cfg.Transport = m.httpTransport
	}
	return cfg
}

// secrets reads the server's secrets from their sources.
func (m *MCPServer) secrets() (tools.Secrets, error) {
	out := tools.Secrets{}
	for _, s := range m.Secrets {
		v, err := s.Resolve()
		if err != nil {
			return nil, fmt.Errorf("MCP server %s: %w", m.Name, err)
		}
		out[s.Name] = v
	}
	return out, nil
}

// commandTransport starts a fresh process: the declared environment and the secrets as
// variables, in its own process group. What it writes to stderr is logged at debug
// level, a line at a time and scrubbed of its secrets, and its end kept for errors.
func (m *MCPServer) commandTransport(_ context.Context, log zerolog.Logger) (mcp.Transport, error) {
	secrets, err := m.secrets()
	if err != nil {
		return nil, err
	}
	c := m.Command
	env := processEnv(c.PassEnv, c.Env)
	for k, v := range secrets {
		env[k] = v
	}
	cmd := exec.Command(c.Argv[0], c.Argv[1:]...)
	cmd.Dir = c.Dir
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	sort.Strings(cmd.Env)
	stderr := &syncTail{tail: tailBuffer{max: stderrTailBytes}, log: log, server: m.Name, secrets: secrets}
	cmd.Stderr = stderr
	setGroup(cmd)
	return &groupTransport{CommandTransport: mcp.CommandTransport{Command: cmd}, stderr: stderr, secrets: secrets}, nil
}

// groupTransport is a stdio transport whose connection, when closed, also kills what is
// left of the process's group, and which reports the end of the process's stderr when
// the connection fails.
type groupTransport struct {
	mcp.CommandTransport
	stderr  *syncTail
	secrets tools.Secrets
}

// Connect starts the server. It dies with the executor, with what it started (npx's
// node, say): the leader by its parent-death signal (its thread is one of the Go
// runtime's, which outlive it), its group by the guard.
func (t *groupTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := t.CommandTransport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	release, err := guardGroup(t.Command)
	if err != nil {
		killGroup(t.Command)
		return nil, errors.Join(err, conn.Close())
	}
	return &groupConn{Connection: conn, cmd: t.Command, release: release}, nil
}

// Diagnose says what the process last wrote to stderr (its secrets scrubbed).
func (t *groupTransport) Diagnose() string {
	if s := t.stderr.String(); s != "" {
		return "the server's stderr: " + t.secrets.ScrubString(s)
	}
	return ""
}

type groupConn struct {
	mcp.Connection
	cmd     *exec.Cmd
	release func() // the guard's
}

func (c *groupConn) Close() error {
	err := c.Connection.Close()
	killGroup(c.cmd)
	c.release()
	return err
}

// syncTail is a tailBuffer written by the process's stderr copier and read by Diagnose;
// it logs each complete line as well.
type syncTail struct {
	mu      sync.Mutex
	tail    tailBuffer
	line    []byte
	log     zerolog.Logger
	server  string
	secrets tools.Secrets
}

func (s *syncTail) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.line = append(s.line, p...)
	for {
		i := bytes.IndexByte(s.line, '\n')
		if i < 0 {
			break
		}
		if line := bytes.TrimSpace(s.line[:i]); len(line) > 0 {
			s.log.Debug().Str("mcp_server", s.server).Str("stderr", s.secrets.ScrubString(string(bytes.ToValidUTF8(line, []byte("\uFFFD"))))).Msg("MCP server stderr")
		}
		s.line = s.line[i+1:]
	}
	if len(s.line) > stderrTailBytes { // a line that never ends is not logged whole
		s.line = s.line[:0]
	}
	return s.tail.Write(p)
}

func (s *syncTail) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tail.String()
}

// httpTransport connects over streamable HTTP with the declared headers, expanded now
// (a rotated secret is picked up at the next reconnection).
func (m *MCPServer) httpTransport(context.Context) (mcp.Transport, error) {
	secrets, err := m.secrets()
	if err != nil {
		return nil, err
	}
	ctx := tools.WithSecrets(context.Background(), secrets)
	headers := http.Header{}
	for k, v := range m.HTTP.Headers {
		v, err := expandHeader(ctx, v)
		if err != nil {
			return nil, fmt.Errorf("MCP server %s: header %s: %w", m.Name, k, err)
		}
		headers.Set(k, v)
	}
	client := &http.Client{
		Transport: &headerRoundTripper{headers: headers, next: http.DefaultTransport},
		// A server that redirects is misconfigured; following it would send the
		// credentials somewhere nobody declared.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return &mcp.StreamableClientTransport{Endpoint: m.HTTP.URL, HTTPClient: client}, nil
}

type headerRoundTripper struct {
	headers http.Header
	next    http.RoundTripper
}

func (h *headerRoundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.headers {
		r.Header[k] = slices.Clone(v)
	}
	return h.next.RoundTrip(r)
}

// MCPServers are the running MCP servers of a tools file.
type MCPServers []*mcptool.Server

// Close ends every server's connection (and stdio process).
func (s MCPServers) Close() {
	for _, srv := range s {
		_ = srv.Close() // it returns once the server is closed; its error is always nil
	}
}

// StartMCP connects to each server, lists its tools and registers them in reg, and keeps
// them fresh until the servers are closed (see package mcptool; ctx bounds the start). It is all or
// nothing: when a server cannot be reached within its connectTimeout, or one of its tools
// is refused, every refusal is reported, the servers started are closed and their tools
// removed from reg. onChange, when not nil, hears of each later change of a server's tools.
func StartMCP(ctx context.Context, reg *tools.Registry, servers []MCPServer, log zerolog.Logger, onChange func(server string, c mcptool.Change)) (MCPServers, error) {
	var (
		started MCPServers
		errs    []error
	)
	for i := range servers {
		m := &servers[i]
		// A missing secret does not come by waiting: fail now, naming it.
		if _, err := m.secrets(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", m.Source, err))
			continue
		}
		cfg := m.Config(log)
		if onChange != nil {
			cfg.OnChange = func(c mcptool.Change) { onChange(m.Name, c) }
		}
		srv, err := mcptool.Start(ctx, reg, cfg)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", m.Source, err))
			continue
		}
		started = append(started, srv)
	}
	if len(errs) > 0 {
		for _, srv := range started {
			_ = srv.Close() // always nil
			for _, name := range srv.Names() {
				reg.Remove(name)
			}
		}
		return nil, errors.Join(errs...)
	}
	return started, nil
}
