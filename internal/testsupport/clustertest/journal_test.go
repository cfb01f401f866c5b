package clustertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"github.com/synadia-io/orbit.go/jetstreamext"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/internal/planner"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// A step's atomic batch (its record and the run's state, on the journal stream) cut by
// the death of the journal's leader, SIGKILLed between the batch's parts and its commit
// on an R3 cluster, is stored whole or not at all: the planner, whose commit fails or
// goes unanswered, stores the step by its parts, and the run finishes as on a single
// server, each call run once and each step recorded once. The node also leads the
// cluster's meta group, whose election drops the requests that create consumers (a
// run's wait watches the run through one): they are asked again.
func TestStepBatchRidesOutLeaderLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node NATS cluster and kills a node")
	}
	c := startNodes(t, buildNATSServer(t), 3, func(int) string { return withSystemUser })
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

	var once sync.Once
	var killedNode string
	killed := make(chan struct{})
	cut := func(string) error {
		once.Do(func() {
			defer close(killed)
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
	p, _ := startScriptedPlanner(t, ctx, c, 1, fmt.Sprintf(`steps:
  - calls: [{name: %[1]s, arguments: {n: 1}}]
  - calls: [{name: %[1]s, arguments: {n: 2}}]
  - calls: [{name: %[1]s, arguments: {n: 3}}]
  - text: three echoed
`, toolIdem), func(cfg *planner.Config) { cfg.BeforeStepCommit = cut })

	// The journal's leader moves to the planner's node, whose connection dies with it.
	for c.streamLeader(t, js, events.StreamJournal) != 1 {
		if _, err := admin.Request("$JS.API.STREAM.LEADER.STEPDOWN."+events.StreamJournal, []byte(`{"placement":{"preferred":"n1"}}`), 5*time.Second); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	c.leadMeta(t, 1)
	var run *planner.Run
	for run == nil { // the planner's catalog lists the tool once the executor announced it
		run, err = p.Start(ctx, planner.StartRequest{Input: "echo three numbers", Tools: []string{toolIdem}})
		var apiErr *planner.APIError
		if err != nil && (!errors.As(err, &apiErr) || ctx.Err() != nil) {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	select {
	case <-killed:
	case <-ctx.Done():
		t.Fatal("no step was stored by a batch")
	}
	// Wait watches the run, which needs the journal led again.
	natstest.Eventually(t, time.Minute, "a new leader of the journal", func() bool {
		actx, acancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer acancel()
		s, err := js.Stream(actx, events.StreamJournal)
		return err == nil && s.CachedInfo().Cluster != nil && s.CachedInfo().Cluster.Leader != "" && s.CachedInfo().Cluster.Leader != killedNode
	})
	done, err := p.Wait(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("killed %s, the journal's and the meta group's leader, mid-batch", killedNode)
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

// BenchmarkJournalStep measures a step's writes on a 3-node cluster with the journal at
// R3: the step's record and the state it leaves as the journal's one atomic batch
// (step-batch), and as two awaited writes, the record then the compare-and-set
// (step-parts), taking turns.
func BenchmarkJournalStep(b *testing.B) {
	c := startNodes(b, buildNATSServer(b), 3, nil)
	nc := c.connect(b, "bench", 0)
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	kv, err := jsutil.EnsurePlanner(ctx, js, events.Config{Replicas: 3})
	if err != nil {
		b.Fatal(err)
	}
	created, stepped, record := runValue(535), runValue(900), runValue(1108)
	var batched, parts []time.Duration
	step := func(batch bool) {
		id := "w" + nuid.Next()
		rev, err := kv.Create(ctx, id, created)
		if err != nil {
			b.Fatal(err)
		}
		rec := &nats.Msg{Subject: "toolfleet.runlog." + id + ".step.0", Data: record,
			Header: nats.Header{events.HeaderExpectedLastSubjectSeq: []string{"0"}}}
		t0 := time.Now()
		if batch {
			bp, err := jetstreamext.NewBatchPublisher(js, jetstreamext.BatchFlowControl{})
			if err != nil {
				b.Fatal(err)
			}
			if err := bp.AddMsg(rec); err != nil {
				b.Fatal(err)
			}
			if _, err := bp.CommitMsg(ctx, &nats.Msg{Subject: "$KV." + events.BucketRuns + "." + id, Data: stepped},
				jetstreamext.WithBatchExpectLastSequencePerSubject(rev)); err != nil {
				b.Fatal(err)
			}
			batched = append(batched, time.Since(t0))
			return
		}
		if _, err := js.PublishMsg(ctx, rec); err != nil {
			b.Fatal(err)
		}
		if _, err := kv.Update(ctx, id, stepped, rev); err != nil {
			b.Fatal(err)
		}
		parts = append(parts, time.Since(t0))
	}
	for i := 0; b.Loop(); i++ {
		step(i%2 == 0)
		step(i%2 != 0)
	}
	p50 := func(d []time.Duration) time.Duration { s := slices.Clone(d); slices.Sort(s); return s[len(s)/2] }
	batchP50, partsP50 := p50(batched), p50(parts)
	b.ReportMetric(float64(batchP50)/float64(time.Millisecond), "step-batch-p50-ms")
	b.ReportMetric(float64(partsP50)/float64(time.Millisecond), "step-parts-p50-ms")
	b.ReportMetric(float64(batchP50)/float64(partsP50), "step-batch/parts")
}

// withSystemUser is a node's configuration with a user in the system account (sys,
// password sys), for the meta group's API; clients without credentials are the
// application's, as on a cluster without accounts.
const withSystemUser = `accounts {
  SYS { users: [{user: sys, password: sys}] }
  APP { jetstream: enabled, users: [{user: app, password: app}] }
}
system_account: SYS
no_auth_user: app
`

// leadMeta makes node i the leader of the cluster's meta group (the cluster must be
// configured withSystemUser).
func (c *cluster) leadMeta(t *testing.T, i int) {
	t.Helper()
	sys, err := nats.Connect(c.urls(0), nats.UserInfo("sys", "sys"))
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	want := c.nodes[i].name
	natstest.Eventually(t, time.Minute, "the meta group led by "+want, func() bool {
		var jsz struct {
			Data struct {
				Meta struct {
					Leader string `json:"leader"`
				} `json:"meta_cluster"`
			} `json:"data"`
		}
		m, err := sys.Request("$SYS.REQ.SERVER.PING.JSZ", nil, 2*time.Second)
		if err != nil || json.Unmarshal(m.Data, &jsz) != nil {
			return false
		}
		if jsz.Data.Meta.Leader == want {
			return true
		}
		_, _ = sys.Request("$JS.API.META.LEADER.STEPDOWN", fmt.Appendf(nil, `{"placement":{"preferred":%q}}`, want), 5*time.Second)
		time.Sleep(500 * time.Millisecond)
		return false
	})
}
