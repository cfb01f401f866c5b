package clustertest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"github.com/synadia-io/orbit.go/jetstreamext"

	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// BenchmarkJournalLayout measures the floor a one-tool-step run has under its
// guarantees in the layouts of the durable record below: only the writes the guarantees
// chain, with no planner and no executor code (a bare worker answers each call), against
// a raw call through the same worker, in a new random order each round:
//
//   - raw: the call stored on a work-queue stream, the worker's result stored on a
//     results stream and heard by the caller;
//   - today: toolfleet's layout. The run's create beside its first step's record (the
//     journal), the call on the calls stream, its result, the final compare-and-set
//     (the journal), the done event on the events stream, heard;
//   - journal: one append per step. The create, the step's record and the call in one
//     atomic batch of the journal, the worker consuming calls from the journal, the
//     result, then the final compare-and-set and the done record in one atomic batch;
//     the run is done at its commit;
//   - journal-derived: the journal layout whose run ends with its final state alone, the
//     done event derived from it rather than written beside it;
//   - journal-mem, journal-mem-derived (one node only): the same with the journal in
//     memory, where the server stages a batch in memory as it does for a replicated
//     stream.
//
// Sub-benchmarks R1 (one node, file storage) and R3 (a 3-node cluster; the caller, which
// also plays the planner, on node 0 and the worker on node 2). Ratios are to raw in the
// same run; what each layout adds over raw is its writes and nothing else, so a layout
// whose floor is over 2x cannot give a loop within 2x of a raw call.
func BenchmarkJournalLayout(b *testing.B) {
	bin := buildNATSServer(b)
	for _, nodes := range []int{1, 3} {
		b.Run(fmt.Sprintf("R%d", nodes), func(b *testing.B) {
			benchLayouts(b, startNodes(b, bin, nodes, nil), nodes)
		})
	}
}

// runValue is a run's value of n bytes, the size toolfleet's writes of it have.
func runValue(n int) []byte {
	return fmt.Appendf(nil, `{"status":"running","pad":"%s"}`, strings.Repeat("x", n-32))
}

func benchLayouts(b *testing.B, c *cluster, replicas int) {
	ctx := context.Background()
	caller := c.connect(b, "caller", 0)
	js, err := jetstream.New(caller)
	if err != nil {
		b.Fatal(err)
	}
	waitJetStream(b, ctx, js)
	stream := func(cfg jetstream.StreamConfig) {
		cfg.Replicas = replicas
		if _, err := js.CreateStream(ctx, cfg); err != nil {
			b.Fatal(err)
		}
	}
	journal := jetstream.StreamConfig{Name: "LAYOUT_JOURNAL", Subjects: []string{"layout.j.>"}, AllowAtomicPublish: true, AllowDirect: true}
	stream(journal)
	stream(jetstream.StreamConfig{Name: "LAYOUT_CALLS", Subjects: []string{"layout.calls.>"}, Retention: jetstream.WorkQueuePolicy})
	stream(jetstream.StreamConfig{Name: "LAYOUT_RESULTS", Subjects: []string{"layout.result.>"}})
	stream(jetstream.StreamConfig{Name: "LAYOUT_EVENTS", Subjects: []string{"layout.ev.>"}})
	journals := map[string]string{"journal": "layout.j"}
	if replicas == 1 {
		mem := journal
		mem.Name, mem.Subjects, mem.Storage = "LAYOUT_JOURNAL_MEM", []string{"layout.m.>"}, jetstream.MemoryStorage
		stream(mem)
		journals["journal-mem"] = "layout.m"
	}

	// The worker answers calls from the calls stream and from each journal, on its own
	// connection to the last node, as an executor does: its result stored, then the
	// call acknowledged.
	worker := c.connect(b, "worker", len(c.nodes)-1)
	wjs, err := jetstream.New(worker)
	if err != nil {
		b.Fatal(err)
	}
	var stopped atomic.Bool
	b.Cleanup(func() { stopped.Store(true) }) // runs before the connections close
	serveCalls := func(streamName, filter string) {
		cons, err := wjs.CreateOrUpdateConsumer(ctx, streamName, jetstream.ConsumerConfig{
			Durable: "worker", FilterSubject: filter, AckPolicy: jetstream.AckExplicitPolicy})
		if err != nil {
			b.Fatal(err)
		}
		cc, err := cons.Consume(func(m jetstream.Msg) {
			id := m.Headers().Get("Call-Id")
			res := &nats.Msg{Subject: "layout.result." + id, Data: []byte(`{"status":"ok","output":3}`),
				Header: nats.Header{jetstream.MsgIDHeader: []string{"r" + id}}}
			if _, err := wjs.PublishMsg(ctx, res); err != nil {
				if !stopped.Load() { // the connection closes once the benchmark is over
					b.Error(err)
				}
				return
			}
			_ = m.Ack()
		})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(cc.Stop)
	}
	serveCalls("LAYOUT_CALLS", "layout.calls.>")
	serveCalls("LAYOUT_JOURNAL", "layout.j.*.call")
	if replicas == 1 {
		serveCalls("LAYOUT_JOURNAL_MEM", "layout.m.*.call")
	}

	results := natstest.Listen(b, caller, "layout.result.*", func(s string) string { return s[strings.LastIndexByte(s, '.')+1:] })
	dones := natstest.Listen(b, caller, "layout.ev.*.done", func(s string) string { return strings.Split(s, ".")[2] })
	expect := func(m *nats.Msg, seq uint64) *nats.Msg {
		m.Header.Set(events.HeaderExpectedLastSubjectSeq, strconv.FormatUint(seq, 10))
		return m
	}
	msg := func(subject string, data []byte) *nats.Msg {
		return &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}
	}
	call := func(subject, id string) *nats.Msg {
		m := msg(subject, []byte(`{"tool":"add","arguments":{"a":1,"b":2}}`))
		m.Header.Set("Call-Id", id)
		m.Header.Set(jetstream.MsgIDHeader, id)
		return m
	}
	created, final, record := runValue(535), runValue(946), runValue(1108)
	took := map[string][]time.Duration{}

	rawCall := func() {
		id := "c" + nuid.Next()
		heard := results.Of(id)
		t0 := time.Now()
		if _, err := js.PublishMsg(ctx, call("layout.calls."+id, id)); err != nil {
			b.Fatal(err)
		}
		natstest.Await(b, heard, "no result")
		took["raw"] = append(took["raw"], time.Since(t0))
	}
	today := func() {
		run := "w" + nuid.Next()
		id := run + "-0-0"
		heard, done := results.Of(id), dones.Of(run)
		t0 := time.Now()
		rec, err := js.PublishMsgAsync(expect(msg("layout.j."+run+".step.0", record), 0))
		if err != nil {
			b.Fatal(err)
		}
		ack, err := js.PublishMsg(ctx, expect(msg("layout.j."+run+".state", created), 0))
		if err != nil {
			b.Fatal(err)
		}
		select {
		case <-rec.Ok():
		case err := <-rec.Err():
			b.Fatal(err)
		}
		if _, err := js.PublishMsg(ctx, call("layout.calls."+id, id)); err != nil {
			b.Fatal(err)
		}
		natstest.Await(b, heard, "no result")
		if _, err := js.PublishMsg(ctx, expect(msg("layout.j."+run+".state", final), ack.Sequence)); err != nil {
			b.Fatal(err)
		}
		if _, err := js.PublishMsgAsync(msg("layout.ev."+run+".done", []byte(`{"termination":"completed"}`))); err != nil {
			b.Fatal(err)
		}
		natstest.Await(b, done, "no done")
		took["today"] = append(took["today"], time.Since(t0))
	}
	// oneAppend is the journal layout on the journal whose subjects start with prefix;
	// derived: the run's end is its final state alone (a done event derived from it, as a
	// stream's republish would), not the state and a done record in one batch.
	oneAppend := func(name, prefix string, derived bool) func() {
		return func() {
			run := "w" + nuid.Next()
			id := run + "-0-0"
			heard := results.Of(id)
			t0 := time.Now()
			ack, err := jetstreamext.PublishMsgBatch(ctx, js, []*nats.Msg{
				expect(msg(prefix+"."+run+".state", created), 0),
				expect(msg(prefix+"."+run+".step.0", record), 0),
				call(prefix+"."+run+".call", id),
			}, jetstreamext.BatchFlowControl{}) // only the commit awaited
			if err != nil {
				b.Fatal(err)
			}
			natstest.Await(b, heard, "no result")
			end := expect(msg(prefix+"."+run+".state", final), ack.Sequence-uint64(ack.BatchSize)+1)
			if derived {
				_, err = js.PublishMsg(ctx, end)
			} else {
				_, err = jetstreamext.PublishMsgBatch(ctx, js, []*nats.Msg{end,
					expect(msg(prefix+"."+run+".done", []byte(`{"termination":"completed"}`)), 0),
				}, jetstreamext.BatchFlowControl{})
			}
			if err != nil {
				b.Fatal(err)
			}
			took[name] = append(took[name], time.Since(t0))
		}
	}
	order := []func(){rawCall, today}
	for name, prefix := range journals {
		order = append(order, oneAppend(name, prefix, false), oneAppend(name+"-derived", prefix, true))
	}
	// A new order each round: the work one leaves behind (acknowledgements, a
	// work-queue stream's clean-up) falls on each of the others alike.
	for b.Loop() {
		rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, f := range order {
			f()
		}
	}
	p50 := func(d []time.Duration) time.Duration { s := slices.Clone(d); slices.Sort(s); return s[len(s)/2] }
	raw := p50(took["raw"])
	for name, d := range took {
		b.ReportMetric(float64(p50(d).Microseconds()), name+"-p50-µs")
		if name != "raw" {
			b.ReportMetric(float64(p50(d))/float64(raw), name+"/raw")
		}
	}
}
