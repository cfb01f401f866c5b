package runstore

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"
	"golang.org/x/sync/errgroup"

	"github.com/toolfleet/toolfleet/internal/planner/runrec"
	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// What a fork and a diff read of a run (the planner's fork.go and diff.go): its records
// and outputs as they are, each kind in one batched direct get (one request, however
// long the run, where one per record would cost a round trip each), without filling the
// replica's cache of the run (which the loop keeps for the run's own next step).

// readAhead bounds the reads a fork or a diff has in flight at once, when a batched
// read left records to read one by one.
const readAhead = 16

// Steps returns records from..to-1 of run (each with its arguments; with the control
// state it left when withState), in order. They are read with one batched direct get
// (the last message of each of the run's step subjects); a record the answer lacks (a
// follower behind its leader, a server that does not batch) is read on its own.
func (l *Log) Steps(ctx context.Context, run string, from, to int, withState bool) ([]*StepRecord, error) {
	if to <= from {
		return nil, nil
	}
	recs := make([]*StepRecord, to-from)
	prefix := Subject(run, "step") + "."
	for m, err := range l.lastOfEach(ctx, l.log.CachedInfo().Config.Name, prefix+"*") {
		if err != nil {
			return nil, err
		}
		n, err := strconv.Atoi(strings.TrimPrefix(m.Subject, prefix))
		if err != nil || n < from || n >= to {
			continue
		}
		if recs[n-from], err = l.decodeStep(ctx, run, n, m.Data, withState); err != nil {
			return nil, err
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(readAhead)
	for i, rec := range recs {
		if rec != nil {
			continue
		}
		g.Go(func() error {
			rec, err := l.loadStep(gctx, run, from+i, withState)
			if err != nil {
				return fmt.Errorf("step %d of run %s: %w", from+i, run, err)
			}
			recs[i] = rec
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return recs, nil
}

// lastOfEach yields the last message of each subject of stream that filter matches,
// read with one batched direct get; nothing when the server does not answer one (the
// caller reads what it misses one by one). An error is one of reading what came.
func (l *Log) lastOfEach(ctx context.Context, stream, filter string) iter.Seq2[*jetstream.RawStreamMsg, error] {
	return func(yield func(*jetstream.RawStreamMsg, error) bool) {
		msgs, err := jetstreamext.GetLastMsgsFor(ctx, l.js, stream, []string{filter})
		if err != nil {
			return
		}
		for m, err := range msgs {
			if err != nil {
				return // a batch cut short: what it lacks is read one by one
			}
			if !yield(m, nil) {
				return
			}
		}
	}
}

// outputs reads the outputs of the fleet calls of run r from the results stream: each
// shard's results of the run in one batched direct get, what that lacks one by one.
func (l *Log) outputs(ctx context.Context, r *runrec.Run, calls []*runrec.CallRecord) ([]json.RawMessage, error) {
	outs := make([]json.RawMessage, len(calls))
	if len(calls) == 0 {
		return outs, nil
	}
	at := map[string]int{} // result subject → index in calls
	shards := map[int]bool{}
	for i, c := range calls {
		subj, err := events.ResultSubject(r.Tenant, r.ID, c.ID)
		if err != nil {
			return nil, err
		}
		at[subj] = i
		shards[l.shards.ResultShard(subj)] = true
	}
	filter, err := events.RunResultsSubject(r.Tenant, r.ID)
	if err != nil {
		return nil, err
	}
	found := make([]bool, len(calls))
	for shard := range shards {
		for m, err := range l.lastOfEach(ctx, l.results[shard].CachedInfo().Config.Name, filter) {
			if err != nil {
				return nil, err
			}
			i, ok := at[m.Subject]
			if !ok {
				continue
			}
			_, res, err := events.DecodeResult(rawMsg{m})
			if err != nil {
				return nil, fmt.Errorf("decode result of call %s: %w", calls[i].ID, err)
			}
			if err := l.Resolve(ctx, &res); err != nil {
				return nil, err
			}
			outs[i], found[i] = res.Output, true
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(readAhead)
	for i, c := range calls {
		if found[i] {
			continue
		}
		g.Go(func() error {
			out, err := l.Output(gctx, r.Tenant, r.ID, c)
			outs[i] = out
			return err
		})
	}
	return outs, g.Wait()
}

// ConversationAt returns the conversation the model of run r (its control state) was
// asked with at step k, as the model saw it (resume edits applied): the input, steps
// 0..k-1 with their calls' results, and the messages added before step k. Every call of
// steps before k must have ended (the caller checks: see [ForkableAt]). Outputs are
// read from the results stream as the run's own conversation reads them: reused as
// they were, never run again.
func (l *Log) ConversationAt(ctx context.Context, r *runrec.Run, k int) ([]provider.Message, error) {
	if r.Status == runrec.StatusDone {
		defer l.Forget(r.ID) // nothing to cache for a run that ended
	}
	in, err := l.Input(ctx, r.ID)
	if err != nil {
		return nil, fmt.Errorf("input of run %s: %w", r.ID, err)
	}
	// Record k, when there is one, says how step k-1's calls ended and what step k saw.
	recs, err := l.Steps(ctx, r.ID, 0, min(k+1, r.Recorded), false)
	if err != nil {
		return nil, err
	}
	h := &history{recs: recs[:min(k, len(recs))], final: map[string]*runrec.CallRecord{}}
	for _, rec := range recs {
		for _, c := range rec.Closed {
			h.final[c.ID] = c
		}
	}
	for _, c := range r.Calls {
		h.final[c.ID] = c
	}
	steps := make([][]*runrec.CallRecord, len(h.recs))
	var fleet []*runrec.CallRecord // the calls whose outputs are in the results stream
	for i, rec := range h.recs {
		calls, done := h.calls(rec)
		if !done {
			return nil, fmt.Errorf("run %s: step %d has calls without results", r.ID, rec.Step)
		}
		steps[i] = calls
		for _, c := range calls {
			if !c.Local && c.Output == nil {
				fleet = append(fleet, c)
			}
		}
	}
	outs, err := l.outputs(ctx, r, fleet)
	if err != nil {
		return nil, err
	}
	for i, c := range fleet {
		c.Output = outs[i] // the copies h.calls made
	}
	msgs, seen := in, 0
	for i, rec := range h.recs {
		if msgs, seen, err = l.ModelInjected(ctx, r.ID, msgs, seen, rec.Seen); err != nil {
			return nil, err
		}
		m, err := l.stepMessages(ctx, r, rec, steps[i])
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, m...)
	}
	upTo := r.Injected // the next step sees every message added so far
	switch {
	case k < len(recs):
		upTo = recs[k].Seen
	case r.AnswerUnrecorded() && k == r.Step:
		upTo = r.Seen
	}
	msgs, _, err = l.ModelInjected(ctx, r.ID, msgs, seen, upTo)
	return slices.Clip(msgs), err
}

// ForkableAt says why step k of the run r (its control state) cannot be taken again
// from its recorded conversation: k is not one of its steps (a number past the steps
// recorded or answered), or the calls of the step before it are still under way. nil:
// it can.
func ForkableAt(r *runrec.Run, k int) (outOfRange bool, err error) {
	last := r.Recorded // the step after the last recorded one: asked, or to be asked
	if k < 0 || k > last {
		return true, fmt.Errorf("fromStep must be a step of run %s, 0 to %d, got %d", r.ID, last, k)
	}
	if k == r.Recorded {
		for _, c := range r.Calls {
			if c.Step == k-1 && !c.Done() {
				return false, fmt.Errorf("step %d of run %s has calls without results (%s): fork it from step %d or earlier, or once they have ended", k-1, r.ID, c.ID, k-1)
			}
		}
	}
	return false, nil
}
