package events_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/testsupport/eventstest"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

type testBundle struct {
	srv *natstest.Server
	nc  *nats.Conn
	js  jetstream.JetStream
	cfg events.Config
}

func setup(t *testing.T) testBundle {
	t.Helper()
	f := natstest.StartJetStream(t, events.Config{CatalogTTL: tools.Duration(3 * time.Second)})
	return testBundle{srv: f.Srv, nc: f.NC, js: f.JS, cfg: f.Cfg}
}

func fetchOne(t *testing.T, b testBundle, stream string, cc jetstream.ConsumerConfig) jetstream.Msg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cons, err := b.js.CreateOrUpdateConsumer(ctx, stream, cc)
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for m := range batch.Messages() {
		return m
	}
	t.Fatalf("no message on %s: %v", stream, batch.Error())
	return nil
}

// A call encoded here, stored in JetStream and fetched by the tool's durable consumer
// decodes to the same call, and so does the result sent back.
func TestCallAndResultRoundTrip(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	call := events.Call{Tool: "get_weather", Arguments: json.RawMessage(`{"city":"Oslo"}`), Metadata: map[string]string{"role": "admin"}}
	msg, err := events.NewCall(events.CallOptions{Source: "/test", ID: "call_1", RunID: "run_1"}, call)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.js.PublishMsg(ctx, msg); err != nil {
		t.Fatal(err)
	}
	// The same call again is dropped by JetStream's deduplication.
	if ack, err := b.js.PublishMsg(ctx, msg); err != nil || !ack.Duplicate {
		t.Fatalf("re-published call: ack %+v err %v, want a duplicate", ack, err)
	}
	cc, err := b.cfg.CallConsumer("get_weather")
	if err != nil {
		t.Fatal(err)
	}
	m := fetchOne(t, b, events.StreamCalls, cc)
	got, err := events.DecodeCall(m, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != "call_1" || got.RunID != "run_1" || got.Call.Tool != "get_weather" ||
		string(got.Call.Arguments) != `{"city":"Oslo"}` || got.Call.Metadata["role"] != "admin" {
		t.Errorf("decoded call %+v", got)
	}
	if err := m.Ack(); err != nil {
		t.Fatal(err)
	}

	res := events.Result{Status: events.StatusOK, Output: json.RawMessage(`{"temp":21}`), DurationMS: 3,
		Attempts: 1, Executor: "ex1", Validated: true, Tool: "get_weather", CallID: "call_1", RunID: "run_1"}
	rm, err := events.NewResult("/toolfleet/executor/ex1", res, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.js.PublishMsg(ctx, rm); err != nil {
		t.Fatal(err)
	}
	stored, err := mustStream(t, b, events.StreamResults).GetLastMsgForSubject(ctx, "toolfleet.result.run_1.call_1")
	if err != nil {
		t.Fatal(err)
	}
	e, r, err := events.DecodeResult(events.StoredMsg(stored))
	if err != nil {
		t.Fatal(err)
	}
	if e.ID != "call_1" || e.Attempt != 1 || r.Status != events.StatusOK || string(r.Output) != `{"temp":21}` || r.Executor != "ex1" {
		t.Errorf("decoded result %+v %+v", e, r)
	}
}

func mustStream(t *testing.T, b testBundle, name string) jetstream.Stream {
	t.Helper()
	s, err := b.js.Stream(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// What any NATS user would do: a plain core-NATS publish with hand-written ce-* headers.
// JetStream stores it and both decoders read it.
func TestPlainClientCallDecodes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	plain, err := nats.Connect(b.srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	m := nats.NewMsg("toolfleet.call.echo")
	m.Header.Set("ce-specversion", "1.0")
	m.Header.Set("ce-id", "plain-1")
	m.Header.Set("ce-type", "io.toolfleet.tool.call")
	m.Header.Set("ce-source", "/nats-cli")
	m.Header.Set("ce-runid", "r1")
	m.Header.Set("Nats-Msg-Id", "plain-1")
	m.Data = []byte(`{"arguments":"{\"text\":\"hi\"}"}`)
	reply, err := plain.RequestMsg(m, 5*time.Second) // JetStream answers a publish with a PubAck
	if err != nil {
		t.Fatal(err)
	}
	if string(reply.Data) == "" || json.Valid(reply.Data) == false {
		t.Fatalf("no PubAck: %q", reply.Data)
	}
	cc, _ := b.cfg.CallConsumer("echo")
	got := fetchOne(t, b, events.StreamCalls, cc)
	nm := &nats.Msg{Subject: got.Subject(), Header: got.Headers(), Data: got.Data()}
	ce, err := events.DecodeCall(events.CoreMsg(nm), 0)
	if err != nil {
		t.Fatal(err)
	}
	if ce.ID != "plain-1" || ce.Call.Tool != "echo" || string(ce.Call.Arguments) != `"{\"text\":\"hi\"}"` {
		t.Errorf("decoded %+v", ce)
	}
	sdk, err := eventstest.DecodeSDK(context.Background(), nm, 0)
	if err != nil {
		t.Fatal(err)
	}
	if sdk.ID() != "plain-1" || sdk.Extensions()["runid"] != "r1" {
		t.Errorf("SDK decoded %v", sdk)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	bad := []events.Config{
		{Replicas: 7}, {Storage: "tape"}, {MaxDeliver: 1}, {AckWait: tools.Duration(time.Millisecond)},
		{CatalogTTL: tools.Duration(time.Second)}, {MaxMsgSize: -1},
	}
	for _, c := range bad {
		if err := c.Validate(); err == nil {
			t.Errorf("config %+v accepted", c)
		}
	}
	if err := (events.Config{}).Validate(); err != nil {
		t.Errorf("zero config refused: %v", err)
	}
	var c events.Config
	if err := json.Unmarshal([]byte(`{"replicas":3,"ackWait":"45s","maxDeliver":7}`), &c); err != nil {
		t.Fatal(err)
	}
	c = c.WithDefaults()
	if c.Replicas != 3 || c.AckWait.D() != 45*time.Second || c.MaxDeliver != 7 || c.Storage != "file" {
		t.Errorf("config from JSON %+v", c)
	}
}

// The calls stream is a work queue: one consumer per tool, and a second consumer of the
// same tool (another group) is refused, so a call is run by one group only.
func TestOneConsumerGroupPerTool(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	cc, _ := b.cfg.CallConsumer("echo")
	if _, err := b.js.CreateOrUpdateConsumer(ctx, events.StreamCalls, cc); err != nil {
		t.Fatal(err)
	}
	if _, err := b.js.CreateOrUpdateConsumer(ctx, events.StreamCalls, cc); err != nil {
		t.Fatalf("same consumer again (another replica): %v", err)
	}
	other := cc
	other.Durable = "intruder"
	if _, err := b.js.CreateOrUpdateConsumer(ctx, events.StreamCalls, other); err == nil {
		t.Error("a second consumer group on the same tool was accepted")
	}
	cc2, _ := b.cfg.CallConsumer("other_tool")
	if _, err := b.js.CreateOrUpdateConsumer(ctx, events.StreamCalls, cc2); err != nil {
		t.Errorf("a consumer for another tool: %v", err)
	}
}
