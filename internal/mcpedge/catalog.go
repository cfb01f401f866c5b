package mcpedge

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// entry is one catalog tool: its definition and what tools/list shows of it, built once
// per change of the definition.
type entry struct {
	def  tools.Definition
	tool *mcp.Tool
}

// snapshot is the catalog at one moment: never changed once published.
type snapshot struct {
	sorted []*entry // by name
	byName map[string]*entry
}

// view is the edge's copy of the live catalog: loaded once, then fed by the catalog's
// watch. Readers take the current snapshot without locking.
type view struct {
	catalog *jsutil.Catalog
	log     zerolog.Logger
	cur     atomic.Pointer[snapshot]

	mu   sync.Mutex // serialises writers
	defs map[string]*entry
}

func newView(c *jsutil.Catalog, log zerolog.Logger) *view {
	v := &view{catalog: c, log: log, defs: map[string]*entry{}}
	v.cur.Store(&snapshot{byName: map[string]*entry{}})
	return v
}

// load reads the whole catalog once.
func (v *view) load(ctx context.Context) error {
	defs, err := v.catalog.List(ctx)
	if err != nil {
		return err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, d := range defs {
		v.defs[d.Name] = newEntry(d)
	}
	v.publish()
	return nil
}

// follow applies the catalog's changes until ctx ends, watching again when a watch
// breaks (a server restart).
func (v *view) follow(ctx context.Context) {
	for ctx.Err() == nil {
		changes, err := v.catalog.Watch(ctx)
		if err != nil {
			v.log.Warn().Err(err).Msg("mcp edge: catalog watch failed; retrying")
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		// The watch's first changes are the whole catalog: they replace the view, so
		// that a tool removed while no watch ran (before the first, or during a server
		// restart) leaves it too.
		initial, loaded := map[string]*entry{}, false
		for ch := range changes {
			switch {
			case loaded:
				v.apply(ch)
			case ch.Loaded:
				v.replace(initial)
				loaded = true
			case ch.Removed:
				delete(initial, ch.Name)
			default:
				initial[ch.Name] = newEntry(ch.Definition)
			}
		}
	}
}

func (v *view) apply(ch jsutil.CatalogChange) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if ch.Removed {
		delete(v.defs, ch.Name)
	} else {
		v.defs[ch.Name] = newEntry(ch.Definition)
	}
	v.publish()
}

func (v *view) replace(defs map[string]*entry) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.defs = defs
	v.publish()
}

// publish makes the definitions the current snapshot; v.mu is held.
func (v *view) publish() {
	s := &snapshot{sorted: make([]*entry, 0, len(v.defs)), byName: make(map[string]*entry, len(v.defs))}
	for name, e := range v.defs {
		s.sorted = append(s.sorted, e)
		s.byName[name] = e
	}
	slices.SortFunc(s.sorted, func(a, b *entry) int { return strings.Compare(a.def.Name, b.def.Name) })
	v.cur.Store(s)
}

// lookup returns the entry of name: from the snapshot, else from the catalog itself,
// so that a replica whose watch has not yet seen a new tool still calls it.
func (v *view) lookup(ctx context.Context, name string) (*entry, bool) {
	if e, ok := v.cur.Load().byName[name]; ok {
		return e, true
	}
	d, ok, err := v.catalog.Get(ctx, name)
	if err != nil {
		v.log.Warn().Err(err).Str("tool", name).Msg("mcp edge: catalog read failed")
	}
	if !ok {
		return nil, false
	}
	return newEntry(d), true
}

// permissiveSchema stands for the schema of a tool registered without one.
var permissiveSchema = json.RawMessage(`{"type":"object"}`)

// newEntry builds what tools/list shows of d.
func newEntry(d tools.Definition) *entry {
	t := &mcp.Tool{
		Name:        d.Name,
		Description: d.Description,
		InputSchema: json.RawMessage(d.Parameters),
		Annotations: &mcp.ToolAnnotations{
			ReadOnlyHint:    d.ReadOnly(),
			DestructiveHint: new(!d.Safe),
			IdempotentHint:  d.IsIdempotent(),
		},
	}
	if !d.Validated() {
		t.InputSchema = permissiveSchema
		note := "This tool has no input schema: its arguments are not validated (no-schema mode " + string(d.NoSchemaMode) + ")."
		if t.Description == "" {
			t.Description = note
		} else {
			t.Description += "\n\n" + note
		}
	}
	if d.NeedsApproval() {
		t.Meta = mcp.Meta{"io.toolfleet/needsApproval": true}
	}
	return &entry{def: d, tool: t}
}
