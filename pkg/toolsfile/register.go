package toolsfile

import (
	"context"
	"errors"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/pkg/mcptool"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Register adds every spec to reg as a function tool. The registry's own rules apply on
// top of [Load]'s checks: the schema must compile (no remote $ref), and a tool without one
// must opt in with allowNoSchema and a noSchemaMode. A name reg already serves is an
// error: a tools file cannot silently replace a built-in. It is all or nothing: when any
// spec is refused, every refusal is reported and none of the specs stays registered.
func Register(reg *tools.Registry, specs []Spec) error {
	var errs []error
	for i := range specs {
		s := &specs[i]
		if _, taken := reg.Lookup(s.Definition.Name); taken {
			errs = append(errs, fmt.Errorf("%w %s: tool %q is already registered", ErrInvalidFile, s.Source, s.Definition.Name))
		}
		if (s.Command == nil) == (s.HTTP == nil) {
			errs = append(errs, fmt.Errorf("%w %s: a tool needs exactly one runner, command or http", ErrInvalidFile, s.Source))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	var added []string
	for i := range specs {
		s := &specs[i]
		if err := reg.AddFunc(s.Definition, s.Run); err != nil {
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
// the servers returned when the executor stops.
func (f *File) Start(ctx context.Context, reg *tools.Registry, log zerolog.Logger, onChange func(server string, c mcptool.Change)) (MCPServers, error) {
	if err := Register(reg, f.Tools); err != nil {
		return nil, err
	}
	servers, err := StartMCP(ctx, reg, f.MCPServers, log, onChange)
	if err != nil {
		for _, s := range f.Tools {
			reg.Remove(s.Definition.Name)
		}
		return nil, err
	}
	return servers, nil
}
