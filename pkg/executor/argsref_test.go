package executor_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/client"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/executor"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// digestSchema: the data, and the SHA-256 its sender computed of it.
const digestSchema = `{"type":"object","properties":{"data":{"type":"string"},"sha256":{"type":"string"}},"required":["data","sha256"],"additionalProperties":false}`

// digestTool registers digest, which checks its data against the SHA-256 it was given
// and answers the length and whether they agree; runs counts its runs per call id.
func digestTool(t testing.TB, reg *tools.Registry, runs *sync.Map) {
	counted(t, reg, "digest", digestSchema, runs, func(args json.RawMessage) (any, error) {
		var a struct{ Data, SHA256 string }
		if err := json.Unmarshal(args, &a); err != nil {
			return nil, err
		}
		sum := sha256.Sum256([]byte(a.Data))
		return map[string]any{"len": len(a.Data), "intact": hex.EncodeToString(sum[:]) == a.SHA256}, nil
	})
}

// digestArgs returns digest's arguments for n bytes of data.
func digestArgs(n int) json.RawMessage {
	data := strings.Repeat("0123456789abcdef", n/16+1)[:n]
	sum := sha256.Sum256([]byte(data))
	b, _ := json.Marshal(map[string]string{"data": data, "sha256": hex.EncodeToString(sum[:])})
	return b
}

// Arguments of 5 MB through pkg/client reach a Go tool intact, for an anonymous caller
// and a tenant's: the call event stored on the calls stream is small and holds
// arguments_ref, the payload the tenant's. Small arguments still travel in the call.
func TestLargeArgumentsGoByReference(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.PayloadMaxBytes = 16 << 20
	var runs sync.Map
	reg := tools.NewRegistry()
	digestTool(t, reg, &runs)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The calls streams: one, or one per shard (the call is on any of them).
	var calls []jetstream.Stream
	for _, name := range b.cfg.CallStreams() {
		s, err := b.js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		calls = append(calls, s)
	}
	lastCall := func(subject string) (*jetstream.RawStreamMsg, error) {
		err := error(jetstream.ErrMsgNotFound)
		for _, s := range calls {
			var m *jetstream.RawStreamMsg
			if m, err = s.GetLastMsgForSubject(ctx, subject); err == nil {
				return m, nil
			}
		}
		return nil, err
	}
	type called struct {
		res events.Result
		err error
	}
	cases := []struct {
		caller  events.Identity
		subject string
	}{
		{events.Identity{}, "toolfleet.call.digest"},
		{events.Identity{Tenant: "acme", Role: "user"}, "toolfleet.call.digest.acme.user"},
	}
	done := make([]chan called, len(cases))
	for i, tt := range cases {
		var opts []client.Option
		if !tt.caller.IsZero() {
			opts = append(opts, client.WithIdentity(tt.caller))
		}
		c, err := client.New(b.nc, opts...)
		if err != nil {
			t.Fatal(err)
		}
		done[i] = make(chan called, 1)
		go func() {
			res, err := c.Call(ctx, client.Request{Tool: "digest", ID: "big-" + tt.caller.Tenant + "x", Arguments: digestArgs(5 << 20)})
			done[i] <- called{res, err}
		}()
		// No executor yet: the call waits in the stream, as it was stored.
		var stored events.Call
		natstest.Eventually(t, 20*time.Second, "the call stored on "+tt.subject, func() bool {
			m, err := lastCall(tt.subject)
			if err != nil {
				return false
			}
			if len(m.Data) > 4<<10 {
				t.Fatalf("the call event on %s is %d bytes", tt.subject, len(m.Data))
			}
			return json.Unmarshal(m.Data, &stored) == nil
		})
		if stored.ArgumentsRef == nil || stored.Arguments != nil || stored.ArgumentsRef.Tenant != tt.caller.Tenant || stored.ArgumentsRef.Size < 5<<20 {
			t.Fatalf("%s: stored call %+v, ref %+v", tt.subject, stored, stored.ArgumentsRef)
		}
	}
	b.start(t, reg)
	for i, tt := range cases {
		got := <-done[i]
		if got.err != nil {
			t.Fatalf("%s: %v", tt.subject, got.err)
		}
		if string(got.res.Output) != `{"intact":true,"len":5242880}` || !got.res.Validated {
			t.Errorf("%s: output %s, validated %v", tt.subject, got.res.Output, got.res.Validated)
		}
		if n := runsOf(&runs, got.res.CallID); n != 1 {
			t.Errorf("%s ran %d times", got.res.CallID, n)
		}
	}

	// Small arguments stay in the call.
	c, _ := client.New(b.nc)
	if res, err := c.Call(ctx, client.Request{Tool: "digest", ID: "small", Arguments: digestArgs(100)}); err != nil || string(res.Output) != `{"intact":true,"len":100}` {
		t.Fatalf("small arguments: %+v, %v", res, err)
	}
	// Arguments by reference are validated like inline ones: an extra property is refused
	// invalid, with the violation, and the tool does not run.
	bad := append([]byte(`{"extra":1,`), digestArgs(1 << 20)[1:]...)
	res, err := c.Call(ctx, client.Request{Tool: "digest", ID: "invalid-big", Arguments: bad})
	if !errors.Is(err, &tools.Error{Code: tools.CodeInvalidInput}) || res.Status != events.StatusInvalid || len(res.Error.Violations) == 0 {
		t.Fatalf("invalid large arguments: %+v, %v", res, err)
	}
	if n := runsOf(&runs, "invalid-big"); n != 0 {
		t.Errorf("the tool ran %d times on invalid arguments", n)
	}
}

// What a client may publish as arguments_ref without pkg/client, with a plain nats.go
// client: each message gets one clear result, the tool never runs, nothing stays in the
// calls stream to be delivered again.
func TestHostileArgumentRefs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.PayloadMaxBytes = 8 << 20
	var runs sync.Map
	reg := tools.NewRegistry()
	digestTool(t, reg, &runs)
	b.start(t, reg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	payloads := jsutil.NewPayloads(b.js, b.cfg)
	args := digestArgs(300 << 10)
	own, err := payloads.Put(ctx, "acme", args)
	if err != nil {
		t.Fatal(err)
	}
	other, err := payloads.Put(ctx, "globex", args)
	if err != nil {
		t.Fatal(err)
	}
	refJSON := func(r events.PayloadRef) string { v, _ := json.Marshal(r); return string(v) }
	missing, wrongSum, huge, over := *own, *own, *own, *own
	missing.ID = "nosuchpayload"
	wrongSum.SHA256 = strings.Repeat("0", 64)
	huge.Chunks = 1 << 30
	over.Size, over.Chunks = 9<<20, 1
	const acme = "toolfleet.call.digest.acme.user"
	tests := []struct {
		id, subject, body string
		status            events.Status
		code              tools.Code
		text              string
	}{
		{"both", acme, `{"arguments":{"data":"x","sha256":"y"},"arguments_ref":` + refJSON(*own) + `}`,
			events.StatusInvalid, tools.CodeInvalidEvent, "both arguments and arguments_ref"},
		{"missing", acme, `{"arguments_ref":` + refJSON(missing) + `}`, events.StatusInvalid, tools.CodeInvalidInput, "not stored"},
		{"wrong-sha", acme, `{"arguments_ref":` + refJSON(wrongSum) + `}`, events.StatusInvalid, tools.CodeInvalidInput, "does not match"},
		{"other-tenant", acme, `{"arguments_ref":` + refJSON(*other) + `}`, events.StatusForbidden, tools.CodeForbidden, "another tenant"},
		{"anonymous-to-tenant", "toolfleet.call.digest", `{"arguments_ref":` + refJSON(*own) + `}`, events.StatusForbidden, tools.CodeForbidden, "another tenant"},
		{"huge-chunks", acme, `{"arguments_ref":` + refJSON(huge) + `}`, events.StatusInvalid, tools.CodeInvalidEvent, "chunks cannot hold"},
		{"over-limit", acme, `{"arguments_ref":` + refJSON(over) + `}`, events.StatusInvalid, tools.CodeInputTooLarge, "payloadMaxBytes"},
		{"bad-ref", acme, `{"arguments_ref":{"id":"a.b","size":1,"chunks":1,"sha256":"x"}}`, events.StatusInvalid, tools.CodeInvalidEvent, "arguments_ref"},
	}
	var ids []string
	for _, tt := range tests {
		ids = append(ids, tt.id)
		b.publish(t, rawCall(tt.subject, tt.id, "", "hostile", tt.body))
	}
	// The executor's own payload, properly referenced, runs: the rules refuse only what they should.
	b.publish(t, rawCall(acme, "own", "", "hostile", `{"arguments_ref":`+refJSON(*own)+`}`))
	res := b.results.wait(t, 30*time.Second, append(ids, "own")...)
	for _, tt := range tests {
		r := res[tt.id]
		if r.Status != tt.status || r.Error == nil || r.Error.Code != tt.code || !strings.Contains(r.Error.Message, tt.text) {
			t.Errorf("%s: status %s, error %+v; want %s %s saying %q", tt.id, r.Status, r.Error, tt.status, tt.code, tt.text)
		}
		if n := runsOf(&runs, tt.id); n != 0 {
			t.Errorf("%s: the tool ran %d times", tt.id, n)
		}
	}
	if r := res["own"]; r.Status != events.StatusOK || string(r.Output) != `{"intact":true,"len":307200}` {
		t.Errorf("own payload: %+v %+v", r, r.Error)
	}
	natstest.Eventually(t, 15*time.Second, "the calls stream to empty", func() bool { return b.callsLeft(t) == 0 })
	assertOneResultEach(t, b, append(ids, "own"))
}

// A call by reference that waits for approval: the approval request carries the
// reference, not the arguments; approved as it is, the tool gets the arguments intact;
// approved with replacement arguments, the result's approval record keeps the original
// ones by reference.
func TestApprovalOfArgumentsByReference(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var written sync.Map
	b.start(t, writeRegistry(t, &written), executor.WithApprovalTimeout(time.Minute))
	requests := subscribe(t, b, "toolfleet.event.approval.requested.write_file.*")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.New(b.nc)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Repeat("y", 1<<20)
	args, _ := json.Marshal(map[string]string{"path": "big.txt", "text": text})
	for _, tt := range []struct {
		id       string
		answer   events.ApprovalAnswer
		wrote    string
		original bool // the record keeps the original arguments' reference
	}{
		{"as-is", events.ApprovalAnswer{Decision: events.DecisionApprove, By: "ann"}, "big.txt=" + text, false},
		{"replaced", events.ApprovalAnswer{Decision: events.DecisionApprove, By: "ann", Arguments: json.RawMessage(`{"path":"small.txt","text":"hi"}`)}, "small.txt=hi", true},
	} {
		done := make(chan error, 1)
		var res events.Result
		go func() {
			var err error
			res, err = c.Call(ctx, client.Request{Tool: "write_file", ID: tt.id, Arguments: args})
			done <- err
		}()
		m, err := requests.NextMsg(15 * time.Second)
		if err != nil {
			t.Fatalf("%s: no approval request: %v", tt.id, err)
		}
		e, err := events.Decode(events.CoreMsg(m), 0)
		if err != nil {
			t.Fatal(err)
		}
		var req events.ApprovalRequest
		must(t, e.DataAs(&req))
		if len(m.Data) > 4<<10 || req.ArgumentsRef == nil || req.Arguments != nil {
			t.Fatalf("%s: approval request of %d bytes, ref %+v", tt.id, len(m.Data), req.ArgumentsRef)
		}
		b.answer(t, req, tt.answer)
		if err := <-done; err != nil {
			t.Fatalf("%s: %v", tt.id, err)
		}
		if w, _ := written.Load(tt.id); w != tt.wrote {
			t.Errorf("%s: wrote %.40q, want %.40q", tt.id, w, tt.wrote)
		}
		a := res.Approval
		if a == nil || (a.ArgumentsOriginalRef != nil) != tt.original || a.ArgumentsOriginal != nil {
			t.Errorf("%s: approval record %+v", tt.id, a)
		}
	}
}
