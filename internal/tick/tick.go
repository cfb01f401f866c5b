// Package tick runs periodic work: the sweeps, janitors and refreshes of the fleet's
// parts share this one loop (Every), and the in-progress acks and lease renewals kept
// up while one piece of work runs share one timer (Repeat), so each of them stops the
// same way — only once the work in progress has returned. The waits between retries
// share Sleep, and grow by Backoff.
package tick

import (
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"time"
)

// Sleep waits d, or until ctx ends: it reports whether the whole wait passed (false:
// ctx ended first).
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Every calls f every d until ctx ends, then returns. The first call is d after the
// start, not at once; a call that takes longer than d delays the next one rather than
// piling calls up. f gets ctx and should return soon after ctx ends. Every blocks: run it
// in a goroutine whose owner waits for it (an errgroup, a WaitGroup).
func Every(ctx context.Context, d time.Duration, f func(context.Context)) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if ctx.Err() != nil {
				return
			}
			f(ctx)
		}
	}
}

// Repeat calls f every d, from a timer: no goroutine waits in between, so work that is
// usually over before d (a call, a model request) pays for a timer only. It returns
// stop, which returns once a call of f in progress has returned; f is not called after
// it. The first call is d after the start; a call that takes longer than d delays the
// next one.
func Repeat(d time.Duration, f func()) (stop func()) {
	r := &repeater{f: f, d: d}
	r.mu.Lock() // r.t is set before the first call can read it
	defer r.mu.Unlock()
	r.t = time.AfterFunc(d, r.fire)
	return r.stop
}

type repeater struct {
	mu      sync.Mutex // held while f runs
	t       *time.Timer
	f       func()
	d       time.Duration
	stopped bool
}

func (r *repeater) fire() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return
	}
	r.f()
	r.t.Reset(r.d)
}

func (r *repeater) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = true
	r.t.Stop()
}

// Backoff is the doubling wait between the tries of something that may yet pass: First,
// then twice the wait before, never more than Max (zero: no cap). Jitter, when set
// (0.2: ±20%), moves each wait by a uniform random part of itself, so that parts that
// failed together do not all try again together. The zero Backoff waits 0 each time;
// a Backoff is not safe for concurrent use.
type Backoff struct {
	First, Max time.Duration
	Jitter     float64

	next time.Duration // the wait Next returns, before the cap and jitter; 0: First
}

// Next returns the wait before the next try, and doubles the one after it.
func (b *Backoff) Next() time.Duration {
	if b.next <= 0 {
		b.next = b.First
	}
	d := b.next
	if b.Max > 0 {
		d = min(d, b.Max)
	}
	if b.next < math.MaxInt64/2 && (b.Max <= 0 || b.next < b.Max) {
		b.next *= 2
	}
	if b.Jitter > 0 {
		d = time.Duration(float64(d) * (1 - b.Jitter + 2*b.Jitter*rand.Float64()))
	}
	return d
}

// Sleep waits [Backoff.Next] within ctx ([Sleep]): it reports whether the whole wait
// passed (false: ctx ended first).
func (b *Backoff) Sleep(ctx context.Context) bool { return Sleep(ctx, b.Next()) }

// Reset makes the next wait First again (after a success, before the next failure).
func (b *Backoff) Reset() { b.next = 0 }
