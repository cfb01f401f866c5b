package clustertest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/planner"
	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// Follow-ups sent together to one run on a 3-node cluster with R3 streams are all taken,
// as on a single server. Each goes to the run log as the next message record, written
// once (expected subject sequence 0); on a replicated stream a record being stored when
// another request writes the same subject is answered "wrong last sequence" without a
// sequence (10164), not "already there" (10071): the write must wait for the first to
// settle, then take the next record, never fail the request.
func TestConcurrentFollowUpsOnReplicatedStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node NATS cluster")
	}
	c := startCluster(t, buildNATSServer(t))
	script, err := provider.ParseScript([]byte("steps:\n" + strings.Repeat("  - text: noted\n", 12)))
	if err != nil {
		t.Fatal(err)
	}
	model, err := provider.NewScripted(script)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p, err := planner.New(ctx, c.connect(t, "planner", 0), planner.Config{
		Models: map[string]provider.Model{"main": model}, DefaultModel: "main",
		Events: events.Config{Replicas: 3},
		Log:    zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel),
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- p.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-served })

	run, err := p.Start(ctx, planner.StartRequest{Input: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	if run, err = p.Wait(ctx, run.ID); err != nil || run.Status != planner.StatusDone {
		t.Fatalf("first turn: %v, %v", run, err)
	}

	const followUps = 6
	var wg sync.WaitGroup
	errs := make([]error, followUps)
	for i := range followUps {
		wg.Go(func() {
			_, added, err := p.Continue(ctx, run.ID, planner.FollowUp{Input: fmt.Sprintf("follow-up %d", i)})
			if err == nil && !added {
				err = fmt.Errorf("not added")
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("follow-up %d: %v", i, err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// Every follow-up is in the conversation, once.
	var got []string
	eventually(t, ctx, "every follow-up in the conversation", func() bool {
		done, err := p.Wait(ctx, run.ID)
		if err != nil {
			t.Fatal(err)
		}
		got = got[:0]
		for _, m := range done.Messages {
			if m.Role == provider.RoleUser && m.Text != "hello" {
				got = append(got, m.Text)
			}
		}
		return len(got) >= followUps
	})
	slices.Sort(got)
	var want []string
	for i := range followUps {
		want = append(want, fmt.Sprintf("follow-up %d", i))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("the conversation's follow-ups are %q, want %q", got, want)
	}
}

func eventually(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
