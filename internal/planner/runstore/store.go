package runstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/internal/planner/runrec"
)

// ErrNotFound is returned for a run id the runs bucket does not hold.
var ErrNotFound = errors.New("run not found")

// Store keeps the control state of runs in the runs KV bucket: status, step, counters,
// limits, and the current step's calls without their arguments or outputs (see
// [Run.Control]). Its size does not grow with the run: the conversation and the calls'
// arguments are in the run log ([Log]), written once, and outputs in the results
// stream. Every change is a compare-and-set on the entry's revision, so two replicas (or
// two goroutines) handling results of the same run never overwrite each other: the
// loser reloads and applies its change again.
//
// A replica remembers the last revision of each running run it read or wrote, decoded,
// so the usual change costs no read and no decoding (it works on a copy: [Run.Clone]); a
// stale copy fails its compare-and-set and is read again.
// A change that would do nothing on a remembered copy is tried again on a fresh read
// before it is believed, since a message is acknowledged on that verdict.
type Store struct {
	// The fields below are set before the store is used.

	// Finished, when set, is told of a run once, by the update that stored its end.
	Finished func(*runrec.Run)
	// Charged, when set, is told of the cost an update added to a run, once, by the
	// update that stored it.
	Charged func(r *runrec.Run, cost float64)
	// Wrote, when set, is told every value about to be written; an error
	// fails the write (tests).
	Wrote func(id string, value []byte) error
	// Batches: a step's record and state are stored in one atomic batch (UpdateWith);
	// otherwise as two writes. See [BatchesStagedInMemory].
	Batches bool
	// BeforeCommit, when set, is called between the parts of a step's batch and its
	// commit; an error abandons the batch (tests: a planner killed mid-batch).
	BeforeCommit func(id string) error

	kv jetstream.KeyValue
	// js writes a step's atomic batch (putBatch).
	js jetstream.JetStream
	// nc reads runs from the bucket's leader (Get).
	nc *nats.Conn

	mu    *sync.Mutex
	cache map[string]cachedRun
}

type cachedRun struct {
	rev uint64
	run *runrec.Run // owned by the cache: handed out as copies
}

// maxCachedRuns bounds the remembered control states of one replica.
const maxCachedRuns = 10000

// NewStore returns the store of the runs bucket kv, writing batches with js and reading
// from the bucket's leader over nc.
func NewStore(kv jetstream.KeyValue, js jetstream.JetStream, nc *nats.Conn) *Store {
	return &Store{kv: kv, js: js, nc: nc, mu: &sync.Mutex{}, cache: map[string]cachedRun{}}
}

// KV is the runs bucket.
func (s *Store) KV() jetstream.KeyValue { return s.kv }

// remember keeps run (which the cache owns from now on) as the state of id at rev.
func (s *Store) remember(id string, rev uint64, run *runrec.Run) {
	if s.mu == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.cache[id]; ok && c.rev > rev {
		return
	}
	if len(s.cache) >= maxCachedRuns {
		clear(s.cache)
	}
	s.cache[id] = cachedRun{rev: rev, run: run}
}

// drop forgets the remembered state of a run (it ended, or it is stale).
func (s *Store) drop(id string) {
	if s.mu == nil {
		return
	}
	s.mu.Lock()
	delete(s.cache, id)
	s.mu.Unlock()
}

func (s *Store) cached(id string) (cachedRun, bool) {
	if s.mu == nil {
		return cachedRun{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.cache[id]
	return c, ok
}

// encode is ctl as the value of id, told to Wrote (when set) before it is written.
func (s *Store) encode(id string, ctl *runrec.Run) ([]byte, error) {
	b, err := json.Marshal(ctl)
	if err != nil {
		return nil, fmt.Errorf("encode run %s: %w", id, err)
	}
	if s.Wrote != nil {
		if err := s.Wrote(id, b); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// put stores ctl, a run's control state, as the value of id at rev (or as a new key).
func (s *Store) put(ctx context.Context, id string, ctl *runrec.Run, rev uint64, create bool) (uint64, error) {
	b, err := s.encode(id, ctl)
	if err != nil {
		return 0, err
	}
	if create {
		rev, err = s.createSettled(ctx, id, b)
	} else {
		rev, err = s.kv.Update(ctx, id, b, rev)
	}
	if err != nil {
		return 0, err
	}
	s.remember(id, rev, ctl.Clone())
	return rev, nil
}

// putBatch stores ctl as the value of id at rev together with msgs (records of the run
// log, on the journal's other subjects) in one atomic batch: all of them or none. The
// value is the batch's commit, so that only the commit is awaited (the parts go out
// without acknowledgements) and the batch's sequence is the value's revision. A refusal
// does not say which part was refused (a record already there, or a value changed
// meanwhile): the caller falls back to writing them one by one.
func (s *Store) putBatch(ctx context.Context, id string, ctl *runrec.Run, rev uint64, msgs []*nats.Msg) (uint64, error) {
	b, err := s.encode(id, ctl)
	if err != nil {
		return 0, err
	}
	batch, err := jetstreamext.NewBatchPublisher(s.js, jetstreamext.BatchFlowControl{})
	if err != nil {
		return 0, err
	}
	for _, m := range msgs {
		if err := batch.AddMsg(m); err != nil {
			return 0, err
		}
	}
	if s.BeforeCommit != nil {
		if err := s.BeforeCommit(id); err != nil {
			_ = batch.Discard()
			return 0, err
		}
	}
	commit := nats.NewMsg("$KV." + s.kv.Bucket() + "." + id)
	commit.Data = b
	ack, err := batch.CommitMsg(ctx, commit, jetstreamext.WithBatchExpectLastSequencePerSubject(rev))
	if err != nil {
		return 0, err
	}
	s.remember(id, ack.Sequence, ctl.Clone())
	return ack.Sequence, nil
}

// BatchesStagedInMemory reports whether the server stages an atomic batch of the journal
// sc in memory until its commit, which makes a batch cheaper than its parts written one
// by one: it does for a replicated stream (the commit is one proposal of the stream's
// Raft group) or one in memory. A single file-stored replica stages each batch in a
// file store of its own, created and synced at the commit (nats-server 2.15): about
// 2.5 ms a batch where the record and the compare-and-set take 0.15 ms together
// (BenchmarkLoopStep's step-batch and step-parts on 2 shared cores), so there the
// Step is written in two parts.
func BatchesStagedInMemory(sc jetstream.StreamConfig) bool {
	return sc.AllowAtomicPublish && (sc.Replicas > 1 || sc.Storage == jetstream.MemoryStorage)
}

// TryTimeout bounds one try of a run's create, or of a record written once
// (Log.settle): one sent to a server that died gets no answer, and is tried again.
const TryTimeout = 3 * time.Second

// createSettled stores value b under the new key id, riding out a server that dies and a
// bucket that elects a leader (jsutil.RetryWrite). A try refused because the key exists,
// after a try whose answer was lost, may be refused by that try's own write: it is when
// the stored value is b (a run's value holds its id, creation time and lease: no other
// start writes it).
func (s *Store) createSettled(ctx context.Context, id string, b []byte) (rev uint64, err error) {
	tries := 0
	err = jsutil.RetryWrite(ctx, TryTimeout, func(ctx context.Context) error {
		tries++
		var err error
		rev, err = s.kv.Create(ctx, id, b)
		if tries > 1 && errors.Is(err, jetstream.ErrKeyExists) && !jsutil.IsWriteInProgress(err) {
			bucket := s.kv.Bucket()
			if m, gerr := jsutil.LeaderGetLast(ctx, s.nc, "KV_"+bucket, "$KV."+bucket+"."+id); gerr == nil && m != nil && bytes.Equal(m.Data, b) {
				rev = m.Sequence
				return nil
			}
		}
		return err
	})
	return rev, err
}

// Create stores a new run and returns its revision.
func (s *Store) Create(ctx context.Context, r *runrec.Run) (uint64, error) {
	rev, err := s.put(ctx, r.ID, r.Control(), 0, true)
	if err != nil {
		return 0, fmt.Errorf("Store run %s: %w", r.ID, err)
	}
	return rev, nil
}

// Get returns the run's control state as stored, read fresh from the bucket's leader:
// a read is what a replica decides on (a change with nothing to do is believed only
// fresh, and a message is acked on it), and on a replicated bucket a direct get may be
// answered by a follower that has not stored the latest change yet.
func (s *Store) Get(ctx context.Context, id string) (*runrec.Run, uint64, error) {
	bucket := s.kv.Bucket()
	m, err := jsutil.LeaderGetLast(ctx, s.nc, "KV_"+bucket, "$KV."+bucket+"."+id)
	if err != nil {
		return nil, 0, fmt.Errorf("load run %s: %w", id, err)
	}
	// None, or a delete, purge or expiry marker.
	if m == nil || m.Header.Get("KV-Operation") != "" || m.Header.Get(jetstream.MarkerReasonHeader) != "" {
		return nil, 0, ErrNotFound
	}
	r, err := decodeRun(id, m.Data)
	if err != nil {
		return nil, 0, err
	}
	if r.Status != runrec.StatusDone {
		s.remember(id, m.Sequence, r.Clone())
	}
	return r, m.Sequence, nil
}

// GetCached returns the run's control state as this replica last saw it, or reads it.
// fresh reports whether it was read now.
func (s *Store) GetCached(ctx context.Context, id string) (r *runrec.Run, rev uint64, fresh bool, err error) {
	if c, ok := s.cached(id); ok {
		return c.run.Clone(), c.rev, false, nil
	}
	r, rev, err = s.Get(ctx, id)
	return r, rev, true, err
}

func decodeRun(id string, b []byte) (*runrec.Run, error) {
	var r runrec.Run
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("decode run %s: %w", id, err)
	}
	return &r, nil
}

// Update loads the run, applies change and stores the result if the run was not changed
// meanwhile; otherwise it starts over. change reports whether it changed anything; when
// it did not, nothing is written. The run as stored is returned.
func (s *Store) Update(ctx context.Context, id string, change func(r *runrec.Run) (bool, error)) (*runrec.Run, error) {
	r, rev, fresh, err := s.GetCached(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.UpdateFrom(ctx, id, r, rev, fresh, change)
}

// UpdateFrom is Update starting from a run the caller loaded at revision rev (fresh:
// read from the bucket just now, not remembered), so the usual case costs no second
// read; a run changed meanwhile is read again. loaded is handed over: change may modify
// it, and the caller uses the returned run instead.
func (s *Store) UpdateFrom(ctx context.Context, id string, loaded *runrec.Run, rev uint64, fresh bool, change func(r *runrec.Run) (bool, error)) (*runrec.Run, error) {
	r, _, err := s.UpdateWith(ctx, id, loaded, rev, fresh, change, nil)
	return r, err
}

// ErrBatchFailed: a step's atomic batch was refused or its outcome is unknown; nothing
// of it may be assumed stored, and the caller writes its parts one by one instead, each
// of which settles what the batch did.
var ErrBatchFailed = errors.New("the step's batch was not stored")

// UpdateWith is UpdateFrom storing, with the change, the messages with (the journal's
// records of the step) in one atomic batch ([Store.putBatch]); with none, a plain
// compare-and-set. It reports whether this call wrote. A batch is not tried again: its
// failure is ErrBatchFailed.
func (s *Store) UpdateWith(ctx context.Context, id string, loaded *runrec.Run, rev uint64, fresh bool, change func(r *runrec.Run) (bool, error), with []*nats.Msg) (*runrec.Run, bool, error) {
	r := loaded
	for {
		if r == nil {
			var err error
			if r, rev, err = s.Get(ctx, id); err != nil {
				return nil, false, err
			}
			fresh = true
		}
		wasDone, cost := r.Status == runrec.StatusDone, r.Cost
		changed, err := change(r)
		if err == nil && !changed && !fresh && !wasDone {
			r = nil // a remembered copy may be behind: believe "nothing to do" only fresh
			continue
		}
		if err != nil || !changed {
			return r, false, err
		}
		if with != nil {
			_, err = s.putBatch(ctx, id, r.Control(), rev, with)
			if err != nil {
				return nil, false, fmt.Errorf("%w: %w", ErrBatchFailed, err)
			}
		} else {
			_, err = s.put(ctx, id, r.Control(), rev, false)
		}
		if err == nil {
			if s.Charged != nil && r.Cost > cost {
				s.Charged(r, r.Cost-cost)
			}
			if !wasDone && r.Status == runrec.StatusDone {
				s.drop(id)
				if s.Finished != nil {
					s.Finished(r)
				}
			}
			return r, true, nil
		}
		if !isWrongRevision(err) {
			return nil, false, fmt.Errorf("Store run %s: %w", id, err)
		}
		if ctx.Err() != nil {
			return nil, false, ctx.Err()
		}
		r = nil // changed meanwhile: read it again
	}
}

func isWrongRevision(err error) bool { return errors.Is(err, jetstream.ErrKeyRevisionMismatch) }

// errCodeMsgTooLarge is JetStream's error code for a message over the stream's limit.
const errCodeMsgTooLarge = 10054

// IsPermanent reports whether a write failed in a way no retry fixes: the message is
// larger than the server or the stream accepts.
func IsPermanent(err error) bool {
	if errors.Is(err, nats.ErrMaxPayload) {
		return true
	}
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeMsgTooLarge
}
