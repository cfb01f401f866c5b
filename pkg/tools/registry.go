package tools

import (
	"sync"
	"sync/atomic"
)

// DefaultMaxArgumentBytes is the default limit on the size of one call's arguments.
const DefaultMaxArgumentBytes = 1 << 20

// Registry holds the tools a process knows: their definitions, compiled validators and
// implementations. It is safe for concurrent use. Reads (Hydrate, Lookup, Definitions)
// take no lock: they load an immutable snapshot that writers replace whole
// (copy-on-write), so the hot path never waits for a registration.
type Registry struct {
	mu          sync.Mutex // serialises writers; readers never take it
	snap        atomic.Pointer[snapshot]
	maxArgBytes int
}

// snapshot is one immutable state of a registry.
type snapshot struct {
	byName map[string]*entry
	order  []*entry // registration order; a replaced tool keeps its place
}

// RegistryOption configures a Registry.
type RegistryOption func(*Registry)

// WithMaxArgumentBytes sets the largest arguments Hydrate accepts, in bytes; larger ones
// are refused with [CodeInputTooLarge] before any parsing. Defaults to 1 MiB
// ([DefaultMaxArgumentBytes]); n <= 0 keeps the default.
func WithMaxArgumentBytes(n int) RegistryOption {
	return func(r *Registry) {
		if n > 0 {
			r.maxArgBytes = n
		}
	}
}

// NewRegistry returns an empty registry.
func NewRegistry(opts ...RegistryOption) *Registry {
	r := &Registry{maxArgBytes: DefaultMaxArgumentBytes}
	for _, o := range opts {
		o(r)
	}
	r.snap.Store(&snapshot{byName: map[string]*entry{}})
	return r
}

// Option configures one tool at registration.
type Option func(*toolOptions)

type toolOptions struct {
	callbacks   Callbacks
	confinement *Confinement // from WithConfinement
	envelope    bool         // from WithCompositeEnvelope
}

// WithCompositeEnvelope validates a tool's calls against the composite envelope
// {"calls":[{"name","args"}]} instead of its Parameters, for a composite whose
// Parameters is the union [CompositeDefinition] builds: the union informs models, while
// a call naming a tool outside it still reaches the tool, which answers that entry
// no_such_tool and runs the rest (as [Registry.AddComposite] does).
func WithCompositeEnvelope() Option {
	return func(o *toolOptions) { o.envelope = true }
}

// WithCallbacks attaches callbacks to a tool; see [Callbacks] for their order and rules.
// A field set here takes precedence over the same hook implemented as a method by a typed
// tool; fields left nil fall back to those methods.
func WithCallbacks(cb Callbacks) Option {
	return func(o *toolOptions) { o.callbacks = cb }
}

func collectOptions(opts []Option) toolOptions {
	var o toolOptions
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return o
}

// put installs e, replacing a tool of the same name in place: registering again is
// idempotent and does not reorder [Registry.Definitions].
func (r *Registry) put(e *entry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.snap.Load()
	next := &snapshot{byName: make(map[string]*entry, len(old.byName)+1), order: make([]*entry, 0, len(old.order)+1)}
	replaced := false
	for _, x := range old.order {
		if x.def.Name == e.def.Name {
			x = e
			replaced = true
		}
		next.order = append(next.order, x)
		next.byName[x.def.Name] = x
	}
	if !replaced {
		next.order = append(next.order, e)
		next.byName[e.def.Name] = e
	}
	r.snap.Store(next)
}

// Remove unregisters the tool called name; removing an unknown name does nothing. Calls
// already hydrated keep running.
func (r *Registry) Remove(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.snap.Load()
	if _, ok := old.byName[name]; !ok {
		return
	}
	next := &snapshot{byName: make(map[string]*entry, len(old.byName)), order: make([]*entry, 0, len(old.order))}
	for _, x := range old.order {
		if x.def.Name != name {
			next.order = append(next.order, x)
			next.byName[x.def.Name] = x
		}
	}
	r.snap.Store(next)
}

// Lookup returns the definition of the tool called name. The definition shares its
// Parameters bytes with the registry: treat it as read-only.
func (r *Registry) Lookup(name string) (Definition, bool) {
	e, ok := r.snap.Load().byName[name]
	if !ok {
		return Definition{}, false
	}
	return e.def, true
}

// Definitions returns every definition in registration order.
func (r *Registry) Definitions() []Definition {
	s := r.snap.Load()
	out := make([]Definition, len(s.order))
	for i, e := range s.order {
		out[i] = e.def
	}
	return out
}

// Len returns the number of registered tools.
func (r *Registry) Len() int { return len(r.snap.Load().order) }

// Only returns a view holding just the named tools (names not registered are ignored).
//
// A view is a registry of its own, taken as a snapshot: it shares the entries (compiled
// validators, implementations) with r, so making one is cheap, but registrations and
// removals made later in r do not show up in the view, nor the view's in r. It keeps r's
// argument size limit.
func (r *Registry) Only(names ...string) *Registry {
	keep := make(map[string]bool, len(names))
	for _, n := range names {
		keep[n] = true
	}
	return r.view(func(name string) bool { return keep[name] })
}

// Without returns a view holding every tool except the named ones; see [Registry.Only]
// for what a view shares.
func (r *Registry) Without(names ...string) *Registry {
	drop := make(map[string]bool, len(names))
	for _, n := range names {
		drop[n] = true
	}
	return r.view(func(name string) bool { return !drop[name] })
}

func (r *Registry) view(keep func(string) bool) *Registry {
	s := r.snap.Load()
	v := &Registry{maxArgBytes: r.maxArgBytes}
	next := &snapshot{byName: map[string]*entry{}}
	for _, e := range s.order {
		if keep(e.def.Name) {
			next.order = append(next.order, e)
			next.byName[e.def.Name] = e
		}
	}
	v.snap.Store(next)
	return v
}
