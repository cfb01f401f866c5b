package toolsfile

import (
	"errors"
	"fmt"

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
