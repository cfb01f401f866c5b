// Package tick runs periodic work: the sweeps, janitors and refreshes of the fleet's
// parts share this one loop (Every), and the in-progress acks and lease renewals kept
// up while one piece of work runs share one timer (Repeat), so each of them stops the
// same way — only once the work in progress has returned. The waits between retries
// share Sleep.
package tick

import (
	"context"
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
