package executor_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/pkg/client"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// An output larger than the claim-check threshold goes by reference: the result carries
// a PayloadRef into the caller's tenant's bucket instead of the output, the stored bytes
// are exactly the output, and pkg/client hands its caller the output itself. An output
// over the payload limit is refused output_too_large.
func TestLargeOutputsGoByReference(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.ClaimCheckBytes, b.cfg.PayloadMaxBytes = 64<<10, 3<<20
	reg := tools.NewRegistry()
	err := reg.AddFunc(tools.Definition{Name: "big", Safe: true,
		Parameters: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)},
		func(_ context.Context, args json.RawMessage) (any, error) {
			var a struct{ N int }
			_ = json.Unmarshal(args, &a)
			return strings.Repeat("x", a.N), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	b.start(t, reg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	for _, tt := range []struct {
		caller events.Identity
		bucket string // the tenant of the payload
	}{{events.Identity{}, ""}, {events.Identity{Tenant: "acme", Role: "user"}, "acme"}} {
		var opts []client.Option
		if !tt.caller.IsZero() {
			opts = append(opts, client.WithIdentity(tt.caller))
		}
		c, err := client.New(b.nc, opts...)
		if err != nil {
			t.Fatal(err)
		}
		id := "big-" + tt.bucket + "x"
		res, err := c.Call(ctx, client.Request{Tool: "big", ID: id, Arguments: json.RawMessage(`{"n":2000000}`)})
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(strings.Repeat("x", 2000000))
		if !bytes.Equal(res.Output, want) || res.OutputRef == nil || res.OutputRef.Tenant != tt.bucket || res.OutputRef.Chunks < 4 || res.OutputRef.Size != int64(len(want)) {
			t.Fatalf("%s: output of %d bytes, ref %+v; want the whole output, stored for tenant %q in chunks", id, len(res.Output), res.OutputRef, tt.bucket)
		}
		// The stored result itself is small and holds only the reference.
		stored := b.results.one(t, id)
		if stored.Output != nil || stored.OutputRef == nil {
			t.Fatalf("%s: stored result has %d output bytes, ref %+v", id, len(stored.Output), stored.OutputRef)
		}
		b.results.mu.Lock()
		size := len(b.results.raw[id][0].Data)
		b.results.mu.Unlock()
		if size > 4<<10 {
			t.Fatalf("%s: the result message is %d bytes", id, size)
		}
	}

	// A small output stays inline.
	c, _ := client.New(b.nc)
	if res, err := c.Call(ctx, client.Request{Tool: "big", Arguments: json.RawMessage(`{"n":10}`)}); err != nil || res.OutputRef != nil || string(res.Output) != `"xxxxxxxxxx"` {
		t.Fatalf("small output: %+v, %v", res, err)
	}
	// Over the payload limit: refused, clearly.
	res, err := c.Call(ctx, client.Request{Tool: "big", Arguments: json.RawMessage(`{"n":4000000}`)})
	if !errors.Is(err, &tools.Error{Code: tools.CodeOutputTooLarge}) || !strings.Contains(res.Error.Message, "payloadMaxBytes") {
		t.Fatalf("output over the payload limit: %+v, %v", res, err)
	}
}
