package planner

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// recoveryAckWait is the calls' ack wait in the recovery tests: far longer than their
// step lease, so that a step continued within the lease was not continued by it.
const recoveryAckWait = 30 * time.Second

// askedModel tells, on asked, the step of each ask (0 for the first), and blocks the
// asks of step block (-1: none) until their context ends; every other ask answers after
// delay.
type askedModel struct {
	provider.Model
	block int
	delay time.Duration
	asked chan int
}

func (m *askedModel) Stream(ctx context.Context, req provider.Request, onDelta func(provider.Delta)) (*provider.Response, error) {
	resp, err := m.Generate(ctx, req)
	return streamed(onDelta, resp, err)
}

func (m *askedModel) Generate(ctx context.Context, req provider.Request) (*provider.Response, error) {
	step := 0
	for _, msg := range req.Messages {
		if msg.Role == provider.RoleAssistant {
			step++
		}
	}
	m.asked <- step
	wait := time.After(m.delay)
	if step == m.block {
		wait = nil
	}
	select {
	case <-wait:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return m.Model.Generate(ctx, req)
}

// replica serves a planner replica with model and a step lease of lease on the bundle's
// streams, the calls' ack wait recoveryAckWait, until the test ends; kill closes its
// connection without draining it, as a SIGKILL would, and the replica serves nothing
// more.
func replica(t *testing.T, b *testBundle, model provider.Model, lease time.Duration) (p *Planner, kill func()) {
	t.Helper()
	cfg := b.cfg
	cfg.AckWait = tools.Duration(recoveryAckWait)
	nc := b.srv.Connect(nats.NoReconnect())
	p, err := New(b.ctx, nc, Config{Models: map[string]provider.Model{"main": model}, DefaultModel: "main",
		Events: cfg, StepLease: lease, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	serve(t, p.Run)
	natstest.Eventually(t, waitTimeout, "the replica to serve steps", p.local.serving)
	return p, nc.Close
}

const noteThenAnswer = `
name: note
steps:
  - calls: [{name: note, arguments: {n: 1}}]
  - text: noted
`

// A replica that dies while its model answers a step, the step claimed by the result
// that completed the step before (block 1) or by the lease of a run's first step
// (block 0), has the step continued by another replica within the step lease (2s),
// far from the calls' ack wait (30s): another replica's model is asked for the step,
// and the run completes with each call run once.
func TestDeadReplicasStepMovesWithinItsLease(t *testing.T) {
	const lease = 2 * time.Second
	for _, tc := range []struct {
		name  string
		block int
	}{{"claimed by a result", 1}, {"claimed by a lease", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			b := setup(t, nil)
			ran := countedNote(t, b)
			b.stopPlanner()
			ma := &askedModel{Model: scriptedModel(t, noteThenAnswer), block: tc.block, asked: make(chan int, 8)}
			a, killA := replica(t, b, ma, lease)
			run, err := a.Start(b.ctx, StartRequest{Input: "note one thing", Tools: []string{"note"}})
			if err != nil {
				t.Fatal(err)
			}
			for step := range ma.asked {
				if step == tc.block {
					break // A's model is answering the step
				}
			}
			mb := &askedModel{Model: scriptedModel(t, noteThenAnswer), block: -1, asked: make(chan int, 8)}
			replica(t, b, mb, lease)
			killA()
			killed := time.Now()
			select {
			case step := <-mb.asked:
				if step != tc.block {
					t.Fatalf("the other replica's model was asked step %d first, want %d", step, tc.block)
				}
				t.Logf("step %d continued %s after its replica died (step lease %s, ack wait %s)", step, time.Since(killed).Round(time.Millisecond), lease, recoveryAckWait)
			case <-time.After(recoveryAckWait / 2):
				t.Fatalf("step %d not continued within %s of its replica's death: it waits for the ack wait, not the step lease", tc.block, recoveryAckWait/2)
			}
			done := b.wait(t, run.ID)
			if done.Termination != TerminationCompleted || done.Answer != "noted" || len(done.Calls) != 1 {
				t.Fatalf("run ended %s (%s) with %q and %d calls", done.Termination, done.Detail, done.Answer, len(done.Calls))
			}
			if n := ran()[done.Calls[0].ID]; n != 1 {
				t.Errorf("the call ran %d times, want 1", n)
			}
		})
	}
}

// A model that answers each step in three step leases, on a replica that lives, is
// asked once per step: the step's lease (step 0) and the result that claims step 1 are
// renewed while it answers, so the other replica, serving all along, takes neither.
func TestLongAnswerIsNotTakenFromALiveReplica(t *testing.T) {
	const lease = time.Second
	b := setup(t, nil)
	ran := countedNote(t, b)
	b.stopPlanner()
	m := &askedModel{Model: scriptedModel(t, noteThenAnswer), block: -1, delay: 3 * lease, asked: make(chan int, 8)}
	a, _ := replica(t, b, m, lease)
	replica(t, b, m, lease)
	run, err := a.Start(b.ctx, StartRequest{Input: "note one thing", Tools: []string{"note"}})
	if err != nil {
		t.Fatal(err)
	}
	done := b.wait(t, run.ID)
	if done.Termination != TerminationCompleted || done.Answer != "noted" || len(done.Calls) != 1 {
		t.Fatalf("run ended %s (%s) with %q and %d calls", done.Termination, done.Detail, done.Answer, len(done.Calls))
	}
	asks := map[int]int{} // by step
	for len(m.asked) > 0 {
		asks[<-m.asked]++
	}
	if asks[0] != 1 || asks[1] != 1 || len(asks) != 2 {
		t.Errorf("the model was asked %v times by step, want once for each of steps 0 and 1", asks)
	}
	if n := ran()[done.Calls[0].ID]; n != 1 {
		t.Errorf("the call ran %d times, want 1", n)
	}
}
