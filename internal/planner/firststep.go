package planner

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go"
)

// The first step of a run, taken while the run is being stored. A replica that serves
// steps and starts a run (not a nested one) asks the model for the run's first step
// while the create that makes the run exist is on its way, and records the model's
// answer in the run log meanwhile, instead of waiting for the create first: one round
// trip less before the first calls go out. What the rules ask holds all the same:
//
//   - nothing is acknowledged before it is stored: Start returns once the run's control
//     state and input are stored, as before;
//   - nothing is announced or sent for a run that is not stored: the step's events are
//     held until the run's started event has gone out (and dropped if the run could
//     not be stored), and its calls go out, and its state is written, only once the
//     create has succeeded (stepBase.update and stepFrom wait for it);
//   - the step record written early is the one the run would have had: a new run's id
//     is new, so no other start stores another state under it, and the record is
//     first-writer-wins like any step's (a replica taking the step over after a crash
//     finds and applies it). If the create fails, the record is left unread in the run
//     log, like an input written for a run that was never created.
//
// Nested runs (their id is their parent's call's, so a repeated start finds the run
// stored) and replicas that do not serve steps store the run first, as before.

// errNotStored: the run whose first step was being taken could not be stored; the step
// is dropped with its held events.
var errNotStored = errors.New("the run could not be stored")

// createGate is the outcome of a run's create, for its first step taken meanwhile, and
// holds the step's events until the run's started event is out.
type createGate struct {
	done chan struct{}
	rev  uint64
	err  error

	mu   sync.Mutex
	open bool
	held []*nats.Msg
}

func newCreateGate() *createGate { return &createGate{done: make(chan struct{})} }

// stored reports the run stored at rev, after its started event was published: the
// held events go out, in order, and later ones at once.
func (g *createGate) stored(rev uint64, publish func(*nats.Msg)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, m := range g.held {
		publish(m)
	}
	g.held, g.open, g.rev = nil, true, rev
	close(g.done)
}

// failed reports that the run could not be stored: its held events are dropped.
func (g *createGate) failed(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.held, g.err = nil, fmt.Errorf("%w: %v", errNotStored, err)
	close(g.done)
}

// hold keeps an event of the step until the run is stored; false once it is (publish it).
func (g *createGate) hold(m *nats.Msg) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open {
		return false
	}
	if g.err == nil {
		g.held = append(g.held, m)
	}
	return true
}

// wait returns the run's revision once it is stored.
func (g *createGate) wait(ctx context.Context) (uint64, error) {
	select {
	case <-g.done:
		return g.rev, g.err
	default:
	}
	select {
	case <-g.done:
		return g.rev, g.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

type createGateKey struct{}

// publishHeld publishes an event a first step held while its run was being stored.
func (p *Planner) publishHeld(ctx context.Context, m *nats.Msg) {
	if _, err := p.win.Publish(ctx, m); err != nil {
		p.log.Warn().Err(err).Str("subject", m.Subject).Msg("run event not published")
	}
}

// publishEvent publishes a run event, or holds it when it is an event of a first step
// taken while the run is being stored (ctx carries the gate).
func (p *Planner) publishEvent(ctx context.Context, m *nats.Msg) error {
	if g, _ := ctx.Value(createGateKey{}).(*createGate); g != nil && g.hold(m) {
		return nil
	}
	_, err := p.win.Publish(ctx, m)
	return err
}

// takeFirstStep takes step 0 of run in the background while start stores it, reported
// by g; false when this replica does not serve steps. run is the step's own copy.
func (p *Planner) takeFirstStep(run *Run, g *createGate) bool {
	return p.local.goStep(func(ctx context.Context) {
		ctx = context.WithValue(ctx, createGateKey{}, g)
		p.local.runs.Store(run.ID, struct{}{})
		release := p.holdLease(run.ID, 0)
		cl := leaseClaim{p: p, run: run.ID, step: 0}
		err := p.stepFrom(ctx, cl, stepBase{stored: run, run: run, created: g}, 0)
		if errors.Is(err, errInjectedMeanwhile) {
			err = p.takeStep(ctx, cl, run.ID, 0) // asked again, with the messages added
		}
		release()
		p.local.runs.Delete(run.ID)
		if err == nil {
			return
		}
		// Start settles the gate whatever happens: a run that was not stored has no step
		// to hand off.
		if _, serr := g.wait(context.WithoutCancel(ctx)); serr != nil {
			return
		}
		if ctx.Err() == nil {
			p.log.Error().Err(err).Str("run_id", run.ID).Msg("first step failed; it goes to the plan stream to be retried")
		}
		p.handOff(context.WithoutCancel(ctx), run.ID, 0)
	})
}
