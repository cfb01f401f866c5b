package planner

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"strconv"
	"sync"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/planner/runstore"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

const twoStepScript = `
name: two
steps:
  - calls: [{name: note, arguments: {n: 1}}]
  - calls: [{name: note, arguments: {n: 2}}]
  - text: both noted
`

// countedNote serves the tool note, counting the runs of each call id.
func countedNote(t *testing.T, b *testBundle) (ran func() map[string]int) {
	t.Helper()
	var mu sync.Mutex
	counts := map[string]int{}
	startExecutor(t, b, tools.Definition{Type: "function", Name: "note", Safe: true,
		Parameters: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)},
		func(ctx context.Context, args json.RawMessage) (any, error) {
			info, _ := tools.CallInfoFrom(ctx)
			mu.Lock()
			counts[info.CallID]++
			mu.Unlock()
			return map[string]string{"seen": string(args)}, nil
		})
	return func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(counts)
	}
}

// A planner killed between the parts of a step's batch and its commit leaves nothing of
// the step stored: neither its record nor its state (the run is still at the step, with
// no calls), and none of its calls went out. Another planner then takes the step and
// finishes the run, each call run once.
func TestPlannerKilledMidBatch(t *testing.T) {
	b := setup(t, nil)
	ran := countedNote(t, b)
	kv, err := b.js.KeyValue(b.ctx, events.BucketRuns)
	if err != nil {
		t.Fatal(err)
	}
	killed := make(chan struct{})
	var once sync.Once
	var before uint64 // the run's revision when the batch was cut
	pa, stopA := servePlanner(t, b, scriptedModel(t, twoStepScript))
	pa.runs.Batches = true // on a single file-stored server too
	pa.runs.BeforeCommit = func(id string) error {
		once.Do(func() {
			if e, err := kv.Get(b.ctx, id); err == nil {
				before = e.Revision()
			}
			pa.nc.Close()
			close(killed)
		})
		return errors.New("the planner was killed mid-batch")
	}
	run, err := pa.Start(b.ctx, StartRequest{Input: "note two things", Tools: []string{"note"}})
	if err != nil {
		t.Fatal(err)
	}
	<-killed
	stopA()

	// What the batch would have stored is not there: the run's state is as it was, and
	// the step it recorded (its steps recorded so far count from 0) has no record.
	e, err := kv.Get(b.ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	var stored Run
	if err := json.Unmarshal(e.Value(), &stored); err != nil {
		t.Fatal(err)
	}
	if e.Revision() != before || stored.Status != StatusRunning {
		t.Fatalf("after the kill the run is %s at revision %d, was at %d: part of the batch was stored", stored.Status, e.Revision(), before)
	}
	journal, err := b.js.Stream(b.ctx, events.StreamJournal)
	if err != nil {
		t.Fatal(err)
	}
	cut := stored.Recorded
	record := runstore.Subject(run.ID, "step", strconv.Itoa(cut))
	if _, err := journal.GetLastMsgForSubject(b.ctx, record); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Fatalf("after the kill %s: %v, want no record", record, err)
	}
	if n := ran()[callID(run.ID, cut, 0)]; n != 0 {
		t.Fatalf("the call of step %d, cut mid-batch, ran %d times", cut, n)
	}
	t.Logf("cut the batch of step %d", cut)

	servePlanner(t, b, scriptedModel(t, twoStepScript))
	done := b.wait(t, run.ID)
	if done.Termination != TerminationCompleted || done.Answer != "both noted" {
		t.Fatalf("run ended %s (%s) with %q", done.Termination, done.Detail, done.Answer)
	}
	if len(done.Calls) != 2 {
		t.Fatalf("%d calls recorded, want 2", len(done.Calls))
	}
	counts := ran()
	for _, c := range done.Calls {
		if c.Status != "ok" || counts[c.ID] != 1 {
			t.Errorf("call %s: status %s, ran %d times", c.ID, c.Status, counts[c.ID])
		}
	}
	if len(counts) != 2 {
		t.Errorf("%d distinct calls ran, want 2: %v", len(counts), counts)
	}
}
