package main

import (
	"context"
	"math"
	"slices"
	"sync"
	"time"
)

// runner starts one run of the agent loop on a system and returns once the client
// has its answer.
type runner interface {
	// Run makes one run of steps tool steps (a model turn that calls echo, the call,
	// and so on, then a model turn that answers) and checks its answer: an error is a
	// run that failed, was refused or answered wrongly.
	Run(ctx context.Context, steps int) error
	// Retries is how many requests the client has sent again so far because the
	// system asked it to (toolfleet's 429 + Retry-After); not errors.
	Retries() int64
	// Close releases the client's connections.
	Close() error
}

// runTimeout bounds one run: a run still going after it is an error.
const runTimeout = time.Minute

// cellResult is what one cell of a turn measured.
type cellResult struct {
	Runs     int             // completed runs
	Errors   int             // failed runs, warm-up included
	Retries  int64           // requests sent again on the system's request, warm-up included
	Elapsed  time.Duration   // from the first start to the last answer
	Lat      []time.Duration // each completed run's latency at the client, sorted
	CPU      time.Duration   // CPU of every process of the system over Elapsed
	FirstErr error           // the first error, to show
}

// rate is completed runs per second.
func (r cellResult) rate() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Runs) / r.Elapsed.Seconds()
}

// cpuPerRun is the system's CPU time per completed run.
func (r cellResult) cpuPerRun() time.Duration {
	if r.Runs == 0 {
		return 0
	}
	return r.CPU / time.Duration(r.Runs)
}

// quantile is the nearest-rank q-quantile of the latencies (0 when there are none).
func (r cellResult) quantile(q float64) time.Duration {
	return quantile(r.Lat, q)
}

// quantile is the nearest-rank q-quantile of sorted: the smallest value that at least
// q of the values are not above.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// drive keeps inFlight runs of steps going for d (a closed loop: each worker starts
// its next run when its last one is answered), then waits for the runs under way.
func drive(ctx context.Context, r runner, steps, inFlight int, d time.Duration) cellResult {
	var (
		mu  sync.Mutex
		res cellResult
		wg  sync.WaitGroup
	)
	retries := r.Retries()
	start := time.Now()
	deadline := start.Add(d)
	for range inFlight {
		wg.Go(func() {
			for ctx.Err() == nil && time.Now().Before(deadline) {
				rctx, cancel := context.WithTimeout(ctx, runTimeout)
				t0 := time.Now()
				err := r.Run(rctx, steps)
				lat := time.Since(t0)
				cancel()
				mu.Lock()
				if err != nil {
					res.Errors++
					if res.FirstErr == nil {
						res.FirstErr = err
					}
				} else {
					res.Runs++
					res.Lat = append(res.Lat, lat)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	res.Retries = r.Retries() - retries
	slices.Sort(res.Lat)
	return res
}

// measure is drive after a warm-up of the same load, with the CPU of procs over the
// measured part. The warm-up's errors and retries count; its runs and times do not.
func measure(ctx context.Context, r runner, procs []*proc, steps, inFlight int, warmup, d time.Duration) (cellResult, error) {
	var warm cellResult
	if warmup > 0 {
		warm = drive(ctx, r, steps, inFlight, warmup)
	}
	cpu0, err := cpuOf(procs)
	if err != nil {
		return cellResult{}, err
	}
	res := drive(ctx, r, steps, inFlight, d)
	cpu1, err := cpuOf(procs)
	if err != nil {
		return cellResult{}, err
	}
	res.CPU = cpu1 - cpu0
	res.Errors += warm.Errors
	res.Retries += warm.Retries
	if res.FirstErr == nil {
		res.FirstErr = warm.FirstErr
	}
	return res, ctx.Err()
}
