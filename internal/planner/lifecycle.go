package planner

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/internal/tick"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// emit publishes a run lifecycle event on toolfleet.event.run.<run>.<what>[.<tenant>], for the SSE
// stream and any NATS subscriber. Its id is derived from what it reports, so a repeated
// emission (a step resumed after a crash) is dropped by JetStream.
//
// Order: the planner announces an event before it stores the change that could lead to
// later events. Everything goes out on one connection, whose messages the server
// handles in order, so an event is stored before anything it caused, across replicas
// too (another replica acts only on the stored change). Emission is otherwise best
// effort: the run's state in the runs bucket is the record; an event lost to a broken
// connection is logged, not retried.
func (p *Planner) emit(ctx context.Context, run *Run, what string, step int, call string, detail any) {
	msg, err := events.NewRunEvent(p.cfg.Source, what,
		events.RunEvent{RunID: run.ID, Tenant: run.Tenant, Step: step, CallID: call, Detail: jsonText(detail)}, p.cfg.Now())
	p.sendRunEvent(ctx, run, what, msg, err)
}

// sendRunEvent publishes msg, the run's event what (unless encoding it failed with err),
// in the run's trace; the first step of a run being stored holds it (firststep.go).
func (p *Planner) sendRunEvent(ctx context.Context, run *Run, what string, msg *nats.Msg, err error) {
	if err != nil {
		p.log.Error().Err(err).Str("run_id", run.ID).Str("event", what).Msg("run event encode")
		return
	}
	events.SetTrace(msg, run.TraceParent, run.TraceState) // the run's trace, when it is traced
	if err := p.publishEvent(ctx, msg); err != nil {
		p.log.Warn().Err(err).Str("run_id", run.ID).Str("event", what).Msg("run event not published")
	}
}

// watchRuns follows the runs bucket (w watches it) to know the deadlines and leases of
// running runs, for sweep, and to keep the run index (runindex.go), until ctx ends. A
// watch that breaks (nats.go closes one whose consumer it cannot create again, as when
// a restarting server answers "no responders") is started again from the revision after
// the last one seen: no change is missed, none is applied twice.
func (p *Planner) watchRuns(ctx context.Context, w jetstream.KeyWatcher) {
	var last uint64
	for {
		p.m.watching(watchRuns, true)
		last = p.followRuns(ctx, w, last)
		p.m.watching(watchRuns, false)
		if ctx.Err() != nil {
			return
		}
		p.log.Warn().Uint64("revision", last).Msg("the runs watch broke; watching again from the next revision")
		var opts []jetstream.WatchOpt
		if last > 0 {
			opts = append(opts, jetstream.ResumeFromRevision(last+1))
		}
		var err error
		if w, err = jsutil.Watch(ctx, p.runs.KV(), jetstream.AllKeys, opts...); err != nil {
			if ctx.Err() == nil {
				p.log.Error().Err(err).Msg("watching runs failed for good: this replica's run index and deadlines stop")
			}
			return
		}
		p.m.watchRestarted(watchRuns)
	}
}

// followRuns applies w's changes until ctx ends or w breaks, and returns the last
// revision applied (last if none).
func (p *Planner) followRuns(ctx context.Context, w jetstream.KeyWatcher, last uint64) uint64 {
	defer func() { _ = w.Stop() }()
	// A stopped watch closes its updates, which ends the loop.
	defer context.AfterFunc(ctx, func() { _ = w.Stop() })()
	for e := range w.Updates() {
		if e == nil { // the bucket's values as they were: the index is loaded
			p.index.loaded()
			continue
		}
		last = e.Revision()
		r := p.index.observe(e)
		if r == nil || r.Status != StatusRunning {
			p.forget(e.Key())
			continue
		}
		p.mu.Lock()
		if r.Deadline.IsZero() {
			delete(p.deadlines, r.ID)
		} else {
			p.deadlines[r.ID] = r.Deadline
		}
		if r.Lease == nil {
			delete(p.leases, r.ID)
		} else {
			p.leases[r.ID] = leaseDue{step: r.Lease.Step, turn: r.Turn, until: r.Lease.Until}
		}
		p.mu.Unlock()
	}
	return last
}

func (p *Planner) forget(run string) {
	p.mu.Lock()
	delete(p.deadlines, run)
	delete(p.leases, run)
	p.mu.Unlock()
}

// timeUp is the detail of a run that timed out while it waited for tool results or
// approvals: a run whose calls were parked for approval says that no approval came.
func timeUp(r *Run) string {
	detail := fmt.Sprintf("the run's time limit of %s is up", r.Limits.Timeout.D())
	w := r.Waiting()
	switch n := w.Parked(); {
	case n == 1:
		detail += " while a call waited for an approval: no approval arrived"
	case n > 1:
		detail += fmt.Sprintf(" while %d calls waited for an approval: no approval arrived", n)
	}
	return detail
}

// sweep ends runs whose wall-clock time is up while they wait for tool results or
// approvals (a run waiting for the model is ended by the model call's own deadline),
// and asks the plan stream for the steps whose lease ran out (local.go).
// Every replica sweeps; the compare-and-set on the run lets one of them win.
func (p *Planner) sweep(ctx context.Context) {
	tick.Every(ctx, 250*time.Millisecond, func(ctx context.Context) {
		now := p.cfg.Now()
		p.sweepLeases(ctx, now)
		var due []string
		p.mu.Lock()
		for id, d := range p.deadlines {
			if !now.Before(d) {
				due = append(due, id)
			}
		}
		p.mu.Unlock()
		for _, id := range due {
			run, err := p.runs.Update(ctx, id, func(r *Run) (bool, error) {
				if r.Status != StatusRunning || now.Before(r.Deadline) {
					return false, nil
				}
				r.Finish(TerminationTimeout, timeUp(r), now)
				return true, nil
			})
			if err != nil {
				p.forget(id)
				continue
			}
			if run.Status == StatusDone {
				if err := p.afterDone(ctx, run); err != nil {
					p.log.Warn().Err(err).Str("run_id", id).Msg("announcing the end of a timed-out run")
				}
			}
		}
	})
}
