package pickerservice

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/pick"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

type testBundle struct {
	srv *natstest.Server
	nc  *nats.Conn
	kv  jetstream.KeyValue
	svc *Service
}

func tool(name, desc string) tools.Definition {
	return tools.Definition{Type: "function", Name: name, Description: desc, Safe: true,
		Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}
}

func putTool(t testing.TB, kv jetstream.KeyValue, d tools.Definition) {
	t.Helper()
	b, _ := json.Marshal(d)
	if _, err := kv.Put(context.Background(), d.Name, b); err != nil {
		t.Fatal(err)
	}
}

// setup starts JetStream, fills the catalog bucket with defs and runs a picker replica
// (plus any options), waiting until it is ready.
func setup(t testing.TB, defs []tools.Definition, opts ...Option) *testBundle {
	t.Helper()
	b := setupCatalog(t, defs)
	b.svc = b.startReplica(t, opts...)
	return b
}

// setupCatalog is setup without the replica.
func setupCatalog(t testing.TB, defs []tools.Definition) *testBundle {
	t.Helper()
	b := &testBundle{srv: natstest.Start(t)}
	b.nc = b.srv.Connect()
	js, err := jetstream.New(b.nc)
	if err != nil {
		t.Fatal(err)
	}
	b.kv, err = js.CreateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: CatalogBucket})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range defs {
		putTool(t, b.kv, d)
	}
	return b
}

func (b *testBundle) startReplica(t testing.TB, opts ...Option) *Service {
	t.Helper()
	svc, err := New(b.srv.Connect(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	natstest.Eventually(t, waitTimeout, "replica ready", svc.Ready)
	return svc
}

// waitTimeout bounds the picker tests' waits (natstest.Eventually).
const waitTimeout = 10 * time.Second

// request sends a raw pick request and returns the reply.
func request(t testing.TB, nc *nats.Conn, body string) *nats.Msg {
	t.Helper()
	msg, err := nc.Request(PickSubject, []byte(body), 5*time.Second)
	if err != nil {
		t.Fatalf("request %s: %v", body, err)
	}
	return msg
}

func pickNames(t testing.TB, nc *nats.Conn, body string) (Response, []string) {
	t.Helper()
	msg := request(t, nc, body)
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
		t.Fatalf("request %s: error %s %s", body, code, msg.Header.Get(micro.ErrorHeader))
	}
	var r Response
	if err := json.Unmarshal(msg.Data, &r); err != nil {
		t.Fatalf("reply %s: %v", msg.Data, err)
	}
	var names []string
	for _, res := range r.Results {
		names = append(names, res.Name)
	}
	return r, names
}

var catalog = []tools.Definition{
	tool("get_weather", "Current weather for a city"),
	tool("send_email", "Send an email to a recipient"),
	tool("translate_text", "Translate text between languages"),
}

func TestServicePicks(t *testing.T) {
	t.Parallel()
	b := setup(t, catalog)
	r, names := pickNames(t, b.nc, `{"input":"what is the weather in Paris","options":{"debug":true}}`)
	if len(names) == 0 || names[0] != "get_weather" {
		t.Fatalf("got %v, want get_weather first", names)
	}
	if r.Fallback || r.CatalogVersion == 0 {
		t.Errorf("fallback %v version %d", r.Fallback, r.CatalogVersion)
	}
	res := r.Results[0]
	if res.Score <= 0 || res.Score > 1 || !strings.Contains(res.Reason, "weather") || res.Provenance.Scorer != "bm25" {
		t.Errorf("result %+v", res)
	}
	var raw map[string]any
	_ = json.Unmarshal(request(t, b.nc, `{"input":{"task":"email Bob"},"options":{"debug":true}}`).Data, &raw)
	first := raw["results"].([]any)[0].(map[string]any)
	if first["name"] != "send_email" || first["provenance"].(map[string]any)["details"] == nil {
		t.Errorf("JSON input: reply %v, want send_email with details", raw)
	}
}

func TestServiceFollowsCatalog(t *testing.T) {
	t.Parallel()
	b := setup(t, catalog)
	ctx := context.Background()
	putTool(t, b.kv, tool("convert_currency", "Convert an amount of money between currencies"))
	natstest.Eventually(t, waitTimeout, "new tool to be picked", func() bool {
		_, names := pickNames(t, b.nc, `{"input":"convert 10 dollars to euros, currency"}`)
		return len(names) > 0 && names[0] == "convert_currency"
	})
	// A bad entry never stops the watch; a bad value over a good tool withdraws it.
	if _, err := b.kv.Put(ctx, "broken", []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.kv.Put(ctx, "translate_text", []byte(`{"name":"other","description":"translate"}`)); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, waitTimeout, "mismatched entry to withdraw translate_text", func() bool {
		_, ok := b.svc.Catalog().Snapshot().Lookup("translate_text")
		return !ok
	})
	// Putting the same value again (an executor's keep-alive) changes nothing.
	v := b.svc.Catalog().Snapshot().Version()
	putTool(t, b.kv, tool("convert_currency", "Convert an amount of money between currencies"))
	putTool(t, b.kv, tool("send_email", "Send an email to a recipient"))
	putTool(t, b.kv, tool("translate_text", "Translate text between languages"))
	natstest.Eventually(t, waitTimeout, "translate_text back", func() bool {
		_, ok := b.svc.Catalog().Snapshot().Lookup("translate_text")
		return ok
	})
	if got := b.svc.Catalog().Snapshot().Version(); got != v+1 {
		t.Errorf("version %d after two refreshes and one real change from %d, want %d", got, v, v+1)
	}
	if err := b.kv.Delete(ctx, "get_weather"); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, waitTimeout, "deleted tool to vanish", func() bool {
		_, names := pickNames(t, b.nc, `{"input":"weather","options":{"minScore":0}}`)
		return len(names) == 0
	})
	if err := b.kv.Purge(ctx, "send_email"); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, waitTimeout, "purged tool to vanish", func() bool { return b.svc.Catalog().Snapshot().Len() == 2 })
	if got := fmt.Sprint(b.svc.Catalog().Snapshot().Definitions()); !strings.Contains(got, "convert_currency") || !strings.Contains(got, "translate_text") {
		t.Errorf("catalog %s, want convert_currency and translate_text", got)
	}
}

func TestServiceBadRequests(t *testing.T) {
	t.Parallel()
	b := setup(t, catalog)
	for _, c := range []struct{ name, body, want string }{
		{"malformed JSON", `{"input":`, "malformed pick request"},
		{"not an object", `["weather"]`, "malformed pick request"},
		{"unknown option", `{"input":"weather","options":{"maxCandidate":3}}`, `unknown field "maxCandidate"`},
		{"option out of range", `{"input":"weather","options":{"minScore":2}}`, "minScore must be between 0 and 1"},
		{"bad timeout", `{"input":"weather","options":{"timeout":"soon"}}`, "malformed pick request"},
		{"unknown scorer", `{"input":"weather","options":{"scorer":"magic"}}`, `unknown scorer "magic" (have bm25)`},
		{"empty input", `{"input":"   "}`, "empty input"},
		{"no input", `{}`, "empty input"},
	} {
		t.Run(c.name, func(t *testing.T) {
			msg := request(t, b.nc, c.body)
			if code := msg.Header.Get(micro.ErrorCodeHeader); code != CodeBadRequest {
				t.Errorf("code %q, want %s", code, CodeBadRequest)
			}
			if desc := msg.Header.Get(micro.ErrorHeader); !strings.Contains(desc, c.want) {
				t.Errorf("description %q, want it to say %q", desc, c.want)
			}
		})
	}
}

type hangingScorer struct{ release chan struct{} }

func (hangingScorer) Name() string { return "hangs" }
func (h hangingScorer) Score(ctx context.Context, _ *pick.Request) ([]pick.Hit, error) {
	<-h.release
	return nil, nil
}

func TestServiceTimeoutFallback(t *testing.T) {
	t.Parallel()
	h := hangingScorer{release: make(chan struct{})}
	t.Cleanup(func() { close(h.release) })
	b := setup(t, catalog, WithScorer("hangs", h), WithDefaultTimeout(20*time.Millisecond))
	r, names := pickNames(t, b.nc, `{"input":"weather","options":{"scorer":"hangs"}}`)
	if !r.Fallback || fmt.Sprint(names) != "[get_weather send_email translate_text]" {
		t.Fatalf("fallback %v names %v, want registration order with fallback set", r.Fallback, names)
	}
}

func TestServiceNotReady(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	svc, err := New(srv.Connect())
	if err != nil {
		t.Fatal(err)
	}
	_, _, code, err := svc.pickFor([]byte(`{"input":"weather"}`))
	if code != CodeUnavailable || err == nil {
		t.Fatalf("before the catalog loads: code %q err %v, want 503", code, err)
	}
	if svc.Ready() {
		t.Error("ready before the catalog loads")
	}
}

func TestServiceDiscoveryQueueGroupAndMetrics(t *testing.T) {
	t.Parallel()
	b := setup(t, catalog)
	second := b.startReplica(t)
	for range 200 {
		pickNames(t, b.nc, `{"input":"translate this text"}`)
	}
	// nats micro stats: both replicas answered some of the 200 requests.
	inbox := nats.NewInbox()
	sub, err := b.nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	subj, _ := micro.ControlSubject(micro.StatsVerb, ServiceName, "")
	if err := b.nc.PublishRequest(subj, inbox, nil); err != nil {
		t.Fatal(err)
	}
	var perReplica []int
	for range 2 {
		msg, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("stats: %v", err)
		}
		var st micro.Stats
		if err := json.Unmarshal(msg.Data, &st); err != nil {
			t.Fatal(err)
		}
		if len(st.Endpoints) != 1 || st.Endpoints[0].Name != EndpointName || st.Endpoints[0].Subject != PickSubject || st.Endpoints[0].QueueGroup != QueueGroup {
			t.Fatalf("stats endpoints %+v", st.Endpoints)
		}
		perReplica = append(perReplica, st.Endpoints[0].NumRequests)
	}
	if perReplica[0]+perReplica[1] != 200 || perReplica[0] == 0 || perReplica[1] == 0 {
		t.Errorf("requests per replica %v, want 200 shared by both", perReplica)
	}

	if !second.Ready() || second.Catalog().Snapshot().Len() != 3 {
		t.Errorf("second replica: ready %v with %d tools, want ready with 3", second.Ready(), second.Catalog().Snapshot().Len())
	}
	families, err := second.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	ok := 0.0
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if f.GetName() == "toolfleet_picker_requests_total" && len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == "ok" {
				ok = m.GetCounter().GetValue()
			}
		}
	}
	if ok == 0 {
		t.Error(`toolfleet_picker_requests_total{outcome="ok"} is 0 on the second replica, which answered some picks`)
	}
}

// heldScorer tells entered when a pick reaches it and answers once release is closed.
type heldScorer struct{ entered, release chan struct{} }

func (heldScorer) Name() string { return "held" }
func (h heldScorer) Score(ctx context.Context, _ *pick.Request) ([]pick.Hit, error) {
	h.entered <- struct{}{}
	select {
	case <-h.release:
		return nil, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// A stop is complete when Run returns: a request taken before the stop is answered
// first.
func TestRunReturnsAfterTheRequestsItTook(t *testing.T) {
	t.Parallel()
	b := setupCatalog(t, catalog[:1])
	nc := b.nc
	h := heldScorer{entered: make(chan struct{}, 1), release: make(chan struct{})}
	svc, err := New(b.srv.Connect(), WithScorer("held", h), WithDefaultTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	natstest.Eventually(t, waitTimeout, "replica ready", svc.Ready)

	replies := make(chan *nats.Msg, 1)
	go func() {
		m, err := nc.Request(PickSubject, []byte(`{"input":"weather","options":{"scorer":"held"}}`), waitTimeout)
		if err != nil {
			t.Errorf("request: %v", err)
		}
		replies <- m
	}()
	select {
	case <-h.entered:
	case <-time.After(waitTimeout):
		t.Fatal("the request did not reach the scorer")
	}
	cancel()
	select {
	case err := <-done:
		close(h.release)
		t.Fatalf("Run returned (%v) while a request it took was being served", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(h.release)
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("Run did not return once the request was served")
	}
	if m := <-replies; m == nil || m.Header.Get(micro.ErrorCodeHeader) != "" {
		t.Errorf("reply %+v, want an answer", m)
	}
}

// `nats micro stats` tells the truth: every request and every error is counted, and the
// processing time is the time the picks took (at least what the picker's own latency
// histogram measured), with one endpoint per unit of concurrency.
func TestMicroStatsTellTheTruth(t *testing.T) {
	t.Parallel()
	b := setup(t, catalog, WithConcurrency(2))
	for range 5 {
		if msg := request(t, b.nc, `{"input":`); msg.Header.Get(micro.ErrorCodeHeader) != CodeBadRequest {
			t.Fatalf("malformed request answered %q", msg.Header.Get(micro.ErrorCodeHeader))
		}
	}
	for range 3 {
		pickNames(t, b.nc, `{"input":"translate this text"}`)
	}
	info, err := micro.ControlSubject(micro.StatsVerb, ServiceName, "")
	if err != nil {
		t.Fatal(err)
	}
	msg, err := b.nc.Request(info, nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var st micro.Stats
	if err := json.Unmarshal(msg.Data, &st); err != nil {
		t.Fatal(err)
	}
	var requests, errs int
	var processing time.Duration
	names := map[string]bool{}
	for _, e := range st.Endpoints {
		requests, errs, processing = requests+e.NumRequests, errs+e.NumErrors, processing+e.ProcessingTime
		names[e.Name] = e.Subject == PickSubject
	}
	if requests != 8 || errs != 5 {
		t.Errorf("micro stats: %d requests, %d errors; want 8 and 5", requests, errs)
	}
	if len(names) != 2 || !names[EndpointName] || !names[EndpointName+"-2"] {
		t.Errorf("endpoints %v, want pick and pick-2 on %s", names, PickSubject)
	}
	families, err := b.svc.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var measured float64
	for _, f := range families {
		if f.GetName() == "toolfleet_picker_pick_seconds" {
			for _, m := range f.GetMetric() {
				measured += m.GetHistogram().GetSampleSum()
			}
		}
	}
	if measured == 0 || processing.Seconds() < measured {
		t.Errorf("micro processing time %s is less than the picks' own %gs", processing, measured)
	}
}
