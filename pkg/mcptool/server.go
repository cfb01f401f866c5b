package mcptool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/tick"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Defaults of a [Config].
const (
	DefaultRefresh        = 5 * time.Minute
	DefaultConnectTimeout = 30 * time.Second
	// minRefresh keeps a server's tiny ttl hint from turning into a busy loop.
	minRefresh   = time.Second
	minBackoff   = 100 * time.Millisecond
	maxBackoff   = 10 * time.Second
	listTimeout  = 30 * time.Second
	errTextLimit = 4096
)

// Config says how to reach one MCP server and what toolfleet allows its tools.
type Config struct {
	// Name names the server in messages, logs and tags, e.g. "fs". Required.
	Name string
	// Prefix goes before each tool's name, with "_": prefix "fs" serves the server's
	// "read_file" as "fs_read_file". Empty: Name.
	Prefix string
	// Transport returns a fresh transport to the server. It is called for the first
	// connection and for each reconnection, so it must start a new process for a stdio
	// server (a new mcp.CommandTransport with a new exec.Cmd). See [Command] and [HTTP].
	Transport func(ctx context.Context) (mcp.Transport, error)
	// Policy is what toolfleet allows the server's tools.
	Policy Policy
	// Secrets are declared on every imported tool, so that the executor resolves them at
	// start-up and scrubs their values from outputs and errors. The transport uses them
	// (as variables of a process, in HTTP headers).
	Secrets []tools.Secret
	// Refresh is how often the tools are listed again when the server gives no ttl hint.
	// Zero: 5 minutes; negative: only on list_changed and reconnection.
	Refresh time.Duration
	// ConnectTimeout bounds Start's attempts to connect and list. Zero: 30 s.
	ConnectTimeout time.Duration
	// Logger logs reconnections, refreshes and refused tools. Zero: nothing.
	Logger zerolog.Logger
	// OnChange, when set, is called after each refresh that changed the served tools.
	OnChange func(Change)
	// ToolOptions, when set, adds registration options (callbacks, say) to the server's
	// tool called name (its name on the server).
	ToolOptions func(name string) []tools.Option
}

// toolOptions are the registration options of the server's tool called name.
func (s *Server) toolOptions(name string, conf tools.Confinement) []tools.Option {
	opts := []tools.Option{tools.WithConfinement(conf)}
	if s.cfg.ToolOptions != nil {
		opts = append(opts, s.cfg.ToolOptions(name)...)
	}
	return opts
}

// Change is what one refresh changed, by toolfleet name.
type Change struct {
	Added, Updated, Removed []string
	// Refused are tools the server lists that cannot be served, with why.
	Refused map[string]string
}

// Server is a connected MCP server whose tools are in a registry. Close it to stop its
// refreshes and reconnections and end the connection (and a stdio server's process).
type Server struct {
	cfg    Config
	reg    *tools.Registry
	client *mcp.Client
	log    zerolog.Logger

	mu   sync.Mutex
	sess *mcp.ClientSession // nil while disconnected
	up   chan struct{}      // closed while sess is set
	// lost is closed when a call finds sess's connection lost (lose): the supervisor
	// then closes sess and connects again.
	lost    chan struct{}
	served  map[string]served // by toolfleet name
	lastTTL time.Duration     // the ttl hint of the last list, 0 when none
	refusal map[string]string // by toolfleet name, from the last list

	kick   chan struct{} // list again now (list_changed)
	cancel context.CancelFunc
	done   chan struct{}
}

// served is a tool the adapter registered: the server's name for it and what it
// registered, to tell a changed tool from an unchanged one.
type served struct {
	mcpName string
	def     []byte
}

// Start connects to the server, lists its tools and registers them in reg, then keeps
// them fresh and the connection up until Close is called. ctx bounds only the start
// (with ConnectTimeout): an executor that is stopping still finishes the calls in
// flight, so close the server once the executor has returned. It fails, with
// nothing registered, when the server cannot be reached within ConnectTimeout, when a
// listed tool cannot be served (its name or schema is refused), or when a tool's name
// is taken in reg already.
func Start(ctx context.Context, reg *tools.Registry, cfg Config) (*Server, error) {
	if cfg.Name == "" {
		return nil, errors.New("mcptool: the server needs a name")
	}
	if cfg.Transport == nil {
		return nil, fmt.Errorf("mcptool: server %s: no transport", cfg.Name)
	}
	if p := cfg.Policy.Check(); len(p) > 0 {
		return nil, fmt.Errorf("mcptool: server %s: %s", cfg.Name, joinLines(p))
	}
	if cfg.Prefix == "" {
		cfg.Prefix = cfg.Name
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = DefaultConnectTimeout
	}
	if cfg.Refresh == 0 {
		cfg.Refresh = DefaultRefresh
	}
	s := &Server{cfg: cfg, reg: reg, log: cfg.Logger.With().Str("mcp_server", cfg.Name).Logger(),
		up: make(chan struct{}), served: map[string]served{}, kick: make(chan struct{}, 1), done: make(chan struct{})}
	s.client = mcp.NewClient(&mcp.Implementation{Name: "toolfleet", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case s.kick <- struct{}{}:
			default:
			}
		},
	})

	startCtx, cancelStart := context.WithTimeout(ctx, cfg.ConnectTimeout)
	defer cancelStart()
	var (
		sess    *mcp.ClientSession
		listed  []*mcp.Tool
		ttl     time.Duration
		lastErr error
	)
	b := tick.Backoff{First: minBackoff, Max: maxBackoff}
	for {
		sess, lastErr = s.connect(startCtx)
		if lastErr == nil {
			listed, ttl, lastErr = list(startCtx, sess)
			if lastErr == nil {
				break
			}
			_ = sess.Close() // lastErr says what went wrong; the next try connects afresh
		}
		wait := b.Next()
		s.log.Warn().Err(lastErr).Dur("retry_in", wait).Msg("MCP server: cannot connect and list its tools yet; retrying")
		select {
		case <-startCtx.Done():
			if ctx.Err() != nil {
				return nil, fmt.Errorf("mcptool: server %s: start canceled before a connection: %w", cfg.Name, lastErr)
			}
			return nil, fmt.Errorf("mcptool: server %s: no connection within %s: %w", cfg.Name, cfg.ConnectTimeout, lastErr)
		case <-time.After(wait):
		}
	}
	defs, refused := s.definitions(listed)
	var errs []error
	for _, name := range sortedKeys(refused) {
		errs = append(errs, fmt.Errorf("mcptool: server %s: %s", cfg.Name, refused[name]))
	}
	for _, d := range defs {
		if _, taken := reg.Lookup(d.def.Name); taken {
			errs = append(errs, fmt.Errorf("mcptool: server %s: tool %q (%s on the server) is already registered", cfg.Name, d.def.Name, d.mcpName))
		}
	}
	if len(errs) == 0 {
		for _, d := range defs {
			if err := reg.AddFunc(d.def, s.runner(d.mcpName), s.toolOptions(d.mcpName, d.conf)...); err != nil {
				errs = append(errs, fmt.Errorf("mcptool: server %s: tool %s: %w", cfg.Name, d.mcpName, err))
				continue
			}
			s.served[d.def.Name] = served{mcpName: d.mcpName, def: d.key}
		}
	}
	if len(errs) > 0 {
		for name := range s.served {
			reg.Remove(name)
		}
		_ = sess.Close() // errs say why the start failed; this session is not used again
		return nil, errors.Join(errs...)
	}
	s.setSession(sess)
	s.lastTTL = ttl
	s.warnUnlisted(listed)
	s.log.Info().Int("tools", len(defs)).Strs("names", s.Names()).Msg("MCP server connected; its tools are registered")

	// The server outlives ctx: calls in flight when an executor starts to stop must
	// finish, so only Close ends it.
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	go func() {
		defer close(s.done)
		s.supervise(runCtx, sess)
	}()
	return s, nil
}

// warnUnlisted logs the policy's names of tools that the server does not list: a typo,
// or a tool that comes later.
func (s *Server) warnUnlisted(listed []*mcp.Tool) {
	have := map[string]bool{}
	for _, t := range listed {
		if t != nil {
			have[t.Name] = true
		}
	}
	var missing []string
	for _, name := range append(slices.Clone(s.cfg.Policy.Include), sortedKeys(s.cfg.Policy.Tools)...) {
		if !have[name] && !slices.Contains(missing, name) {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		s.log.Warn().Strs("tools", missing).Msg("MCP server: the policy names tools the server does not list (a typo, or tools that come later)")
	}
}

// Names returns the toolfleet names of the tools served now, sorted.
func (s *Server) Names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sortedKeys(s.served)
}

// Refused returns the tools the last list could not serve, by toolfleet name, with why.
func (s *Server) Refused() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.refusal)
}

// Close stops refreshing and reconnecting and ends the connection. The tools stay in
// the registry (their calls then fail); remove them with [Server.Names] if needed.
func (s *Server) Close() error {
	s.cancel()
	<-s.done
	return nil
}

// Refresh lists the tools again now and applies the changes.
func (s *Server) Refresh(ctx context.Context) (Change, error) {
	sess, err := s.session(ctx)
	if err != nil {
		return Change{}, err
	}
	return s.refresh(ctx, sess)
}

func (s *Server) connect(ctx context.Context) (*mcp.ClientSession, error) {
	t, err := s.cfg.Transport(ctx)
	if err != nil {
		return nil, err
	}
	sess, err := s.client.Connect(ctx, t, nil)
	if err != nil {
		if d, ok := t.(Diagnoser); ok {
			if more := d.Diagnose(); more != "" {
				err = fmt.Errorf("%w; %s", err, more)
			}
		}
		return nil, err
	}
	return sess, nil
}

// Diagnoser is implemented by a transport that can say more about a connection that
// failed, such as the exit status and the end of the stderr of a stdio server's process.
// Start's error and the reconnection logs include what it says.
type Diagnoser interface {
	Diagnose() string
}

func (s *Server) setSession(sess *mcp.ClientSession) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sess = sess
	if sess != nil {
		close(s.up)
		s.lost = make(chan struct{})
	} else {
		s.up = make(chan struct{})
		s.lost = nil
	}
}

// lose tells the supervisor that a call found sess's connection lost, unless sess is
// no longer the session (dropped already).
func (s *Server) lose(sess *mcp.ClientSession) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sess != sess {
		return
	}
	select {
	case <-s.lost: // told already
	default:
		close(s.lost)
	}
}

// session waits for a live connection within ctx.
func (s *Server) session(ctx context.Context) (*mcp.ClientSession, error) {
	for {
		s.mu.Lock()
		sess, up := s.sess, s.up
		s.mu.Unlock()
		if sess != nil {
			return sess, nil
		}
		select {
		case <-up:
		case <-s.done:
			return nil, fmt.Errorf("MCP server %s: the adapter is closed", s.cfg.Name)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// supervise keeps the tools fresh while sess lives, and reconnects when it ends. The
// backoff between attempts grows from 100 ms to 10 s, and starts over only after a
// connection that lasted a minute, so that a server that dies right after each start
// is not restarted in a tight loop.
func (s *Server) supervise(ctx context.Context, sess *mcp.ClientSession) {
	b := tick.Backoff{First: minBackoff, Max: maxBackoff}
	for {
		since := time.Now()
		s.mu.Lock()
		lost := s.lost
		s.mu.Unlock()
		// Wait's answer is only that the connection ended; why, the next connect says.
		ended := make(chan struct{})
		go func() { _ = sess.Wait(); close(ended) }()
		s.watch(ctx, sess, ended, lost)
		s.setSession(nil)
		// An error closing a connection that is over says nothing more; Wait then ends.
		_ = sess.Close()
		<-ended
		if ctx.Err() != nil {
			return
		}
		if time.Since(since) > time.Minute {
			b.Reset()
		}
		wait := b.Next()
		s.log.Warn().Dur("retry_in", wait).Msg("MCP server: the connection ended; reconnecting")
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			next, err := s.connect(ctx)
			if err == nil {
				sess = next
				break
			}
			wait = b.Next()
			s.log.Warn().Err(err).Dur("retry_in", wait).Msg("MCP server: cannot reconnect yet")
		}
		s.setSession(sess)
		s.log.Info().Msg("MCP server: reconnected")
		if _, err := s.refresh(ctx, sess); err != nil {
			s.log.Warn().Err(err).Msg("MCP server: cannot list the tools after reconnecting")
		}
	}
}

// watch refreshes on list_changed and on the ttl or the refresh interval until the
// session ends, a call finds it lost, or ctx ends.
func (s *Server) watch(ctx context.Context, sess *mcp.ClientSession, ended, lost <-chan struct{}) {
	timer := time.NewTimer(s.nextRefresh())
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ended:
			return
		case <-lost:
			return
		case <-s.kick:
		case <-timer.C:
		}
		if _, err := s.refresh(ctx, sess); err != nil && ctx.Err() == nil {
			s.log.Warn().Err(err).Msg("MCP server: cannot list the tools")
		}
		timer.Reset(s.nextRefresh())
	}
}

// nextRefresh is the server's ttl hint when it gave one, else the configured interval.
func (s *Server) nextRefresh() time.Duration {
	s.mu.Lock()
	ttl := s.lastTTL
	s.mu.Unlock()
	switch {
	case ttl > 0:
		return max(ttl, minRefresh)
	case s.cfg.Refresh > 0:
		return max(s.cfg.Refresh, minRefresh)
	}
	return 100 * 365 * 24 * time.Hour // only on list_changed and reconnection
}

// refresh lists the tools and brings the registry in line with the list.
func (s *Server) refresh(ctx context.Context, sess *mcp.ClientSession) (Change, error) {
	listed, ttl, err := list(ctx, sess)
	if err != nil {
		return Change{}, err
	}
	defs, refused := s.definitions(listed)
	ch, refusedChanged := s.apply(defs, refused, ttl)
	if refusedChanged {
		for _, name := range sortedKeys(ch.Refused) {
			s.log.Error().Str("tool", name).Str("reason", ch.Refused[name]).Msg("MCP server: tool refused, not served")
		}
	}
	if len(ch.Added)+len(ch.Updated)+len(ch.Removed) > 0 || (refusedChanged && len(ch.Refused) > 0) {
		s.log.Info().Strs("added", ch.Added).Strs("updated", ch.Updated).Strs("removed", ch.Removed).Msg("MCP server: tools changed")
		if s.cfg.OnChange != nil {
			s.cfg.OnChange(ch)
		}
	}
	return ch, nil
}

// apply brings the registry in line with a list: it registers new and changed tools and
// removes the ones gone or refused now.
func (s *Server) apply(defs []candidate, refused map[string]string, ttl time.Duration) (ch Change, refusedChanged bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastTTL = ttl
	keep := map[string]bool{}
	for _, d := range defs {
		old, ours := s.served[d.def.Name]
		if !ours {
			if _, taken := s.reg.Lookup(d.def.Name); taken {
				refused[d.def.Name] = fmt.Sprintf("tool %q (%s on the server) is already registered by another tool", d.def.Name, d.mcpName)
				continue
			}
		}
		if ours && string(old.def) == string(d.key) && old.mcpName == d.mcpName {
			keep[d.def.Name] = true
			continue
		}
		if err := s.reg.AddFunc(d.def, s.runner(d.mcpName), s.toolOptions(d.mcpName, d.conf)...); err != nil {
			refused[d.def.Name] = fmt.Sprintf("tool %s: %v", d.mcpName, err)
			continue
		}
		keep[d.def.Name] = true
		s.served[d.def.Name] = served{mcpName: d.mcpName, def: d.key}
		if ours {
			ch.Updated = append(ch.Updated, d.def.Name)
		} else {
			ch.Added = append(ch.Added, d.def.Name)
		}
	}
	for _, name := range sortedKeys(s.served) {
		if !keep[name] {
			s.reg.Remove(name)
			delete(s.served, name)
			ch.Removed = append(ch.Removed, name)
		}
	}
	if len(refused) > 0 {
		ch.Refused = refused
	}
	refusedChanged = !maps.Equal(s.refusal, refused)
	s.refusal = refused
	return ch, refusedChanged
}

// list lists every tool of the server, page by page, and returns the ttl hint of the
// last page (0 when none).
func list(ctx context.Context, sess *mcp.ClientSession) ([]*mcp.Tool, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	var (
		out    []*mcp.Tool
		cursor string
		ttl    time.Duration
	)
	for range 1000 {
		res, err := sess.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			return nil, 0, fmt.Errorf("tools/list: %w", err)
		}
		out = append(out, res.Tools...)
		ttl = time.Duration(res.TTLMs) * time.Millisecond
		if res.NextCursor == "" {
			return out, ttl, nil
		}
		cursor = res.NextCursor
	}
	return nil, 0, errors.New("tools/list: more than 1000 pages")
}

// candidate is a listed tool turned into a definition.
type candidate struct {
	mcpName string
	def     tools.Definition
	conf    tools.Confinement // from the server's readOnlyHint
	key     []byte            // the definition and the hint as JSON, to tell a change
}

// confinement is what keeps an imported tool that declares itself read-only (by the
// tools file's capabilities) to reads: the server's own readOnlyHint for it, or nothing.
func confinement(t *mcp.Tool) tools.Confinement {
	if t.Annotations != nil && t.Annotations.ReadOnlyHint {
		return tools.Confinement{Confined: true, Why: "the MCP server declares readOnlyHint for " + t.Name}
	}
	return tools.Confinement{Why: "the MCP server does not declare readOnlyHint for " + t.Name}
}

// definitions turns the listed tools into definitions, and says why each of the others
// is refused (by toolfleet name, or by the server's name when it has none).
func (s *Server) definitions(listed []*mcp.Tool) ([]candidate, map[string]string) {
	var out []candidate
	refused := map[string]string{}
	seen := map[string]string{}
	for _, t := range listed {
		if t == nil || !s.cfg.Policy.imports(t.Name) {
			continue
		}
		name := s.cfg.Prefix + "_" + t.Name
		if o := s.cfg.Policy.Tools[t.Name]; o.Name != "" {
			name = o.Name
		}
		if !tools.NamePattern.MatchString(name) {
			refused[name] = fmt.Sprintf("tool %q would be served as %q, which does not match %s: "+
				"name it under tools (%q: {name: ...}) or exclude it", t.Name, name, tools.NamePattern, t.Name)
			continue
		}
		if other, dup := seen[name]; dup {
			refused[name] = fmt.Sprintf("tools %q and %q would both be served as %q: rename one under tools", other, t.Name, name)
			continue
		}
		seen[name] = t.Name
		d := tools.Definition{Type: "function", Name: name, Description: t.Description,
			Idempotent: new(false), Tags: []string{"mcp", s.cfg.Name}, Secrets: slices.Clone(s.cfg.Secrets)}
		if d.Description == "" {
			d.Description = t.Title
		}
		if t.InputSchema == nil {
			refused[name] = fmt.Sprintf("tool %s has no inputSchema", t.Name)
			continue
		}
		params, err := json.Marshal(t.InputSchema)
		if err != nil {
			refused[name] = fmt.Sprintf("tool %s: inputSchema: %v", t.Name, err)
			continue
		}
		d.Parameters = params
		s.cfg.Policy.apply(&d, t.Name)
		if err := tools.NewRegistry().AddFunc(d, s.runner(t.Name)); err != nil {
			refused[name] = fmt.Sprintf("tool %s is refused: %v", t.Name, err)
			continue
		}
		conf := confinement(t)
		key, err := json.Marshal(struct {
			Def      tools.Definition
			Confined bool
		}{d, conf.Confined})
		if err != nil { // its schemas were just read as JSON: not expected
			refused[name] = fmt.Sprintf("tool %s: %v", t.Name, err)
			continue
		}
		out = append(out, candidate{mcpName: t.Name, def: d, conf: conf, key: key})
	}
	return out, refused
}

func joinLines(p []string) string {
	b := []byte{}
	for i, s := range p {
		if i > 0 {
			b = append(b, "; "...)
		}
		b = append(b, s...)
	}
	return string(b)
}
