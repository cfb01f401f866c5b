package planner

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// every keeps calling until stopped; stop ends the context of a call in progress and
// returns once it has returned, and nothing is called after.
func TestEveryStops(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	running := make(chan struct{})
	stop := every(time.Millisecond, func(ctx context.Context) {
		if calls.Add(1) == 3 {
			close(running)
			<-ctx.Done() // a call in progress when stop is called
		}
	})
	select {
	case <-running:
	case <-time.After(10 * time.Second):
		t.Fatal("not called three times within 10s")
	}
	stop()
	after := calls.Load()
	time.Sleep(20 * time.Millisecond) // many periods: a call now would be one too many
	if n := calls.Load(); n != after || n != 3 {
		t.Fatalf("%d calls, %d of them after stop returned; want 3, none after", n, n-after)
	}
}
