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

// Follow-ups sent together to runs on a 3-node cluster with R3 streams, through two
// planners on different nodes, are all taken, as on a single server. Each goes to the
// run log as the next message record, written once (expected subject sequence 0), and
// moves the run on by a step message (one message id per step). A replicated stream
// answers a write that conflicts with one it is still storing with an error of its own
// (10164, 10158), where a single server would say "there already" or "duplicate": the
// write must wait for the other to settle. And a record written (or refused, being
// there) is read back from a replica that may not have stored it yet: a miss must be
// confirmed by the leader.
func TestConcurrentFollowUpsOnReplicatedStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node NATS cluster")
	}
	c := startCluster(t, buildNATSServer(t))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var planners []*planner.Planner
	for i := range 2 {
		script, err := provider.ParseScript([]byte("steps:\n" + strings.Repeat("  - text: noted\n", 12)))
		if err != nil {
			t.Fatal(err)
		}
		model, err := provider.NewScripted(script)
		if err != nil {
			t.Fatal(err)
		}
		p, err := planner.New(ctx, c.connect(t, fmt.Sprintf("planner-%d", i), i), planner.Config{
			Models: map[string]provider.Model{"main": model}, DefaultModel: "main", ID: fmt.Sprintf("p%d", i),
			Events: events.Config{Replicas: 3},
			Log:    zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel).With().Int("planner", i).Logger(),
		})
		if err != nil {
			t.Fatal(err)
		}
		runCtx, stop := context.WithCancel(ctx)
		served := make(chan error, 1)
		go func() { served <- p.Run(runCtx) }()
		t.Cleanup(func() { stop(); <-served })
		planners = append(planners, p)
	}

	const runs, followUps = 8, 6
	var ids []string
	for range runs {
		run, err := planners[0].Start(ctx, planner.StartRequest{Input: "hello"})
		if err != nil {
			t.Fatal(err)
		}
		if run, err = planners[1].Wait(ctx, run.ID); err != nil || run.Status != planner.StatusDone {
			t.Fatalf("first turn: %v, %v", run, err)
		}
		ids = append(ids, run.ID)
	}

	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed []string
	for _, id := range ids {
		for i := range followUps {
			wg.Go(func() {
				_, added, err := planners[i%2].Continue(ctx, id, planner.FollowUp{Input: fmt.Sprintf("follow-up %d", i)})
				if err == nil && !added {
					err = fmt.Errorf("not added")
				}
				if err != nil {
					mu.Lock()
					failed = append(failed, fmt.Sprintf("run %s, follow-up %d: %v", id, i, err))
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	if len(failed) > 0 {
		t.Fatalf("%d of %d follow-ups failed:\n%s", len(failed), runs*followUps, strings.Join(failed, "\n"))
	}

	// Every follow-up is in its run's conversation, once.
	var want []string
	for i := range followUps {
		want = append(want, fmt.Sprintf("follow-up %d", i))
	}
	for _, id := range ids {
		var got []string
		eventually(t, ctx, "every follow-up in the conversation of "+id, func() bool {
			done, err := planners[0].Wait(ctx, id)
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
		if !slices.Equal(got, want) {
			t.Fatalf("run %s: the conversation's follow-ups are %q, want %q", id, got, want)
		}
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
