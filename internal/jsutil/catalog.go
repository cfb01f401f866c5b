package jsutil

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/tick"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Catalog is the live tool catalog: the JetStream KV bucket toolfleet-catalog, key = tool
// name, value = the Definition JSON. Executors [Catalog.Put] what they serve and keep it
// fresh with [Catalog.Keep]; the bucket's TTL ([events.Config].CatalogTTL) removes the
// entry of a tool no executor refreshes any more, with a delete marker that watchers
// see. What an entry must be is the contract's rule, [events.CatalogEntry].
type Catalog struct {
	kv  jetstream.KeyValue
	ttl time.Duration
}

// OpenCatalog opens the catalog bucket, which [Ensure] must have created.
func OpenCatalog(ctx context.Context, js jetstream.JetStream, cfg events.Config) (*Catalog, error) {
	kv, err := js.KeyValue(ctx, events.BucketCatalog)
	if err != nil {
		return nil, fmt.Errorf("open catalog bucket %s: %w", events.BucketCatalog, err)
	}
	return NewCatalog(kv, cfg), nil
}

// NewCatalog returns the catalog kept in kv, a bucket opened by the caller (one that had
// to wait for it, or one of another name beside a fleet's).
func NewCatalog(kv jetstream.KeyValue, cfg events.Config) *Catalog {
	return &Catalog{kv: kv, ttl: cfg.WithDefaults().CatalogTTL.D()}
}

// Put stores def under its name, refreshing its TTL.
func (c *Catalog) Put(ctx context.Context, def tools.Definition) error {
	if err := events.ValidateTool(def.Name); err != nil {
		return err
	}
	b, err := json.Marshal(def)
	if err != nil {
		return fmt.Errorf("catalog put %s: %w", def.Name, err)
	}
	if _, err := c.kv.Put(ctx, def.Name, b); err != nil {
		return fmt.Errorf("catalog put %s: %w", def.Name, err)
	}
	return nil
}

// Delete removes a tool from the catalog at once.
func (c *Catalog) Delete(ctx context.Context, name string) error {
	if err := c.kv.Delete(ctx, name); err != nil {
		return fmt.Errorf("catalog delete %s: %w", name, err)
	}
	return nil
}

// Get returns the definition of name; ok is false when no executor serves it.
func (c *Catalog) Get(ctx context.Context, name string) (def tools.Definition, ok bool, err error) {
	if events.ValidateTool(name) != nil {
		return def, false, nil
	}
	e, err := c.kv.Get(ctx, name)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return def, false, nil
	}
	if err != nil {
		return def, false, fmt.Errorf("catalog get %s: %w", name, err)
	}
	if def, err = events.CatalogEntry(name, e.Value()); err != nil {
		return def, false, err
	}
	return def, true, nil
}

// List returns every valid definition in the catalog ([events.CatalogEntry]), sorted
// by name.
func (c *Catalog) List(ctx context.Context) ([]tools.Definition, error) {
	w, err := Watch(ctx, c.kv, jetstream.AllKeys, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("catalog list: %w", err)
	}
	defer w.Stop()
	var defs []tools.Definition
	for e := range w.Updates() {
		if e == nil {
			break // initial values done
		}
		if d, err := events.CatalogEntry(e.Key(), e.Value()); err == nil {
			defs = append(defs, d)
		}
	}
	return defs, nil
}

// CatalogChange is one change of the catalog seen by [Catalog.Watch].
type CatalogChange struct {
	// Name is the tool.
	Name string
	// Definition is the new definition; zero when Removed.
	Definition tools.Definition
	// Removed is true when the tool left the catalog (deleted or expired), or when its
	// entry is not a valid definition (Err says why).
	Removed bool
	// Err, when set, is why the tool's new entry was refused ([events.CatalogEntry]): the tool
	// is withdrawn (Removed), as what the catalog holds under its name can no longer be
	// offered. Report it: an executor or a user stored something wrong.
	Err error
	// Loaded marks the end of the catalog's contents at the start of the watch; such a
	// change names no tool.
	Loaded bool
}

// Watch sends the current catalog, then a change with Loaded set, then every change,
// until ctx ends. A refresh that stores the same value again is not reported. An entry
// that is not a valid definition ([events.CatalogEntry]) withdraws its tool: it is sent as
// Removed with Err set, whether or not the tool was there before. The channel is closed
// when ctx ends or the watch fails.
func (c *Catalog) Watch(ctx context.Context) (<-chan CatalogChange, error) {
	w, err := Watch(ctx, c.kv, jetstream.AllKeys)
	if err != nil {
		return nil, fmt.Errorf("catalog watch: %w", err)
	}
	out := make(chan CatalogChange, 64)
	go func() {
		defer close(out)
		defer w.Stop()
		seen := map[string][sha256.Size]byte{} // hash of each valid entry's value
		for {
			var e jetstream.KeyValueEntry
			select {
			case <-ctx.Done():
				return
			case v, ok := <-w.Updates():
				if !ok {
					return
				}
				e = v
			}
			var ch CatalogChange
			switch {
			case e == nil: // end of the initial values
				ch.Loaded = true
			case e.Operation() == jetstream.KeyValuePut:
				ch.Name = e.Key()
				sum := sha256.Sum256(e.Value())
				if prev, ok := seen[e.Key()]; ok && prev == sum {
					continue // a refresh
				}
				if ch.Definition, ch.Err = events.CatalogEntry(e.Key(), e.Value()); ch.Err != nil {
					ch.Definition, ch.Removed = tools.Definition{}, true
					delete(seen, e.Key())
					break
				}
				seen[e.Key()] = sum
			default:
				ch.Name = e.Key() // delete, purge, or the TTL's delete marker
				if _, ok := seen[e.Key()]; !ok {
					continue
				}
				delete(seen, e.Key())
				ch.Removed = true
			}
			select {
			case out <- ch:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// Keep puts defs now and again every CatalogTTL/3 until ctx ends, so the entries stay
// while this process serves them and expire within CatalogTTL once it stops. It returns
// the first put's error at once, having kept nothing; after that first put it blocks
// until ctx ends and returns nil, so run it in a goroutine you wait for (an errgroup).
// Later failures (a server restart) are retried at the next tick and reported to onErr,
// which may be nil. Wrapped in [RetrySetup], a failing first put is tried again too.
func (c *Catalog) Keep(ctx context.Context, defs []tools.Definition, onErr func(error)) error {
	if err := c.PutAll(ctx, defs); err != nil {
		return err
	}
	c.Refresh(ctx, defs, onErr)
	return nil
}

// PutAll stores every definition of defs, stopping at the first failure.
func (c *Catalog) PutAll(ctx context.Context, defs []tools.Definition) error {
	for _, d := range defs {
		if err := c.Put(ctx, d); err != nil {
			return err
		}
	}
	return nil
}

// Refresh is Keep without the first put, for a caller that made it already (with
// PutAll): it puts defs again every CatalogTTL/3 until ctx ends, reporting failures to
// onErr, which may be nil.
func (c *Catalog) Refresh(ctx context.Context, defs []tools.Definition, onErr func(error)) {
	tick.Every(ctx, c.ttl/3, func(ctx context.Context) {
		if err := c.PutAll(ctx, defs); err != nil && onErr != nil && ctx.Err() == nil {
			onErr(err)
		}
	})
}
