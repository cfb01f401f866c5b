package toolsfile

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"

	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/pkg/mcptool"
	"github.com/toolfleet/toolfleet/pkg/sandbox"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Register adds every spec to reg as a function tool. The registry's own rules apply on
// top of [Load]'s checks: the schema must compile (no remote $ref), and a tool without one
// must opt in with allowNoSchema and a noSchemaMode. A name reg already serves is an
// error: a tools file cannot silently replace a built-in. It is all or nothing: when any
// spec is refused, every refusal is reported and none of the specs stays registered.
//
// Composites are registered last, so that their schema embeds the definitions of the
// sub-tools reg serves by then (the file's own, built-ins registered before); a
// sub-tool reg does not serve is taken to be served elsewhere in the fleet.
func Register(reg *tools.Registry, specs []Spec) error {
	var errs []error
	for i := range specs {
		s := &specs[i]
		if _, taken := reg.Lookup(s.Definition.Name); taken {
			errs = append(errs, fmt.Errorf("%w %s: tool %q is already registered", ErrInvalidFile, s.Source, s.Definition.Name))
		}
		runners := 0
		for _, set := range []bool{s.Command != nil, s.HTTP != nil, s.Composite != nil} {
			if set {
				runners++
			}
		}
		if runners != 1 {
			errs = append(errs, fmt.Errorf("%w %s: a tool needs exactly one runner, command, http or composite", ErrInvalidFile, s.Source))
		}
		if err := s.checkSandboxSupport(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.Source, err))
		}
		if err := s.checkRunAs(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.Source, err))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	var added []string
	order := make([]*Spec, 0, len(specs))
	for i := range specs {
		if specs[i].Composite == nil {
			order = append(order, &specs[i])
		}
	}
	for i := range specs {
		if specs[i].Composite != nil {
			order = append(order, &specs[i])
		}
	}
	for _, s := range order {
		opts := []tools.Option{tools.WithConfinement(s.confinement())}
		if s.Callbacks != nil {
			opts = append(opts, tools.WithCallbacks(s.Callbacks.hooks(s.Definition.Name)))
		}
		if s.Composite != nil {
			def, err := s.compositeDefinition(reg)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", s.Source, err))
				continue
			}
			s.Definition = def
			opts = append(opts, tools.WithCompositeEnvelope())
		}
		if err := reg.AddFunc(s.Definition, s.Run, opts...); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.Source, err))
			continue
		}
		added = append(added, s.Definition.Name)
	}
	if len(errs) > 0 {
		for _, name := range added {
			reg.Remove(name)
		}
		return errors.Join(errs...)
	}
	return nil
}

// Start registers the file's tools in reg ([Register]) and starts its MCP servers
// ([StartMCP]), all or nothing: on any error nothing of the file stays registered. Close
// the servers returned when the executor stops. The composites are registered once the
// MCP servers' tools are, so that their schema embeds those too.
func (f *File) Start(ctx context.Context, reg *tools.Registry, log zerolog.Logger, onChange func(server string, c mcptool.Change)) (MCPServers, error) {
	var plain, composites []Spec
	for _, s := range f.Tools {
		if s.Composite != nil {
			composites = append(composites, s)
		} else {
			plain = append(plain, s)
		}
	}
	if err := Register(reg, plain); err != nil {
		return nil, err
	}
	servers, err := StartMCP(ctx, reg, f.MCPServers, log, onChange)
	if err == nil {
		if err = Register(reg, composites); err != nil {
			servers.Close()
		}
	}
	if err == nil { // the file shows its composites as registered
		i := 0
		for k := range f.Tools {
			if f.Tools[k].Composite != nil {
				f.Tools[k].Definition = composites[i].Definition
				i++
			}
		}
	}
	if err != nil {
		for _, s := range plain {
			reg.Remove(s.Definition.Name)
		}
		return nil, err
	}
	return servers, nil
}

// landlockABI is the kernel's Landlock ABI, and checkSeccomp whether it can filter
// system calls, as the checks at registration see them (a test pretends a kernel
// without them).
var (
	landlockABI  = sandbox.ABI
	checkSeccomp = sandbox.CheckSeccomp
)

// geteuid is the executor's user, as the checks at registration see it (a test
// pretends an unprivileged executor).
var geteuid = os.Geteuid

// ErrNotRoot is wrapped by the error that refuses a tool with runAs in an executor that
// does not run as root, and so cannot switch users.
var ErrNotRoot = errors.New("runAs needs the executor to run as root")

// checkRunAs refuses a command with runAs where the executor cannot switch users.
func (s *Spec) checkRunAs() error {
	if s.Command == nil || s.Command.RunAs == nil {
		return nil
	}
	if uid := geteuid(); uid != 0 {
		return fmt.Errorf("tool %q cannot be served: %w (it runs as uid %d); run it as root, or remove runAs and run the executor as the tool's user", s.Definition.Name, ErrNotRoot, uid)
	}
	return nil
}

// checkSandboxSupport refuses a tool that runs sandboxed where the sandbox cannot be
// had: the kernel's Landlock is missing or too old for the policy, or the program did
// not call sandbox.Init. Such a tool is never run unconfined.
func (s *Spec) checkSandboxSupport() error {
	if s.Command == nil || s.Command.policy == nil {
		return nil
	}
	what := "its sandbox option"
	if s.Definition.ReadOnly() {
		what = "it declares itself read-only, so it runs in the read-only sandbox, and"
	}
	abi, _ := landlockABI()
	if err := s.Command.policy.CheckABI(abi); err != nil {
		return fmt.Errorf("tool %q cannot be served: %s %w", s.Definition.Name, what, err)
	}
	if err := checkSeccomp(); err != nil {
		return fmt.Errorf("tool %q cannot be served: %s %w", s.Definition.Name, what, err)
	}
	if !sandbox.Initialized() {
		return fmt.Errorf("tool %q cannot be served: %s %w", s.Definition.Name, what, sandbox.ErrNoInit)
	}
	return nil
}

// confinement says how the runner keeps a tool that declares itself read-only to
// reads: a command by the read-only sandbox, an HTTP endpoint by GET or HEAD.
func (s *Spec) confinement() tools.Confinement {
	switch {
	case s.Command != nil && s.Command.policy != nil && len(s.Command.policy.Write) == 0 && !s.Command.policy.Network:
		return tools.Confinement{Confined: true, Why: "a command in the read-only sandbox (no writes, no network)"}
	case s.Command != nil:
		return tools.Confinement{Why: "a command outside the read-only sandbox"}
	case s.HTTP != nil && (s.HTTP.Method == http.MethodGet || s.HTTP.Method == http.MethodHead):
		return tools.Confinement{Confined: true, Why: "an HTTP tool sending " + s.HTTP.Method}
	case s.HTTP != nil:
		return tools.Confinement{Why: fmt.Sprintf("an HTTP tool sending %s, which may change what it reaches (only GET and HEAD count as reads)", s.HTTP.method())}
	}
	return tools.Confinement{}
}
