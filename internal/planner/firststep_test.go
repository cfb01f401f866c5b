package planner

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/planner/runstore"
	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
)

// hookedModel runs before ahead of each answer and after once its first answer is
// streamed.
type hookedModel struct {
	provider.Model
	before func()
	after  func()
	once   sync.Once
}

func (m *hookedModel) Stream(ctx context.Context, req provider.Request, onDelta func(provider.Delta)) (*provider.Response, error) {
	if m.before != nil {
		m.before()
	}
	resp, err := m.Model.Stream(ctx, req, onDelta)
	if m.after != nil {
		m.once.Do(m.after)
	}
	return resp, err
}

// servePlanner serves a planner for model on the bundle's streams; stop returns once its
// Run has, with every step it was taking.
func servePlanner(t *testing.T, b *testBundle, model provider.Model) (p *Planner, stop func()) {
	t.Helper()
	p, err := New(b.ctx, b.srv.Connect(), Config{Models: map[string]provider.Model{"main": model},
		DefaultModel: "main", Events: b.cfg, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	b.stopPlanner()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	natstest.Eventually(t, waitTimeout, "the planner to serve steps", p.local.serving)
	b.p = p
	return p, stop
}

const firstStepScript = `
name: first
steps:
  - calls: [{name: add, arguments: {a: 1, b: 2}}]
  - text: three
`

// A new run's first step is taken while the run is being stored, and its events wait
// for the run's: here the create is held until the model has answered step 0, and the
// run's events still begin with started, in the order they happened, each with its time.
func TestFirstStepTakenWhileTheRunIsStored(t *testing.T) {
	b := setup(t, nil)
	answered := make(chan struct{})
	p, _ := servePlanner(t, b, &hookedModel{Model: scriptedModel(t, firstStepScript), after: func() { close(answered) }})
	var creates sync.Once
	p.runs.Wrote = func(string, []byte) error {
		var err error
		creates.Do(func() { // the run's create: the first write
			select {
			case <-answered:
			case <-time.After(10 * time.Second):
				err = errors.New("the model was not asked for the first step while the run was being stored")
			}
		})
		return err
	}
	run := b.run(t, StartRequest{Input: "1+2", Tools: []string{"add"}})
	if run.Termination != TerminationCompleted || run.Answer != "three" || len(run.Calls) != 1 || run.Calls[0].Status != "ok" {
		t.Fatalf("run ended %s (%s), answer %q, calls %+v", run.Termination, run.Detail, run.Answer, run.Calls)
	}
	evs := followEvents(t, p, run.ID)
	var order []string
	for _, e := range evs {
		checkEvent(t, run.ID, e)
		if e.What != "tool_started" { // the executor's: it comes when it comes
			order = append(order, e.What)
		}
	}
	want := []string{"started", "step_started", "tool_call_started", "model_answered", "tool_called", "tool_result",
		"step_started", "text_delta", "model_answered", "done"}
	if !slices.Equal(order, want) {
		t.Fatalf("events %v, want %v", order, want)
	}
}

// A run that cannot be stored announces nothing and sends nothing, though its first
// step was being taken: the step's events are dropped, its call never goes out, and the
// step is not handed to another replica.
func TestFirstStepOfARunNotStoredSendsNothing(t *testing.T) {
	b := setup(t, nil)
	release := make(chan struct{})
	p, stop := servePlanner(t, b, &hookedModel{Model: scriptedModel(t, firstStepScript), before: func() { <-release }})
	p.runs.Wrote = func(string, []byte) error { return errors.New("injected: the bucket refuses the write") }
	id := newRunID()
	seen, err := b.nc.SubscribeSync("toolfleet.>")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.start(b.ctx, StartRequest{Input: "1+2", Tools: []string{"add"}}, id, nil, ""); err == nil {
		t.Fatal("the run was started though it could not be stored")
	}
	close(release) // the model answers now, after the create failed
	stop()         // returns once the step being taken has ended
	// Whatever the planner published has reached the server, and from it this subscriber.
	onlyRunLogOfUnstoredRun(t, p, b, seen, id)
	if _, _, err := p.runs.Get(b.ctx, id); !errors.Is(err, runstore.ErrNotFound) {
		t.Fatalf("the run's state: %v, want none", err)
	}
}

// A first step whose answer is recorded, announced and its call encoded before the
// run's create fails sends none of it: the step's events were held for the run's
// started event and are dropped, and its call waited for the create.
func TestFirstStepReadyBeforeTheCreateFailsSendsNothing(t *testing.T) {
	b := setup(t, nil)
	p, stop := servePlanner(t, b, scriptedModel(t, firstStepScript))
	id := newRunID()
	p.runs.Wrote = func(string, []byte) error {
		// The create fails once the step waits for it, all else done.
		natstest.Eventually(t, waitTimeout, "the first step to wait for the create", func() bool {
			return goroutineWaitsIn("(*createGate).wait")
		})
		return errors.New("injected: the bucket refuses the write")
	}
	seen, err := b.nc.SubscribeSync("toolfleet.>")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.start(b.ctx, StartRequest{Input: "1+2", Tools: []string{"add"}}, id, nil, ""); err == nil {
		t.Fatal("the run was started though it could not be stored")
	}
	stop() // returns once the step being taken has ended
	onlyRunLogOfUnstoredRun(t, p, b, seen, id)
}

// goroutineWaitsIn reports whether a goroutine's stack is in fn now.
func goroutineWaitsIn(fn string) bool {
	buf := make([]byte, 1<<20)
	return strings.Contains(string(buf[:runtime.Stack(buf, true)]), fn)
}

// A planner stopped while its run's first step, answered, announced and encoded, waits
// for the create leaves the step to another replica once the run is stored: the run
// completes there, its one call made once, its events each once and in order.
func TestFirstStepStoppedWhileWaitingForTheCreate(t *testing.T) {
	b := setup(t, nil)
	first, stopFirst := servePlanner(t, b, scriptedModel(t, firstStepScript))
	var creates sync.Once
	release := make(chan struct{})
	first.runs.Wrote = func(string, []byte) error {
		creates.Do(func() { // the run's create: the first write
			natstest.Eventually(t, waitTimeout, "the first step to wait for the create", func() bool {
				return goroutineWaitsIn("(*createGate).wait")
			})
			go stopFirst() // returns once the step, handed off, has ended
			natstest.Eventually(t, waitTimeout, "the planner to stop serving", func() bool { return !first.local.serving() })
			close(release)
		})
		return nil
	}
	id := newRunID()
	if _, err := first.start(b.ctx, StartRequest{Input: "1+2", Tools: []string{"add"}}, id, nil, ""); err != nil {
		t.Fatal(err)
	}
	<-release
	stopFirst()
	second, _ := servePlanner(t, b, scriptedModel(t, firstStepScript))
	run := b.wait(t, id)
	if run.Termination != TerminationCompleted || run.Answer != "three" || len(run.Calls) != 1 || run.Calls[0].Status != "ok" || run.Calls[0].Attempts != 1 {
		t.Fatalf("run ended %s (%s), answer %q, calls %+v", run.Termination, run.Detail, run.Answer, run.Calls)
	}
	evs := followEvents(t, second, id)
	var order []string
	for _, e := range evs {
		checkEvent(t, id, e)
		if e.What != "tool_started" {
			order = append(order, e.What)
		}
	}
	want := []string{"started", "step_started", "tool_call_started", "model_answered", "tool_called", "tool_result",
		"step_started", "text_delta", "model_answered", "done"}
	if !slices.Equal(order, want) {
		t.Fatalf("events %v, want %v", order, want)
	}
}

// onlyRunLogOfUnstoredRun fails t if anything but the run-log records of run id's input
// and first step reached seen: whatever p published has reached the server, and from it
// seen, once both connections are flushed.
func onlyRunLogOfUnstoredRun(t *testing.T, p *Planner, b *testBundle, seen *nats.Subscription, id string) {
	t.Helper()
	if err := p.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := b.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	for {
		m, err := seen.NextMsg(0)
		if err != nil {
			break
		}
		if m.Subject != "toolfleet.runlog."+id+".input" && m.Subject != "toolfleet.runlog."+id+".step.0" {
			t.Errorf("published %s for a run that was never stored", m.Subject)
		}
	}
}
