package clustertest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/planner"
	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// A step's atomic batch (its record and the run's state, on the journal stream) cut by
// the death of the journal's leader, SIGKILLed between the batch's parts and its commit
// on an R3 cluster, is stored whole or not at all: the planner, whose commit fails or
// goes unanswered, stores the step by its parts, and the run finishes as on a single
// server, each call run once and each step recorded once.
func TestStepBatchRidesOutLeaderLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node NATS cluster and kills a node")
	}
	c := startCluster(t, buildNATSServer(t))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfg := events.Config{Replicas: 3}
	runs := &runCounter{n: map[string]int{}}
	startExecutor(t, c, 2, cfg, runs)
	admin := c.connect(t, "admin", 2)
	js, err := jetstream.New(admin)
	if err != nil {
		t.Fatal(err)
	}

	script, err := provider.ParseScript([]byte(fmt.Sprintf(`steps:
  - calls: [{name: %[1]s, arguments: {n: 1}}]
  - calls: [{name: %[1]s, arguments: {n: 2}}]
  - calls: [{name: %[1]s, arguments: {n: 3}}]
  - text: three echoed
`, toolIdem)))
	if err != nil {
		t.Fatal(err)
	}
	model, err := provider.NewScripted(script)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	var killedNode string
	cut := func(string) error {
		once.Do(func() {
			// The journal's leader dies between the batch's parts and its commit.
			i := c.streamLeader(t, js, events.StreamJournal)
			n := c.nodes[i]
			killedNode = n.name
			if err := n.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Error(err)
				return
			}
			<-n.done
			n.cmd = nil
		})
		return nil
	}
	nc := c.connect(t, "planner", 1)
	p, err := planner.New(ctx, nc, planner.Config{
		Models: map[string]provider.Model{"main": model}, DefaultModel: "main", ID: "p",
		Events: cfg, BeforeStepCommit: cut,
		Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel),
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- p.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-served })

	// The journal's leader moves to the planner's node, whose connection dies with it.
	for c.streamLeader(t, js, events.StreamJournal) != 1 {
		if _, err := admin.Request("$JS.API.STREAM.LEADER.STEPDOWN."+events.StreamJournal, []byte(`{"placement":{"preferred":"n1"}}`), 5*time.Second); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	var run *planner.Run
	for run == nil { // the planner's catalog lists the tool once the executor announced it
		run, err = p.Start(ctx, planner.StartRequest{Input: "echo three numbers", Tools: []string{toolIdem}})
		var apiErr *planner.APIError
		if err != nil && (!errors.As(err, &apiErr) || ctx.Err() != nil) {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	done, err := p.Wait(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if killedNode == "" {
		t.Fatal("no step was stored by a batch")
	}
	t.Logf("killed %s, the journal's leader, mid-batch", killedNode)
	if done.Termination != planner.TerminationCompleted || done.Answer != "three echoed" {
		t.Fatalf("run ended %s (%s) with %q", done.Termination, done.Detail, done.Answer)
	}
	if len(done.Calls) != 3 {
		t.Fatalf("%d calls recorded, want 3", len(done.Calls))
	}
	ran := runs.snapshot()
	for _, call := range done.Calls {
		if call.Status != "ok" || ran[call.ID] != 1 {
			t.Errorf("call %s: status %s, ran %d times", call.ID, call.Status, ran[call.ID])
		}
	}
	if len(ran) != 3 {
		t.Errorf("%d distinct calls ran, want 3: %v", len(ran), ran)
	}
}
