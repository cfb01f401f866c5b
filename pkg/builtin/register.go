package builtin

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Register validates cfg and adds the enabled built-ins to reg (see [Config] for which).
// A name reg already serves is an error, never a silent replacement. Nothing is
// registered when cfg is invalid.
func Register(reg *tools.Registry, cfg Config) error {
	r, err := cfg.resolve()
	if err != nil {
		return err
	}
	for _, name := range Names() {
		if !r.enabled[name] {
			continue
		}
		if _, taken := reg.Lookup(name); taken {
			return fmt.Errorf("%w: tool %q is already registered", ErrInvalidConfig, name)
		}
	}
	adders := map[string]func() error{
		"calculator": func() error { return tools.Add[Calculator](reg) },
		"echo":       func() error { return tools.Add[Echo](reg) },
		"get_time":   func() error { return addConfigured(reg, func(g *GetTime) { g.now = cfg.Now }) },
		"sleep":      func() error { return addConfigured(reg, func(s *Sleep) { s.max = cfg.MaxSleep }) },
		"http_get":   func() error { return addConfigured(reg, func(h *HTTPGet) { h.g = r.http }) },
		"read_file":  func() error { return addConfigured(reg, func(f *ReadFile) { f.sb = r.sb }) },
		"list_dir":   func() error { return addConfigured(reg, func(l *ListDir) { l.sb = r.sb }) },
		"write_file": func() error { return addConfigured(reg, func(w *WriteFile) { w.sb = r.sb }) },
	}
	for _, name := range Names() {
		if !r.enabled[name] {
			continue
		}
		if err := adders[name](); err != nil {
			return fmt.Errorf("register built-in %s: %w", name, err)
		}
	}
	return nil
}

// addConfigured registers the typed tool T as a function that decodes the validated
// arguments into a fresh T, lets configure fill in its unexported configuration, and runs
// it. The registry makes a zero T per call, which would not know the executor's sandbox
// or allowlist; this is how the configuration reaches each call without a global.
func addConfigured[T any, PT interface {
	*T
	tools.Tool
}](reg *tools.Registry, configure func(PT)) error {
	def := PT(new(T)).Definition()
	return reg.AddFunc(def, func(ctx context.Context, args json.RawMessage) (any, error) {
		v := PT(new(T))
		if err := json.Unmarshal(args, v); err != nil {
			return nil, tools.Wrap(tools.CodeInvalidInput, err, fmt.Sprintf("%s: arguments: %v", def.Name, err))
		}
		configure(v)
		return v.Run(ctx)
	})
}
