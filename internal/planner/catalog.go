package planner

import (
	"context"
	"encoding/json"
	"sort"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/pkg/pick"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// catalogView is the planner's copy of the live tool catalog: the definitions executors
// serve, compiled into a registry so that the planner validates a model's calls before
// publishing them. Tools here never run in the planner; they run on the fleet.
type catalogView struct {
	catalog *jsutil.Catalog
	log     zerolog.Logger
	m       *metrics

	mu   sync.RWMutex
	reg  *tools.Registry
	defs map[string]tools.Definition
	// learnKeys holds each tool's pick.LearnKey, which usage records carry: a hash of
	// its definition, made once per definition rather than at every call's result.
	learnKeys map[string]string
}

func newCatalogView(c *jsutil.Catalog, log zerolog.Logger, m *metrics) *catalogView {
	return &catalogView{catalog: c, log: log, m: m, reg: tools.NewRegistry(),
		defs: map[string]tools.Definition{}, learnKeys: map[string]string{}}
}

// runsOnTheFleet stands in for a tool's code in the planner's registry.
func runsOnTheFleet(context.Context, json.RawMessage) (any, error) {
	return nil, tools.Errorf(tools.CodeInternal, "catalog tools run on the fleet, not in the planner")
}

// load reads the whole catalog once.
func (v *catalogView) load(ctx context.Context) error {
	defs, err := v.catalog.List(ctx)
	if err != nil {
		return err
	}
	for _, d := range defs {
		v.put(d)
	}
	return nil
}

// follow applies the catalog's changes until ctx ends, watching again when a watch
// breaks (a server restart). It blocks; the planner's Run waits for it.
func (v *catalogView) follow(ctx context.Context) {
	broke := false
	for ctx.Err() == nil {
		changes, err := v.catalog.Watch(ctx)
		if err != nil {
			v.log.Warn().Err(err).Msg("catalog watch failed; retrying")
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		if broke {
			v.m.watchRestarted(watchCatalog)
		}
		v.m.watching(watchCatalog, true)
		for ch := range changes {
			if ch.Err != nil {
				v.log.Warn().Err(ch.Err).Str("tool", ch.Name).Msg("catalog entry is not a valid definition; tool withdrawn")
			}
			if ch.Loaded {
				continue
			}
			if ch.Removed {
				v.remove(ch.Name)
			} else {
				v.put(ch.Definition)
			}
		}
		v.m.watching(watchCatalog, false)
		broke = true
	}
}

func (v *catalogView) put(d tools.Definition) {
	key := pick.LearnKey(d)
	v.mu.Lock()
	defer v.mu.Unlock()
	var opts []tools.Option
	if d.Composite != nil {
		// A composite's calls are checked as the envelope, then each sub-call against its
		// own tool's schema and the run's rules (composite.go).
		opts = append(opts, tools.WithCompositeEnvelope())
	}
	if err := v.reg.AddFunc(d, runsOnTheFleet, opts...); err != nil {
		v.log.Warn().Err(err).Str("tool", d.Name).Msg("catalog entry cannot be registered; calls of it will be refused")
		return
	}
	v.defs[d.Name], v.learnKeys[d.Name] = d, key
}

func (v *catalogView) remove(name string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.reg.Remove(name)
	delete(v.defs, name)
	delete(v.learnKeys, name)
}

// learnKey is the tool's pick.LearnKey; "" for a tool the catalog does not list.
func (v *catalogView) learnKey(name string) string {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.learnKeys[name]
}

// hydrate validates a call's arguments against the tool's schema.
func (v *catalogView) hydrate(name string, args json.RawMessage) (*tools.Call, error) {
	v.mu.RLock()
	reg := v.reg
	v.mu.RUnlock()
	return reg.Hydrate(name, args)
}

func (v *catalogView) get(name string) (tools.Definition, bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	d, ok := v.defs[name]
	return d, ok
}

func (v *catalogView) isFinal(name string) bool {
	d, ok := v.get(name)
	return ok && d.Final
}

// names returns the catalog's tool names, sorted.
func (v *catalogView) names() []string {
	v.mu.RLock()
	defer v.mu.RUnlock()
	out := make([]string, 0, len(v.defs))
	for n := range v.defs {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Tool returns the definition of the catalog's tool name as the planner knows it now
// (what a run may name and call); false when no executor serves it.
func (p *Planner) Tool(name string) (tools.Definition, bool) { return p.cat.get(name) }
