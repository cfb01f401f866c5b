package planner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// errRunNotFound is returned for a run id the runs bucket does not hold.
var errRunNotFound = errors.New("run not found")

// store keeps runs in the runs KV bucket. Every change is a compare-and-set on the
// entry's revision, so two replicas (or two goroutines) handling results of the same run
// never overwrite each other: the loser reloads and applies its change again.
type store struct {
	kv jetstream.KeyValue
	// finished, when set, is told of a run once, by the update that stored its end.
	finished func(*Run)
}

func (s store) create(ctx context.Context, r *Run) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode run %s: %w", r.ID, err)
	}
	if _, err := s.kv.Create(ctx, r.ID, b); err != nil {
		return fmt.Errorf("store run %s: %w", r.ID, err)
	}
	return nil
}

func (s store) get(ctx context.Context, id string) (*Run, uint64, error) {
	e, err := s.kv.Get(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, errRunNotFound
	}
	if err != nil {
		return nil, 0, fmt.Errorf("load run %s: %w", id, err)
	}
	var r Run
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		return nil, 0, fmt.Errorf("decode run %s: %w", id, err)
	}
	return &r, e.Revision(), nil
}

// update loads the run, applies change and stores the result if the run was not changed
// meanwhile; otherwise it starts over. change reports whether it changed anything; when
// it did not, nothing is written. The run as stored is returned.
func (s store) update(ctx context.Context, id string, change func(r *Run) (bool, error)) (*Run, error) {
	return s.updateFrom(ctx, id, nil, 0, change)
}

// updateFrom is update starting from a run the caller loaded at revision rev, so the
// usual case costs no second read; a run changed meanwhile is read again. loaded is
// handed over: change may modify it, and the caller uses the returned run instead.
func (s store) updateFrom(ctx context.Context, id string, loaded *Run, rev uint64, change func(r *Run) (bool, error)) (*Run, error) {
	r := loaded
	for {
		if r == nil {
			var err error
			if r, rev, err = s.get(ctx, id); err != nil {
				return nil, err
			}
		}
		wasDone := r.Status == StatusDone
		changed, err := change(r)
		if err != nil || !changed {
			return r, err
		}
		b, err := json.Marshal(r)
		if err != nil {
			return nil, fmt.Errorf("encode run %s: %w", id, err)
		}
		_, err = s.kv.Update(ctx, id, b, rev)
		if err == nil {
			if !wasDone && r.Status == StatusDone && s.finished != nil {
				s.finished(r)
			}
			return r, nil
		}
		if !isWrongRevision(err) {
			return nil, fmt.Errorf("store run %s: %w", id, err)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		r = nil // changed meanwhile: read it again
	}
}

func isWrongRevision(err error) bool { return errors.Is(err, jetstream.ErrKeyRevisionMismatch) }
