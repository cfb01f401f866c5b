package runstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"golang.org/x/sync/errgroup"

	"github.com/toolfleet/toolfleet/internal/planner/runrec"
	"github.com/toolfleet/toolfleet/internal/provider"
)

// What a fork and a diff read of a run (the planner's fork.go and diff.go): its records
// as they are, read in parallel, without filling the replica's cache of the run (which
// the loop keeps for the run's own next step) — a fork of a long run reads each record
// and output once, at once, instead of one after another.

// readAhead bounds the reads a fork or a diff has in flight at once.
const readAhead = 16

// Steps returns records from..to-1 of run (each with its arguments; with the control
// state it left when withState), in order.
func (l *Log) Steps(ctx context.Context, run string, from, to int, withState bool) ([]*StepRecord, error) {
	if to <= from {
		return nil, nil
	}
	recs := make([]*StepRecord, to-from)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(readAhead)
	for n := from; n < to; n++ {
		g.Go(func() error {
			rec, err := l.loadStep(gctx, run, n, withState)
			if err != nil {
				return fmt.Errorf("step %d of run %s: %w", n, run, err)
			}
			recs[n-from] = rec
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return recs, nil
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
	outs := make([]json.RawMessage, len(fleet))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(readAhead)
	for i, c := range fleet {
		g.Go(func() error {
			out, err := l.Output(gctx, r.Tenant, r.ID, c)
			outs[i] = out
			return err
		})
	}
	if err := g.Wait(); err != nil {
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
