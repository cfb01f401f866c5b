package tick

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Every calls f repeatedly and returns once ctx ends, not calling f after that.
func TestEveryStopsWithContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	var calls atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		Every(ctx, time.Millisecond, func(context.Context) {
			if calls.Add(1) == 3 {
				cancel()
			}
		})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Every did not return after its context ended")
	}
	if n := calls.Load(); n != 3 {
		t.Fatalf("f was called %d times, want 3 (none after the context ended)", n)
	}
}

// A context that has already ended returns at once, without a call.
func TestEveryEndedContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	Every(ctx, time.Millisecond, func(context.Context) { t.Error("f called after the context ended") })
}

// Repeat keeps calling until stopped; stop returns once a call in progress has
// returned, and nothing is called after.
func TestRepeatStops(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	running, release := make(chan struct{}), make(chan struct{})
	stop := Repeat(time.Millisecond, func() {
		if calls.Add(1) == 3 {
			close(running)
			<-release // a call in progress when stop is called
		}
	})
	select {
	case <-running:
	case <-time.After(10 * time.Second):
		t.Fatal("not called three times within 10s")
	}
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	select {
	case <-stopped:
		t.Fatal("stop returned while a call was in progress")
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	<-stopped
	after := calls.Load()
	time.Sleep(20 * time.Millisecond) // many periods: a call now would be one too many
	if n := calls.Load(); n != after || n != 3 {
		t.Fatalf("%d calls, %d of them after stop returned; want 3, none after", n, n-after)
	}
}

// Sleep waits the whole time, or returns false as soon as its context ends.
func TestSleep(t *testing.T) {
	start := time.Now()
	if !Sleep(context.Background(), 20*time.Millisecond) || time.Since(start) < 20*time.Millisecond {
		t.Fatalf("a 20ms sleep returned after %s", time.Since(start))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start = time.Now()
	if Sleep(ctx, time.Minute) || time.Since(start) > 10*time.Second {
		t.Fatalf("a sleep whose context ended returned true, or after %s", time.Since(start))
	}
}
