package tick

import (
	"context"
	"math"
	"slices"
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

// A Backoff doubles from First up to Max, starts over after Reset, and with Jitter
// stays within ±Jitter of the wait it moves.
func TestBackoff(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	waits := func(b *Backoff, n int) []time.Duration {
		var out []time.Duration
		for range n {
			out = append(out, b.Next())
		}
		return out
	}
	for _, tt := range []struct {
		name string
		b    Backoff
		want []time.Duration
	}{
		{"capped", Backoff{First: 100 * ms, Max: time.Second}, []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, time.Second, time.Second}},
		{"uncapped", Backoff{First: 10 * ms}, []time.Duration{10 * ms, 20 * ms, 40 * ms, 80 * ms, 160 * ms}},
		{"first over the cap", Backoff{First: 3 * time.Second, Max: time.Second}, []time.Duration{time.Second, time.Second}},
		{"zero", Backoff{}, []time.Duration{0, 0}},
	} {
		b := tt.b
		if got := waits(&b, len(tt.want)); !slices.Equal(got, tt.want) {
			t.Errorf("%s: waits %v, want %v", tt.name, got, tt.want)
		}
	}
	b := Backoff{First: ms, Max: 4 * ms}
	waits(&b, 3)
	b.Reset()
	if got := waits(&b, 2); !slices.Equal(got, []time.Duration{ms, 2 * ms}) {
		t.Errorf("after Reset: %v, want [1ms 2ms]", got)
	}
	b = Backoff{First: 100 * ms, Max: time.Second, Jitter: 0.2}
	for n, base := range []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, time.Second, time.Second} {
		if d := b.Next(); d < base*8/10 || d > base*12/10 {
			t.Errorf("jittered wait %d: %v, outside %v ±20%%", n+1, d, base)
		}
	}
	huge := Backoff{First: time.Duration(math.MaxInt64 / 4)}
	if got := waits(&huge, 4); got[3] <= 0 {
		t.Errorf("uncapped doubling overflowed: %v", got)
	}
}

// Backoff.Sleep returns false at once when its context has ended.
func TestBackoffSleepEndsWithContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b := Backoff{First: time.Hour}
	if b.Sleep(ctx) {
		t.Fatal("Sleep of an hour passed under an ended context")
	}
}
