package planner

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/planner/runrec"
	"github.com/toolfleet/toolfleet/internal/planner/runstore"
	"github.com/toolfleet/toolfleet/internal/tick"
)

// Local steps: a step is taken on the replica that made it due, without a hop through
// the plan stream, when that replica holds something that makes the step durable:
//
//   - the result that completed the step before: the replica keeps the result's message
//     unacknowledged while it takes the next step, and stores the result and the step in
//     one compare-and-set. Until then the result is not part of the run, so if the
//     replica dies the result is redelivered (after Config.StepLease, the ack wait of
//     the planner's consumers) to another replica, which records it and takes the step:
//     the message is the step's durable request, exactly as a plan message is.
//   - a lease in the run's control state, for step 0 of a run this replica started (no
//     message asked for it: an API call did): the create that makes the run exist names
//     this replica and a time until which the step is its own (renewed while the step
//     is taken). Every replica follows the runs bucket (watchRuns); a lease that runs
//     out while its step is still not taken makes the sweepers publish the step's plan
//     message (one message: its id is the step's), and whichever replica takes it
//     continues the run. The step's own compare-and-set removes the lease.
//
// Either way a step is taken at least once whatever replica dies, and at most one
// answer of the model is part of the run: the step record is written once (the first
// writer wins) and the compare-and-set applies the recorded one (see takeStep). A step
// that fails here goes to the plan stream (handOff), like a plan message that is
// negatively acknowledged.
//
// How fast a dead replica's steps move, and what it costs. A claim, message or lease,
// lasts Config.StepLease (3s) from the last sign of life of the replica holding it,
// and the replica renews it every third of that for as long as it handles the message
// or takes the step (Run's keepAlive, holdLease), whatever the phase: the model's
// answer, a hook, a budget's wait, a slow write. So a step, result or approval
// request held by a replica that dies (its connection closed, as by SIGKILL) is
// redelivered to another replica between 2/3 StepLease and StepLease after the death,
// and a leased step is published by the sweepers within StepLease plus their tick
// (250ms) and the clocks' skew; a live replica's claim, renewed, is never taken
// however long its model answers. Neither waits for events.Config.AckWait (30s), which
// is the calls' and executors' own. A renewal costs, per claim held longer than
// StepLease/3, one in-progress ack a second for a message (a publish without reply),
// and for a lease one compare-and-set write of the run's small control state a second,
// which every replica's watch of the runs bucket receives; a step over before its first
// renewal pays a timer. A renewal during a step's model call makes the step's atomic
// batch find its run changed, so such a step is written in two parts (runstore), one
// write more once per leased step.
//
// A step's model is asked twice only when the replica asking it lost its claim before
// recording the answer: it died while the model answered (each such death costs one
// more answer for each step it was asking), or no sign of its life reached the server
// for StepLease (a connection cut, a process stalled, for longer than 2/3 of it), after
// which another replica takes the step while it still runs. Either way the record
// written first is the step's answer, and the compare-and-set lets one continuation
// through (TestDeadReplicasStepMovesWithinItsLease, TestLongAnswerIsNotTakenFromALiveReplica).
// Presence of replicas (a key with a short TTL) would end a dead replica's leases no
// sooner than that TTL, which is what a short lease is, and cannot end its message
// claims at all: JetStream redelivers a message only when its ack wait runs out.

// claim is what makes the step a replica takes its own while it takes it, and tells
// whether an earlier attempt may have recorded the step. Whoever took the claim holds
// it for the whole step: Run keeps a message alive while it is handled, takeLeased and
// takeFirstStep renew a lease.
type claim interface {
	// retried reports whether this is not the first attempt at the step.
	retried() bool
}

// msgClaim is a step asked for by a message: a plan message, or the result that
// completed the step before.
type msgClaim struct{ m jetstream.Msg }

func (c msgClaim) retried() bool {
	meta, err := c.m.Metadata()
	return err == nil && meta.NumDelivered > 1
}

// leaseClaim is step Step of run, leased to this replica in its control state.
type leaseClaim struct {
	p    *Planner
	run  string
	step int
}

func (leaseClaim) retried() bool { return false }

// holdLease renews the lease of step of run every third of its duration until stopped
// (stop returns once a renewal in progress has).
func (p *Planner) holdLease(run string, step int) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background()) // ends a renewal in progress at stop
	stopRepeat := tick.Repeat(p.leaseDuration()/3, func() {
		if err := p.renewLease(ctx, run, step); err != nil && ctx.Err() == nil {
			p.log.Warn().Err(err).Str("run_id", run).Int("step", step).Msg("renewing a step's lease failed; another replica may take the step when it runs out")
		}
	})
	return func() { cancel(); stopRepeat() }
}

// keepAlive sends in-progress acks for m every third of the step lease until stop is
// called (stop returns once the last has gone), so a message handled for long (a
// model's answer, a hook, a slow write) is not redelivered to another replica. A
// message handled before the first beat costs only a timer.
func (p *Planner) keepAlive(m jetstream.Msg) (stop func()) {
	return tick.Repeat(p.leaseDuration()/3, func() { _ = m.InProgress() })
}

// leaseDuration is how long a step claimed by a replica waits, after the replica's last
// sign of life, before another takes it: the lease of a leased step, and the ack wait
// of a message.
func (p *Planner) leaseDuration() time.Duration { return p.cfg.StepLease }

// newLease leases step of a run to this replica from now.
func (p *Planner) newLease(step int) *runrec.StepLease {
	return &runrec.StepLease{Owner: p.replica, Step: step, Until: p.cfg.Now().Add(p.leaseDuration())}
}

// renewLease moves the end of this replica's lease on step of run to a lease from now.
// A run not stored yet (a first step taken while its run is created) has nothing to
// renew: its create holds a lease from its start.
func (p *Planner) renewLease(ctx context.Context, run string, step int) error {
	_, err := p.runs.Update(ctx, run, func(r *Run) (bool, error) {
		if r.Lease == nil || r.Lease.Owner != p.replica || r.Lease.Step != step || r.Status != StatusRunning {
			return false, nil
		}
		r.Lease.Until = p.cfg.Now().Add(p.leaseDuration())
		return true, nil
	})
	if errors.Is(err, runstore.ErrNotFound) {
		return nil
	}
	return err
}

// stepBase is the control state a step is taken from: the run as stored at revision
// rev (fresh: read just now, not remembered), and pre, a change not stored yet that
// the step's compare-and-set stores with it (the result that completed the step
// before), applied to a copy in run. Without pre, run is stored. created is set for a
// run's first step taken while the run is being stored (firststep.go): stored is the
// state being created, and rev is known once it is.
type stepBase struct {
	stored  *Run
	rev     uint64
	fresh   bool
	pre     func(*Run) (bool, error)
	run     *Run
	created *createGate
}

// awaitCreate waits, for a first step taken while its run is being stored, until the
// run is stored: nothing of the step is written to the run or sent before.
func (b *stepBase) awaitCreate(ctx context.Context) error {
	if b.created == nil {
		return nil
	}
	rev, err := b.created.wait(ctx)
	if err != nil {
		return err
	}
	b.rev, b.created = rev, nil
	return nil
}

// createdNow reports whether the step's run is stored, without waiting: a first step
// whose run is still being created writes its record at once, beside the create,
// rather than in one batch with its state after it.
func (b *stepBase) createdNow() bool {
	if b.created == nil {
		return true
	}
	select {
	case <-b.created.done:
		return true
	default:
		return false
	}
}

// update stores change of the step's run (with pre) by compare-and-set, and with it the
// end of the step's lease.
func (b stepBase) update(ctx context.Context, p *Planner, step int, change func(*Run) (bool, error)) (*Run, error) {
	r, _, err := b.updateWith(ctx, p, step, change, nil)
	return r, err
}

// updateWith is update storing the messages with (the step's record) in one atomic
// batch with the change ([runstore.Store.UpdateWith]); it reports whether it wrote.
func (b stepBase) updateWith(ctx context.Context, p *Planner, step int, change func(*Run) (bool, error), with []*nats.Msg) (*Run, bool, error) {
	if err := b.awaitCreate(ctx); err != nil {
		return nil, false, err
	}
	return p.runs.UpdateWith(ctx, b.run.ID, b.stored, b.rev, b.fresh, func(r *Run) (bool, error) {
		changed := false
		if b.pre != nil {
			var err error
			if changed, err = b.pre(r); err != nil {
				return false, err
			}
		}
		ch, err := change(r)
		if err != nil {
			return false, err
		}
		if ch && r.Lease != nil && r.Lease.Step <= step {
			r.Lease = nil
		}
		return changed || ch, nil
	}, with)
}

// localSteps runs the steps this replica takes itself while Run serves: Run waits for
// them when it returns.
type localSteps struct {
	mu   sync.Mutex
	ctx  context.Context // Run's; nil when not serving
	wg   sync.WaitGroup
	runs sync.Map // run id → struct{}: runs whose leased step is being taken here
}

// open starts serving local steps with ctx; close stops it and waits for those running.
func (l *localSteps) open(ctx context.Context) {
	l.mu.Lock()
	l.ctx = ctx
	l.mu.Unlock()
}

func (l *localSteps) close() {
	l.mu.Lock()
	l.ctx = nil
	l.mu.Unlock()
	l.wg.Wait()
}

func (l *localSteps) serving() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ctx != nil && l.ctx.Err() == nil
}

// goStep runs fn in the background under Run's context; false when Run does not serve.
func (l *localSteps) goStep(fn func(ctx context.Context)) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx == nil || l.ctx.Err() != nil {
		return false
	}
	ctx := l.ctx
	l.wg.Go(func() { fn(ctx) })
	return true
}

// takeLeased takes step 0 of the run this replica started and created with its lease,
// in the background; false when this replica does not serve steps (the run's step then
// goes to the plan stream).
func (p *Planner) takeLeased(run string, step int) bool {
	return p.local.goStep(func(ctx context.Context) {
		p.local.runs.Store(run, struct{}{})
		release := p.holdLease(run, step)
		err := p.takeStep(ctx, leaseClaim{p: p, run: run, step: step}, run, step)
		release()
		p.local.runs.Delete(run)
		if err != nil {
			if ctx.Err() == nil {
				p.log.Error().Err(err).Str("run_id", run).Int("step", step).Msg("step failed; it goes to the plan stream to be retried")
			}
			p.handOff(context.WithoutCancel(ctx), run, step)
		}
	})
}

// handOff gives a leased step this replica could not take (it failed, or the replica
// stops) to the plan stream: the lease is ended, keeping its owner as a sign that the
// step may be recorded already, and the step's plan message published. Should either
// fail, the lease runs out and the sweepers publish the message.
func (p *Planner) handOff(ctx context.Context, run string, step int) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	r, err := p.runs.Update(ctx, run, func(r *Run) (bool, error) {
		if r.Lease == nil || r.Lease.Owner != p.replica || r.Lease.Step != step {
			return false, nil
		}
		r.Lease.Until = p.cfg.Now()
		return true, nil
	})
	if err == nil && (r.Status != StatusRunning || r.Step != step) {
		return
	}
	turn := 0
	if r != nil {
		turn = r.Turn
	}
	if perr := p.publishAdvanceTurn(ctx, run, step, turn); perr != nil {
		p.log.Warn().Err(errors.Join(err, perr)).Str("run_id", run).Int("step", step).Msg("handing a step to the plan stream failed; it is taken when its lease runs out")
	}
}

// errLeased: a plan message asked for a step leased to a replica that is taking it; the
// message waits until the lease runs out (the step is then taken, or taken over).
type errLeased struct{ wait time.Duration }

func (e *errLeased) Error() string {
	return fmt.Sprintf("the step is leased to a replica taking it for another %s", e.wait)
}

// leaseHeld reports, for a plan message asking for step of run, whether another
// attempt at the step holds a live lease on it.
func (p *Planner) leaseHeld(run *Run, step int) error {
	now := p.cfg.Now()
	l := run.Lease
	if !l.Live(step, now) {
		return nil
	}
	if l.Owner == p.replica {
		if _, taking := p.local.runs.Load(run.ID); !taking {
			return nil // this replica's attempt ended: take it
		}
	}
	return &errLeased{wait: l.Until.Sub(now) + 100*time.Millisecond}
}

// leaseDue is a lease the sweeper follows: when it runs out, the step's plan message is
// published.
type leaseDue struct {
	step, turn int
	until      time.Time
}

// sweepLeases publishes the plan message of every leased step whose lease ran out.
func (p *Planner) sweepLeases(ctx context.Context, now time.Time) {
	var due []string
	var steps []leaseDue
	p.mu.Lock()
	for id, l := range p.leases {
		if !now.Before(l.until) {
			due, steps = append(due, id), append(steps, l)
			delete(p.leases, id)
		}
	}
	p.mu.Unlock()
	for i, id := range due {
		if err := p.publishAdvanceTurn(ctx, id, steps[i].step, steps[i].turn); err != nil {
			p.log.Warn().Err(err).Str("run_id", id).Msg("publishing the step of a run whose lease ran out; trying again")
			p.mu.Lock()
			if _, ok := p.leases[id]; !ok {
				p.leases[id] = steps[i]
			}
			p.mu.Unlock()
		}
	}
}
