package executor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// On three shards, a plain NATS client does what the README says and sees no shard: it
// publishes calls (CloudEvents) on toolfleet.call.<tool>, awaits each result on
// toolfleet.result.<run>.<call>, and gets one result per call. The calls spread over every
// shard, each result is stored on the shard its subject names, and a call published
// again — landing on another shard — neither runs nor is answered again.
func TestShardsAreInvisibleToCallers(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.Shards = 3
	f := natstest.StartJetStream(t, cfg)
	b := &testBundle{srv: f.Srv, nc: f.NC, js: f.JS, cfg: f.Cfg}
	b.results = collect(t, f.JS, f.Cfg)
	var runs sync.Map
	reg := tools.NewRegistry()
	must(t, reg.AddFunc(tools.Definition{Name: "once", Parameters: echoSchema, Safe: true},
		func(ctx context.Context, args json.RawMessage) (any, error) {
			info, _ := tools.CallInfoFrom(ctx)
			v, _ := runs.LoadOrStore(info.CallID, new(atomic.Int32))
			v.(*atomic.Int32).Add(1)
			return "ok", nil
		}))
	b.start(t, reg)
	b.waitServed(t, "once")

	// An outside client: plain nats.go, its own connection, the documented subjects.
	nc := f.Srv.Connect()
	js, err := jetstream.New(nc)
	must(t, err)
	results, err := nc.SubscribeSync("toolfleet.result.outside.*")
	must(t, err)
	const calls = 60
	for i := range calls {
		m, err := events.NewCall(events.CallOptions{Source: "/outside", ID: fmt.Sprintf("c%d", i), RunID: "outside"},
			events.Call{Tool: "once", Arguments: json.RawMessage(`{"text":"x"}`)})
		must(t, err)
		if m.Subject != "toolfleet.call.once" {
			t.Fatalf("call subject %s", m.Subject)
		}
		if _, err := js.PublishMsg(context.Background(), m); err != nil {
			t.Fatalf("publish call %d: %v", i, err)
		}
	}
	got := map[string]int{}
	for len(got) < calls {
		m, err := results.NextMsg(15 * time.Second)
		if err != nil {
			t.Fatalf("%d of %d results arrived on toolfleet.result.outside.*: %v", len(got), calls, err)
		}
		_, res, err := events.DecodeResult(events.CoreMsg(m))
		if err != nil || res.Status != events.StatusOK {
			t.Fatalf("result on %s: %+v, %v", m.Subject, res, err)
		}
		got[res.CallID]++
	}
	// Every shard took calls (60 calls at random over 3: a shard left empty has odds of
	// about 3·(2/3)^60, never).
	for _, name := range f.Cfg.CallStreams() {
		s, err := f.JS.Stream(context.Background(), name)
		must(t, err)
		if info, err := s.Info(context.Background()); err != nil || info.State.LastSeq == 0 {
			t.Errorf("calls stream %s took no call (%v)", name, err)
		}
	}
	// Each result is on its subject's shard, stored under the documented subject.
	for i := range calls {
		subj := fmt.Sprintf("toolfleet.result.outside.c%d", i)
		s, err := f.JS.Stream(context.Background(), f.Cfg.ResultStream(subj))
		must(t, err)
		if _, err := s.GetLastMsgForSubject(context.Background(), subj); err != nil {
			t.Errorf("result %s not on %s: %v", subj, f.Cfg.ResultStream(subj), err)
		}
	}
	// Each published again (the mapping sends a copy to any shard; on its original's,
	// JetStream drops it as a duplicate, on another the executor finds the stored result
	// on the result's shard): no run and no result more.
	for i := range calls {
		b.call(t, "once", fmt.Sprintf("c%d", i), "outside", `{"text":"x"}`)
	}
	natstest.Eventually(t, 10*time.Second, "the copies to be taken", func() bool { return b.callsLeft(t) == 0 })
	time.Sleep(500 * time.Millisecond)
	for i := range calls {
		id := fmt.Sprintf("c%d", i)
		n := int32(0)
		if v, ok := runs.Load(id); ok {
			n = v.(*atomic.Int32).Load()
		}
		if n != 1 {
			t.Errorf("call %s ran %d times, want once", id, n)
		}
		if n := b.results.count(id); n != 1 {
			t.Errorf("call %s has %d stored results, want 1", id, n)
		}
	}
	if _, err := results.NextMsg(200 * time.Millisecond); err == nil {
		t.Error("a result was published again for a call answered before")
	}
}

// The executor's suites of hostile input, identity, approvals, once-per-call, dead
// letters and crash recovery pass on three shards as on one.
func TestSuitesOnShards(t *testing.T) {
	natstest.RerunOnShards(t, 3, "^(TestEveryCallIsAnswered|TestWildcardSubjectsLeaveOtherCallsAlone|TestAnsweredCallIsNotRunAgain|"+
		"TestNonIdempotentNotRunTwice|TestIdentityFromTheSubject|TestApprovals|TestMaxDeliverDeadLetters|TestNoSuchTool|"+
		"TestResultPublishOutlastsUnavailableStream|TestCancelParkedCall|TestLargeOutputs|"+
		"TestCallsWaitingForASlotAreNotRedelivered|TestStoppedReplicaHandsBackWaitingCalls)$")
}
