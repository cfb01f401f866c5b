package clustertest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/planner"
	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
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
		p, _ := startPlanner(t, ctx, c, i)
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
		natstest.Eventually(t, time.Minute, "every follow-up in the conversation of "+id, func() bool {
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

// startPlanner starts planner i, connected to node i first, with a scripted model that
// answers text, on R3 streams; it serves until the test ends. nc is its connection.
func startPlanner(t *testing.T, ctx context.Context, c *cluster, i int) (p *planner.Planner, nc *nats.Conn) {
	t.Helper()
	return startScriptedPlanner(t, ctx, c, i, "steps:\n"+strings.Repeat("  - text: noted\n", 12), nil)
}

// startScriptedPlanner is startPlanner with a model that answers script (provider's
// script format); tweak, when set, changes the planner's configuration first.
func startScriptedPlanner(t testing.TB, ctx context.Context, c *cluster, i int, script string, tweak func(*planner.Config)) (p *planner.Planner, nc *nats.Conn) {
	t.Helper()
	parsed, err := provider.ParseScript([]byte(script))
	if err != nil {
		t.Fatal(err)
	}
	model, err := provider.NewScripted(parsed)
	if err != nil {
		t.Fatal(err)
	}
	nc = c.connect(t, fmt.Sprintf("planner-%d", i), i)
	cfg := planner.Config{
		Models: map[string]provider.Model{"main": model}, DefaultModel: "main", ID: fmt.Sprintf("p%d", i),
		Events: events.Config{Replicas: 3},
		Log:    zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel).With().Int("planner", i).Logger(),
	}
	if tweak != nil {
		tweak(&cfg)
	}
	if p, err = planner.New(ctx, nc, cfg); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- p.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-served })
	return p, nc
}

// Runs started while the node their planner is connected to is SIGKILLed, leading the
// runs bucket, ride out the reconnection and the election: each start either returns a
// run, which then finishes, or an error; and no run exists that its caller was not given
// (a start whose write was stored though its answer was lost must not leave a run that
// nobody knows of, going on by itself).
func TestStartsRideOutLeaderLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node NATS cluster and kills a node")
	}
	c := startCluster(t, buildNATSServer(t))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p, pnc := startPlanner(t, ctx, c, 0)
	admin := c.connect(t, "admin", 2)
	js, err := jetstream.New(admin)
	if err != nil {
		t.Fatal(err)
	}
	// The bucket's leader moves to the planner's node.
	for c.streamLeader(t, js, "KV_"+events.BucketRuns) != 0 {
		if _, err := admin.Request("$JS.API.STREAM.LEADER.STEPDOWN.KV_"+events.BucketRuns, []byte(`{"placement":{"preferred":"n0"}}`), 5*time.Second); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if got := pnc.ConnectedServerName(); got != "n0" {
		t.Fatalf("the planner is connected to %s, not n0", got)
	}
	leader := 0

	type started struct {
		id  string
		err error
		in  time.Duration
	}
	var out []started
	stop := make(chan struct{})
	loaded := make(chan struct{})
	go func() {
		defer close(loaded)
		for {
			select {
			case <-stop:
				return
			default:
			}
			sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
			t0 := time.Now()
			run, err := p.Start(sctx, planner.StartRequest{Input: "hello"})
			scancel()
			s := started{err: err, in: time.Since(t0)}
			if run != nil {
				s.id = run.ID
			}
			out = append(out, s)
		}
	}()
	time.Sleep(time.Second)
	n := c.nodes[leader]
	if err := n.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-n.done
	n.cmd = nil
	killed := time.Now()
	natstest.Eventually(t, time.Minute, "a new leader of the runs bucket", func() bool {
		actx, acancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer acancel()
		s, err := js.Stream(actx, "KV_"+events.BucketRuns)
		return err == nil && s.CachedInfo().Cluster != nil && s.CachedInfo().Cluster.Leader != "" && s.CachedInfo().Cluster.Leader != n.name
	})
	t.Logf("the runs bucket elected a leader %s after its leader was killed", time.Since(killed).Round(time.Millisecond))
	time.Sleep(3 * time.Second)
	c.start(t, leader)
	time.Sleep(2 * time.Second)
	close(stop)
	<-loaded

	given := map[string]bool{}
	var failed []string
	var slowest time.Duration
	for _, s := range out {
		slowest = max(slowest, s.in)
		if s.err != nil {
			failed = append(failed, fmt.Sprintf("%v (after %s)", s.err, s.in.Round(time.Millisecond)))
			continue
		}
		given[s.id] = true
	}
	t.Logf("%d starts, %d failed, the slowest took %s", len(out), len(failed), slowest.Round(time.Millisecond))
	if len(failed) > 0 {
		t.Errorf("starts failed while the bucket elected a leader:\n%s", strings.Join(failed, "\n"))
	}
	for id := range given {
		run, err := p.Wait(ctx, id)
		if err != nil || run.Status != planner.StatusDone || run.Termination != planner.TerminationCompleted {
			t.Fatalf("run %s: %v, %v", id, run, err)
		}
	}
	// No run but those given out, once every start has ended.
	kv, err := js.KeyValue(ctx, events.BucketRuns)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for k := range keys.Keys() {
		if !given[k] {
			e, _ := kv.Get(ctx, k)
			t.Errorf("run %s exists, but no start returned it: %s", k, e.Value())
		}
	}
}
