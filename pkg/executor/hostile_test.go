package executor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/executor"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// The hostile-client suite: what any NATS client can publish on a call subject, with a
// plain nats.go client and hand-written headers, against real executors. The rule under
// test: every message ends in exactly one stored result its caller can find, or — only
// when it names no caller at all — a dead letter; nothing else is touched, nothing is
// left in the calls stream.

// rawCall is a call message written by hand, as a client without toolfleet's Go API
// would: headers set only when given.
func rawCall(subject, id, msgID, run, body string) *nats.Msg {
	m := &nats.Msg{Subject: subject, Header: nats.Header{}, Data: []byte(body)}
	m.Header["ce-specversion"] = []string{"1.0"}
	m.Header["ce-type"] = []string{events.TypeCall}
	m.Header["ce-source"] = []string{"/hostile"}
	for k, v := range map[string]string{"ce-id": id, "Nats-Msg-Id": msgID, "ce-runid": run} {
		if v != "" {
			m.Header[k] = []string{v}
		}
	}
	return m
}

// counted registers tool name with schema, counting its runs per call id.
func counted(t testing.TB, reg *tools.Registry, name, schema string, runs *sync.Map, f func(args json.RawMessage) (any, error)) {
	t.Helper()
	countedDef(t, reg, tools.Definition{Name: name, Parameters: json.RawMessage(schema), Safe: true}, runs, f)
}

// countedDef is counted for any definition.
func countedDef(t testing.TB, reg *tools.Registry, def tools.Definition, runs *sync.Map, f func(args json.RawMessage) (any, error)) {
	t.Helper()
	must(t, reg.AddFunc(def,
		func(ctx context.Context, args json.RawMessage) (any, error) {
			info, _ := tools.CallInfoFrom(ctx)
			n, _ := runs.LoadOrStore(info.CallID, new(atomic.Int32))
			n.(*atomic.Int32).Add(1)
			return f(args)
		}))
}

func runsOf(runs *sync.Map, id string) int32 {
	n, ok := runs.Load(id)
	if !ok {
		return 0
	}
	return n.(*atomic.Int32).Load()
}

// callsLeft is how many messages the calls streams still hold.
func (b *testBundle) callsLeft(t testing.TB) uint64 {
	t.Helper()
	return b.stored(t, b.cfg.CallStreams())
}

// stored is how many messages the streams hold together.
func (b *testBundle) stored(t testing.TB, streams []string) uint64 {
	t.Helper()
	var n uint64
	for _, name := range streams {
		s, err := b.js.Stream(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		n += info.State.Msgs
	}
	return n
}

// A message published on the literal subjects toolfleet.call.* and toolfleet.call.>
// while calls of a served tool are running is answered itself, and those calls are not
// touched: each gets its own result, from its tool, run once.
func TestWildcardSubjectsLeaveOtherCallsAlone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var runs sync.Map
	reg := tools.NewRegistry()
	counted(t, reg, "slow", string(echoSchema), &runs, func(json.RawMessage) (any, error) {
		time.Sleep(300 * time.Millisecond)
		return "slept", nil
	})
	b.start(t, reg, executor.WithConcurrency(4), executor.WithNoSuchToolTimeout(100*time.Millisecond))
	var ids []string
	for i := range 12 {
		id := fmt.Sprintf("slow%02d", i)
		ids = append(ids, id)
		b.call(t, "slow", id, "wild", `{"text":"x"}`)
	}
	b.publish(t, rawCall("toolfleet.call.*", "star", "", "wild", `{"arguments":{"text":"x"}}`))
	b.publish(t, rawCall("toolfleet.call.>", "gt", "", "wild", `{"arguments":{"text":"x"}}`))
	b.publish(t, rawCall("toolfleet.call.*", "", "", "", `{"arguments":{"text":"anonymous"}}`))
	dlq := subscribe(t, b, "toolfleet.dlq.>")

	res := b.results.wait(t, 30*time.Second, append(ids, "star", "gt")...)
	for _, id := range ids {
		if r := res[id]; r.Status != events.StatusOK || string(r.Output) != `"slept"` || r.Tool != "slow" {
			t.Errorf("%s: %+v %+v", id, r, r.Error)
		}
		if n := runsOf(&runs, id); n != 1 {
			t.Errorf("%s ran %d times", id, n)
		}
	}
	for _, id := range []string{"star", "gt"} {
		if r := res[id]; r.Status != events.StatusInvalid || r.Error.Code != tools.CodeInvalidEvent || !strings.Contains(r.Error.Message, "does not name a valid tool") {
			t.Errorf("%s: %+v %+v", id, r, r.Error)
		}
	}
	if _, err := dlq.NextMsg(15 * time.Second); err != nil {
		t.Errorf("the wildcard message without any id was not set aside: %v", err)
	}
	assertOneResultEach(t, b, append(ids, "star", "gt"))
	natstest.Eventually(t, 15*time.Second, "the calls stream to empty", func() bool { return b.callsLeft(t) == 0 })
}

// Every case that used to be left unanswered is answered, at the subject its caller can
// compute from its own ids.
func TestEveryCallIsAnswered(t *testing.T) {
	t.Parallel()
	b := setup(t)
	reg := echoRegistry(t)
	b.start(t, reg, executor.WithNoSuchToolTimeout(100*time.Millisecond))
	dlq := subscribe(t, b, "toolfleet.dlq.>")
	structured := &nats.Msg{Subject: "toolfleet.call.echo", Header: nats.Header{"Content-Type": {"application/cloudevents+json"}},
		Data: []byte(`{"specversion":"1.0","id":"structured-1","type":"io.toolfleet.tool.call","source":"/hostile","runid":"r","data":{"arguments":{"text":"s"}}}`)}
	tests := []struct {
		name    string
		msg     *nats.Msg
		id, run string // the caller's ids
		status  events.Status
		text    string
	}{
		{"urn id", rawCall("toolfleet.call.echo", "urn:uuid:6e8bc430-9c3a-11d9-9669-0800200c9a66", "", "run one", `{"arguments":{"text":"u"}}`),
			"urn:uuid:6e8bc430-9c3a-11d9-9669-0800200c9a66", "run one", events.StatusOK, ""},
		{"only Nats-Msg-Id", rawCall("toolfleet.call.echo", "", "dedup-only", "r", `{"arguments":{"text":"x"}}`),
			"dedup-only", "r", events.StatusInvalid, "ce-id is missing"},
		{"invalid UTF-8 tool", rawCall("toolfleet.call.\xff", "badtool", "", "r", `{"arguments":{}}`),
			"badtool", "r", events.StatusInvalid, "does not name a valid tool"},
		{"two tokens", rawCall("toolfleet.call.echo.more", "twotok", "", "r", `{"arguments":{}}`),
			"twotok", "r", events.StatusInvalid, "does not name a valid tool"},
		{"invalid UTF-8 id", rawCall("toolfleet.call.echo", "id\xff\xfe", "", "r", `{"arguments":{"text":"x"}}`),
			"id\xff\xfe", "r", events.StatusInvalid, "not valid UTF-8"},
		{"invalid UTF-8 argument", rawCall("toolfleet.call.echo", "badarg", "", "r", "{\"arguments\":{\"text\":\"a\xffb\"}}"),
			"badarg", "r", events.StatusOK, ""},
		{"structured mode", structured, "structured-1", "r", events.StatusOK, ""},
	}
	for _, tt := range tests {
		b.publish(t, tt.msg)
	}
	// No caller at all, with a body whose base64 alone exceeds the stream's limit.
	big := rawCall("toolfleet.call.echo", "", "", "", `{"arguments":{"text":"`+strings.Repeat("x", 900<<10)+`"}}`)
	b.publish(t, big)

	for _, tt := range tests {
		subj, err := events.ResultSubject("", tt.run, tt.id)
		if err != nil {
			t.Fatal(err)
		}
		raw := b.resultAt(t, subj)
		if !utf8.Valid(raw.Data) {
			t.Errorf("%s: result is not UTF-8", tt.name)
		}
		e, r, err := events.DecodeResult(events.StoredMsg(raw))
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if r.Status != tt.status || (tt.text != "" && !strings.Contains(r.Error.Message, tt.text)) {
			t.Errorf("%s: %+v %+v, want %s mentioning %q", tt.name, r, r.Error, tt.status, tt.text)
		}
		if want := events.ReplyID(tt.id); r.CallID != want || e.ID != want {
			t.Errorf("%s: answered as %q (event %q), want %q", tt.name, r.CallID, e.ID, want)
		}
	}
	m, err := dlq.NextMsg(15 * time.Second)
	if err != nil {
		t.Fatalf("the 900 KB message without ids was not set aside: %v", err)
	}
	_, dl, _ := decodeDeadLetter(t, m)
	if dl.BodySize != len(big.Data) || !dl.BodyTruncated || dl.Sequence == 0 {
		t.Errorf("dead letter: size %d truncated %v seq %d", dl.BodySize, dl.BodyTruncated, dl.Sequence)
	}
	natstest.Eventually(t, 15*time.Second, "the calls stream to empty", func() bool { return b.callsLeft(t) == 0 })
}

// resultAt waits for the stored result on subject and returns it.
func (b *testBundle) resultAt(t testing.TB, subject string) *jetstream.RawStreamMsg {
	t.Helper()
	s, err := b.js.Stream(context.Background(), b.cfg.ResultStream(subject))
	if err != nil {
		t.Fatal(err)
	}
	var raw *jetstream.RawStreamMsg
	natstest.Eventually(t, 15*time.Second, "a result on "+subject, func() bool {
		raw, err = s.GetLastMsgForSubject(context.Background(), subject)
		return err == nil
	})
	return raw
}

// Outputs of '<' keep their size; one too large to keep (over payloadMaxBytes) is
// answered output_too_large after one run, not redelivered and re-run.
func TestLargeOutputs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.PayloadMaxBytes = 1 << 20
	var runs sync.Map
	reg := tools.NewRegistry()
	counted(t, reg, "lt", `{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`, &runs,
		func(args json.RawMessage) (any, error) {
			var a struct{ N int }
			_ = json.Unmarshal(args, &a)
			return strings.Repeat("<", a.N), nil
		})
	b.start(t, reg)
	b.call(t, "lt", "small", "r", `{"n":200000}`)
	b.call(t, "lt", "huge", "r", `{"n":2000000}`)
	res := b.results.wait(t, 20*time.Second, "small", "huge")
	if r := res["small"]; r.Status != events.StatusOK || len(r.Output) != 200002 {
		t.Errorf("200 KB of '<': status %s, output %d bytes (want 200002)", r.Status, len(r.Output))
	}
	r := res["huge"]
	if r.Status != events.StatusError || r.Error.Code != tools.CodeOutputTooLarge || r.Attempts != 1 ||
		!strings.Contains(r.Error.Message, "2000002 bytes") || !strings.Contains(r.Error.Message, "up to 1048576 bytes") {
		t.Errorf("2 MB of '<': %+v %+v", r, r.Error)
	}
	time.Sleep(2 * time.Duration(b.cfg.AckWait)) // a redelivery would have come by now
	if n := runsOf(&runs, "huge"); n != 1 {
		t.Errorf("the tool with a too-large output ran %d times", n)
	}
	assertOneResultEach(t, b, []string{"small", "huge"})
}

// Arguments nested up to tools.MaxDepth are run and their result decodes; deeper ones
// are refused as nested too deeply, whether the tool's parser or the event decoder finds
// them.
func TestNesting(t *testing.T) {
	t.Parallel()
	b := setup(t)
	reg := tools.NewRegistry()
	must(t, reg.AddFunc(tools.Definition{Name: "any", Parameters: json.RawMessage(`{"type":"object"}`), Safe: true},
		func(_ context.Context, args json.RawMessage) (any, error) { return args, nil }))
	b.start(t, reg)
	deep := func(n int) string { // arguments nesting n levels in all
		return `{"a":` + strings.Repeat("[", n-1) + `1` + strings.Repeat("]", n-1) + `}`
	}
	b.call(t, "any", "at", "r", deep(tools.MaxDepth))
	b.call(t, "any", "over", "r", deep(tools.MaxDepth+1))
	b.publish(t, rawCall("toolfleet.call.any", "far", "", "r", `{"arguments":`+deep(9999)+`}`))
	res := b.results.wait(t, 20*time.Second, "at", "over", "far")
	if r := res["at"]; r.Status != events.StatusOK || tools.JSONDepth(r.Output) != tools.MaxDepth {
		t.Errorf("at the limit: %s %+v, output depth %d", r.Status, r.Error, tools.JSONDepth(r.Output))
	}
	for _, id := range []string{"over", "far"} {
		if r := res[id]; r.Status != events.StatusInvalid || !strings.Contains(r.Error.Message, "nested too deeply") {
			t.Errorf("%s: %+v %+v", id, r, r.Error)
		}
	}
}

// A call whose result is already stored — re-published by its caller after the
// duplicate window, or stored by an executor that then lost its ack — is answered once,
// by that result. A non-idempotent call is not run again: its result is looked up
// before it runs. An idempotent call's first delivery is not looked up (tools run at
// least once): it may run again, and its second result is refused.
func TestAnsweredCallIsNotRunAgain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.DuplicateWindow = tools.Duration(time.Second)
	must(t, jsutil.Ensure(context.Background(), b.js, b.cfg))
	var runs sync.Map
	reg := tools.NewRegistry()
	done := func(json.RawMessage) (any, error) { return "done", nil }
	counted(t, reg, "work", string(echoSchema), &runs, done)
	countedDef(t, reg, tools.Definition{Name: "charge", Parameters: echoSchema, Safe: true, Idempotent: new(false)}, &runs, done)
	b.start(t, reg)
	b.call(t, "work", "once", "r", `{"text":"x"}`)
	b.call(t, "charge", "once-charge", "r", `{"text":"x"}`)
	first := b.results.one(t, "once")
	b.results.one(t, "once-charge")
	time.Sleep(1500 * time.Millisecond) // past the duplicate window
	b.call(t, "work", "once", "r", `{"text":"x"}`)
	b.call(t, "charge", "once-charge", "r", `{"text":"x"}`)

	// A result stored before its call is delivered: the call is answered already.
	pre, err := events.NewResult("/earlier-executor", events.Result{Status: events.StatusOK, Tool: "charge", CallID: "stored", RunID: "r",
		Output: json.RawMessage(`"from before"`)}, 1)
	must(t, err)
	pre.Subject = b.cfg.ResultPublishSubject(pre.Subject)
	b.publish(t, pre)
	b.call(t, "charge", "stored", "r", `{"text":"x"}`)

	natstest.Eventually(t, 15*time.Second, "the calls stream to empty", func() bool { return b.callsLeft(t) == 0 })
	time.Sleep(300 * time.Millisecond)
	if n := runsOf(&runs, "once-charge"); n != 1 {
		t.Errorf("re-published non-idempotent call ran %d times", n)
	}
	if n := runsOf(&runs, "once"); n < 1 || n > 2 {
		t.Errorf("re-published idempotent call ran %d times, want once or twice", n)
	}
	if n := runsOf(&runs, "stored"); n != 0 {
		t.Errorf("call with a stored result ran %d times", n)
	}
	assertOneResultEach(t, b, []string{"once", "once-charge", "stored"})
	if r := b.results.one(t, "once"); !r.FinishedAt.Equal(first.FinishedAt) {
		t.Errorf("the first result was replaced: %+v, then %+v", first, r)
	}
	if r := b.results.one(t, "stored"); string(r.Output) != `"from before"` {
		t.Errorf("the stored result was replaced: %s", r.Output)
	}
}

// An executor started before its server comes up when the server does, and serves.
func TestExecutorStartedBeforeItsServer(t *testing.T) {
	t.Parallel()
	srv := natstestLater(t)
	nc, err := nats.Connect(srv.url, nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	must(t, err)
	t.Cleanup(nc.Close)
	ex, err := executor.New(nc, echoRegistry(t), executor.WithStreamConfig(testConfig()))
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ex.Run(ctx) }()
	time.Sleep(500 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("executor exited while its server was down: %v", err)
	default:
	}
	srv.start(t)
	b := bundleOn(t, srv.url)
	b.waitServed(t, "echo")
	b.call(t, "echo", "late", "r", `{"text":"x"}`)
	if r := b.results.one(t, "late"); r.Status != events.StatusOK {
		t.Errorf("%+v", r)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

// laterServer is a JetStream server whose address is known before it runs.
type laterServer struct {
	url  string
	opts server.Options
}

func natstestLater(t *testing.T) *laterServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	must(t, l.Close())
	return &laterServer{url: fmt.Sprintf("nats://127.0.0.1:%d", port), opts: server.Options{Host: "127.0.0.1", Port: port,
		JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true, MaxPayload: 8 << 20}}
}

func (s *laterServer) start(t *testing.T) {
	t.Helper()
	srv, err := server.NewServer(&s.opts)
	must(t, err)
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	t.Cleanup(srv.Shutdown)
	if err := natstest.MapCallsOn(srv, testConfig()); err != nil {
		t.Fatal(err)
	}
}

// bundleOn is setup's bundle on a server that runs at url.
func bundleOn(t *testing.T, url string) *testBundle {
	t.Helper()
	nc, err := nats.Connect(url)
	must(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	must(t, err)
	b := &testBundle{nc: nc, js: js, cfg: testConfig()}
	must(t, jsutil.Ensure(context.Background(), js, b.cfg))
	b.results = collect(t, js, b.cfg)
	return b
}
