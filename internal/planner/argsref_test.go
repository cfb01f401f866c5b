package planner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/toolfleet/toolfleet/internal/planner/runrec"
	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// A model's call with 5 MB of arguments, on a server whose max_payload is the production
// default of 1 MiB: the arguments are stored once by reference, the call event and the
// run's records hold the reference (no run-log record and no event near its limit), the
// tool gets the arguments intact, the run completes, and the model is shown its own
// arguments cut to the run's context budget with the call id as the handle.
func TestFiveMegabyteArgumentsByReference(t *testing.T) {
	const size = 5 << 20
	data := strings.Repeat("0123456789abcdef", size/16)
	sum := sha256.Sum256([]byte(data))
	script := fmt.Sprintf(`
name: big-arguments
steps:
  - calls: [{name: digest, arguments: {data: %s, sha256: %s}}]
  - text: digested
`, data, hex.EncodeToString(sum[:]))
	srv := natstest.StartWith(t, func(o *server.Options) { o.MaxPayload = 1 << 20 })
	b := setupOn(t, srv, nil)
	startExecutor(t, b, tools.Definition{Type: "function", Name: "digest", Description: "Checks data against its SHA-256.", Safe: true,
		Parameters: json.RawMessage(`{"type":"object","properties":{"data":{"type":"string"},"sha256":{"type":"string"}},"required":["data","sha256"],"additionalProperties":false}`)},
		func(_ context.Context, args json.RawMessage) (any, error) {
			var a struct{ Data, SHA256 string }
			if err := json.Unmarshal(args, &a); err != nil {
				return nil, err
			}
			got := sha256.Sum256([]byte(a.Data))
			return map[string]any{"len": len(a.Data), "intact": hex.EncodeToString(got[:]) == a.SHA256}, nil
		})
	w := newWrites()
	b.hookedPlanner(t, map[string]string{"main": script}, w)
	calls, err := b.nc.SubscribeSync("toolfleet.call.digest")
	if err != nil {
		t.Fatal(err)
	}
	if b.cfg.Sharded() { // the server maps a published call to its shard's subject
		if calls, err = b.nc.SubscribeSync("toolfleet.shard.*.call.digest"); err != nil {
			t.Fatal(err)
		}
	}
	run, err := b.p.Start(b.ctx, StartRequest{Input: "digest it", Tools: []string{"digest"}})
	if err != nil {
		t.Fatal(err)
	}
	run = b.waitLong(t, run.ID, time.Minute)
	if run.Termination != TerminationCompleted || run.Answer != "digested" || len(run.Calls) != 1 {
		t.Fatalf("run %s (%s), answer %q, %d calls; want completed", run.Termination, run.Detail, run.Answer, len(run.Calls))
	}
	c := run.Calls[0]
	if c.Status != "ok" || string(c.Output) != `{"intact":true,"len":5242880}` || c.ArgumentsRef == nil || c.ArgumentsRef.Size < size {
		t.Fatalf("call %s: output %s, ref %+v; want the tool to get the 5 MB intact, by reference", c.Status, c.Output, c.ArgumentsRef)
	}

	// The call event went with the reference.
	m, err := calls.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var sent events.Call
	if err := json.Unmarshal(m.Data, &sent); err != nil || len(m.Data) > 4<<10 || sent.ArgumentsRef == nil || sent.Arguments != nil {
		t.Fatalf("call event of %d bytes: %+v, %v; want a small one holding arguments_ref", len(m.Data), sent, err)
	}
	// No run-log record grows with the arguments.
	w.mu.Lock()
	for subject, n := range w.log {
		if n > 16<<10 {
			t.Errorf("run-log record %s is %d bytes", subject, n)
		}
	}
	w.mu.Unlock()
	// Nor does the tool_called event.
	evs, err := b.js.Stream(b.ctx, events.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	subj, _ := events.RunEventSubject("", run.ID, "tool_called")
	em, err := evs.GetLastMsgForSubject(b.ctx, subj)
	if err != nil {
		t.Fatal(err)
	}
	if len(em.Data) > 4<<10 || !strings.Contains(string(em.Data), `"arguments_ref"`) {
		t.Fatalf("tool_called event of %d bytes: %.300s", len(em.Data), em.Data)
	}
	// The model is shown its own arguments within the context budget, with the handle.
	var asked *provider.Message
	for i := range run.Messages {
		if len(run.Messages[i].ToolCalls) > 0 {
			asked = &run.Messages[i]
		}
	}
	if asked == nil {
		t.Fatal("no assistant message with the call in the conversation")
	}
	if shown := asked.ToolCalls[0].Arguments; len(shown) > 2*runrec.DefaultContextBudget || !strings.Contains(string(shown), c.ID) || !json.Valid(shown) {
		t.Fatalf("the model is shown %d bytes of its arguments (%.200s); want them cut to the budget with the call id", len(shown), shown)
	}
}
