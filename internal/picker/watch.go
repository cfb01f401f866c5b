package picker

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/pick"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// maxBatch bounds how many pending catalog changes are applied as one snapshot.
const maxBatch = 10_000

// watch applies catalog changes until ctx ends. The bucket's initial contents form one
// batch (the watcher marks their end with a nil entry); after that every change, with
// whatever else is already pending, forms the next.
func (s *Service) watch(ctx context.Context, w jetstream.KeyWatcher) error {
	warmCh := make(chan struct{}, 1)
	if s.o.warm != nil {
		// The warm-up loop stops with the watch, and the watch returns after it.
		var warming sync.WaitGroup
		defer warming.Wait()
		warmCtx, stopWarming := context.WithCancel(ctx)
		defer stopWarming()
		warming.Go(func() { s.warmLoop(warmCtx, warmCh) })
	}
	var batch []pick.Change
	loaded := false
	s.seen = map[string][sha256.Size]byte{}
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-w.Updates():
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return errors.New("picker: catalog watch ended")
			}
			if e == nil {
				loaded = true
			} else if ch, ok := s.change(e); ok {
				batch = append(batch, ch)
			}
			if !loaded {
				continue
			}
			batch = s.drain(w, batch)
			s.apply(batch)
			batch = batch[:0]
			if !s.ready.Swap(true) {
				s.o.log.Info().Int("tools", s.catalog.Snapshot().Len()).Msg("catalog loaded")
			}
			select {
			case warmCh <- struct{}{}:
			default: // a warm-up is already due
			}
		}
	}
}

// drain adds the changes already waiting, without blocking.
func (s *Service) drain(w jetstream.KeyWatcher, batch []pick.Change) []pick.Change {
	for len(batch) < maxBatch {
		select {
		case e, ok := <-w.Updates():
			if !ok || e == nil {
				return batch
			}
			if ch, ok := s.change(e); ok {
				batch = append(batch, ch)
			}
		default:
			return batch
		}
	}
	return batch
}

// change turns a KV entry into a catalog change. A value that is not a valid definition
// for its key is logged and removes the key's tool: what the catalog holds under that
// name can no longer be offered.
func (s *Service) change(e jetstream.KeyValueEntry) (pick.Change, bool) {
	key := e.Key()
	if e.Operation() != jetstream.KeyValuePut { // delete, purge, or the TTL's marker
		delete(s.seen, key)
		return pick.Change{Name: key}, true
	}
	// Executors put their definitions again every few seconds to keep them alive: a
	// value seen before is not decoded again.
	sum := sha256.Sum256(e.Value())
	if prev, ok := s.seen[key]; ok && prev == sum {
		return pick.Change{}, false
	}
	var d tools.Definition
	err := json.Unmarshal(e.Value(), &d)
	switch {
	case err != nil:
		err = fmt.Errorf("value is not a definition: %w", err)
	case d.Name != key:
		err = fmt.Errorf("definition names %q under key %q", d.Name, key)
	case !tools.NamePattern.MatchString(d.Name):
		err = fmt.Errorf("name %q does not match %s", d.Name, tools.NamePattern)
	}
	if err != nil {
		s.m.badEntries.Inc()
		s.o.log.Warn().Err(err).Str("tool", key).Uint64("revision", e.Revision()).Msg("catalog entry is not a valid definition; tool withdrawn")
		delete(s.seen, key)
		return pick.Change{Name: key}, true
	}
	s.seen[key] = sum
	return pick.Change{Name: key, Def: &d}, true
}

func (s *Service) apply(batch []pick.Change) {
	start := time.Now()
	if err := s.catalog.Apply(batch...); err != nil { // entries were checked; log, never stop
		s.o.log.Error().Err(err).Int("changes", len(batch)).Msg("catalog batch rejected")
		return
	}
	snap := s.catalog.Snapshot()
	s.m.reindex.Observe(time.Since(start).Seconds())
	s.m.tools.Set(float64(snap.Len()))
	s.m.version.Set(float64(snap.Version()))
	s.o.log.Debug().Int("changes", len(batch)).Int("tools", snap.Len()).Uint64("version", snap.Version()).
		Dur("took", time.Since(start)).Msg("catalog re-indexed")
}

// warmLoop embeds new tools after each change, one warm-up at a time.
func (s *Service) warmLoop(ctx context.Context, due <-chan struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-due:
			if err := s.o.warm(ctx, s.catalog.Snapshot()); err != nil && ctx.Err() == nil {
				s.o.log.Warn().Err(err).Msg("embedding warm-up failed; picks embed what they need")
			}
		}
	}
}
