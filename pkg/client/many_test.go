package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/pkg/client"
)

// A long-lived client makes many calls: more than the server's consumers per stream
// (1,000 by default) within minutes. Each call's wait must leave nothing behind on the
// server that outlives it for long, or the calls after the thousandth fail.
func TestManyCallsLeaveNoConsumersBehind(t *testing.T) {
	if testing.Short() {
		t.Skip("makes 1,200 calls")
	}
	t.Parallel()
	f, ctx := serveTool(t, "echo", func(_ context.Context, args json.RawMessage) (any, error) { return args, nil }, 2*time.Minute)
	c, err := client.New(f.NC)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1200 {
		args := json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))
		res, err := c.Call(ctx, client.Request{Tool: "echo", Arguments: args})
		if err != nil || string(res.Output) != string(args) {
			t.Fatalf("call %d: %s, %v", i, res.Output, err)
		}
	}
}
