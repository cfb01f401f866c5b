package pickerservice

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/pkg/pick"
)

// maxBatch bounds how many pending catalog changes are applied as one snapshot.
const maxBatch = 10_000

// watch applies catalog changes until ctx ends. The bucket's initial contents form one
// batch (the watch marks their end with a Loaded change); after that every change, with
// whatever else is already pending, forms the next.
func (s *Service) watch(ctx context.Context, changes <-chan jsutil.CatalogChange) error {
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
	for {
		select {
		case <-ctx.Done():
			return nil
		case ch, ok := <-changes:
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return errors.New("picker: catalog watch ended")
			}
			if ch.Loaded {
				loaded = true
			} else {
				batch = append(batch, s.change(ch))
			}
			if !loaded {
				continue
			}
			batch = s.drain(changes, batch)
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
func (s *Service) drain(changes <-chan jsutil.CatalogChange, batch []pick.Change) []pick.Change {
	for len(batch) < maxBatch {
		select {
		case ch, ok := <-changes:
			if !ok || ch.Loaded {
				return batch
			}
			batch = append(batch, s.change(ch))
		default:
			return batch
		}
	}
	return batch
}

// change turns a catalog change into the picker's. An entry that is not a valid
// definition withdraws its tool (the catalog's one rule, [events.CatalogEntry]); it is
// logged and counted.
func (s *Service) change(ch jsutil.CatalogChange) pick.Change {
	if ch.Err != nil {
		s.m.badEntries.Inc()
		s.o.log.Warn().Err(ch.Err).Str("tool", ch.Name).Msg("catalog entry is not a valid definition; tool withdrawn")
	}
	if ch.Removed {
		return pick.Change{Name: ch.Name}
	}
	d := ch.Definition
	return pick.Change{Name: ch.Name, Def: &d}
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
