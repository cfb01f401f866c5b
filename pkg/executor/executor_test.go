package executor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolfleet/toolfleet/internal/testsupport/eventstest"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/executor"
)

// A call published by a plain NATS client with hand-written ce-* headers runs, and its
// result arrives on the result subject and decodes with the CloudEvents SDK.
func TestPlainClientCall(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start(t, echoRegistry(t))

	plain, err := nats.Connect(b.srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	sub, err := plain.SubscribeSync("toolfleet.result.run-7.>")
	if err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg("toolfleet.call.echo")
	m.Header.Set("ce-specversion", "1.0")
	m.Header.Set("ce-id", "plain-1")
	m.Header.Set("ce-type", "io.toolfleet.tool.call")
	m.Header.Set("ce-source", "/nats-cli")
	m.Header.Set("ce-runid", "run-7")
	m.Data = []byte(`{"arguments":"{\"text\":\"hello\"}"}`) // arguments as a JSON string, as some providers send them
	if _, err := plain.RequestMsg(m, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	got, err := sub.NextMsg(15 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got.Subject != "toolfleet.result.run-7.plain-1" {
		t.Errorf("result subject %s", got.Subject)
	}
	ce, err := eventstest.DecodeSDK(context.Background(), got, 0)
	if err != nil {
		t.Fatalf("SDK cannot decode the result: %v", err)
	}
	if ce.Type() != events.TypeResult || ce.ID() != "plain-1" || ce.Extensions()["runid"] != "run-7" {
		t.Errorf("result attributes %v", ce)
	}
	var r events.Result
	if err := ce.DataAs(&r); err != nil {
		t.Fatal(err)
	}
	if r.Status != events.StatusOK || string(r.Output) != `{"text":"hello"}` || r.Attempts != 1 || !r.Validated ||
		r.Tool != "echo" || r.CallID != "plain-1" || r.RunID != "run-7" || r.Executor == "" {
		t.Errorf("result %+v", r)
	}
}

// Three replicas on separate connections share thousands of calls over several tools:
// every call id gets exactly one result, and each replica did some of the work.
func TestReplicasExactlyOneResultPerCall(t *testing.T) {
	t.Parallel()
	b := setup(t)
	n := 3000
	if testing.Short() {
		n = 600
	}
	toolNames := []string{"echo", "echo_b", "echo_c"}
	for i := range 3 {
		b.start(t, echoRegistry(t, "echo_b", "echo_c"), executor.WithExecutorID(fmt.Sprintf("replica-%d", i)),
			executor.WithConcurrency(16))
	}
	ids := make([]string, n)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < n; i += 4 {
				ids[i] = fmt.Sprintf("c%05d", i)
				b.call(t, toolNames[i%3], ids[i], fmt.Sprintf("r%d", i%7), fmt.Sprintf(`{"text":"%d"}`, i))
			}
		})
	}
	wg.Wait()
	res := b.results.wait(t, 60*time.Second, ids...)
	byExecutor := map[string]int{}
	for i, id := range ids {
		r := res[id]
		if r.Status != events.StatusOK || string(r.Output) != fmt.Sprintf(`{"text":"%d"}`, i) || r.Tool != toolNames[i%3] {
			t.Fatalf("call %s: %+v", id, r)
		}
		byExecutor[r.Executor]++
	}
	assertOneResultEach(t, b, ids)
	for i := range 3 {
		if byExecutor[fmt.Sprintf("replica-%d", i)] == 0 {
			t.Errorf("replica-%d answered no call: %v", i, byExecutor)
		}
	}
	if t.Failed() {
		return
	}
	// A call is acked once its result is stored, so the last acks may trail the results.
	natstest.Eventually(t, 10*time.Second, "the work queue to empty once every call was answered", func() bool {
		return b.callsLeft(t) == 0
	})
}

// assertOneResultEach checks the results streams themselves: one stored message per call
// id.
func assertOneResultEach(t *testing.T, b *testBundle, ids []string) {
	t.Helper()
	if stored := b.stored(t, b.cfg.ResultStreams()); stored != uint64(len(ids)) {
		t.Errorf("results streams hold %d results for %d calls", stored, len(ids))
	}
	for _, id := range ids {
		if c := b.results.count(id); c != 1 {
			t.Errorf("call %s has %d results", id, c)
		}
	}
}

// The server restarts (same store) in the middle of a load: every call still gets
// exactly one result.
func TestServerRestartDuringLoad(t *testing.T) {
	t.Parallel()
	b := setup(t)
	n := 1000
	if testing.Short() {
		n = 300
	}
	for i := range 2 {
		b.start(t, echoRegistry(t), executor.WithExecutorID(fmt.Sprintf("replica-%d", i)), executor.WithConcurrency(8))
	}
	ids := make([]string, n)
	for i := range n {
		ids[i] = fmt.Sprintf("c%05d", i)
		b.call(t, "echo", ids[i], "run", fmt.Sprintf(`{"text":"%d"}`, i))
		if i == n/2 {
			b.srv.Restart()
		}
	}
	res := b.results.wait(t, 90*time.Second, ids...)
	for i, id := range ids {
		if r := res[id]; r.Status != events.StatusOK || string(r.Output) != fmt.Sprintf(`{"text":"%d"}`, i) {
			t.Fatalf("call %s: %+v", id, r)
		}
	}
	assertOneResultEach(t, b, ids)
}

func TestNewRefusesBadOptions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	reg := echoRegistry(t)
	for name, opt := range map[string]executor.Option{
		"concurrency 0":     executor.WithConcurrency(0),
		"max ack pending 0": executor.WithMaxAckPending(0),
		"negative grace":    executor.WithGracePeriod(-time.Second),
		"executor id":       executor.WithExecutorID("a.b"),
		"approval timeout":  executor.WithApprovalTimeout(0),
		"no such tool":      executor.WithNoSuchToolTimeout(time.Millisecond),
		"stream config":     executor.WithStreamConfig(events.Config{Replicas: 9}),
		"default timeout":   executor.WithDefaultTimeout(0),
		"metrics":           executor.WithMetrics(nil),
	} {
		if _, err := executor.New(b.nc, reg, opt); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := executor.New(nil, reg); err == nil {
		t.Error("nil connection accepted")
	}
	if _, err := executor.New(b.nc, nil); err == nil {
		t.Error("nil registry accepted")
	}
	_ = json.Valid
}

// A start that cannot take its tool's calls fails with the reason: here another consumer
// group already owns the tool's work queue.
func TestRunReportsStartFailure(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cc, _ := b.cfg.CallConsumer("echo")
	cc.Durable = "someone-else"
	if _, err := b.js.CreateOrUpdateConsumer(context.Background(), b.cfg.CallStreams()[0], cc); err != nil {
		t.Fatal(err)
	}
	ex, err := executor.New(b.srv.Connect(), echoRegistry(t), executor.WithStreamConfig(b.cfg))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = ex.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "consumer for tool echo") {
		t.Errorf("Run = %v, want the consumer conflict", err)
	}
}
