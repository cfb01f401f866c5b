package planner

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/toolfleet/toolfleet/internal/jsutil"
)

// maxPendingPublishes bounds the planner's unacknowledged asynchronous publishes (its
// JetStream context's WithPublishAsyncMaxPending; nats.go's default, made explicit). A
// server that keeps up acknowledges within a millisecond or two, so the planner's own
// load never comes near it (a few dozen at hundreds of runs a second); one that falls
// behind fills it, and then the planner waits for room. A smaller window (1024) bounded
// the queue in the server more tightly but left its disk idler: under SyncAlways, 4000
// gave about 1.1x the runs per second of 1024 (BenchmarkSlowServerRuns, 1,500 runs at 64
// in flight, four alternating pairs on 2 shared cores: medians 85 and 77 runs/s).
const maxPendingPublishes = 4000

// retryAfter is what a refused start is told to wait before trying again.
const retryAfter = time.Second

// admission decides whether a new run may start (see Backpressure in the package doc):
// it counts the runs being started and reads how long the planner's writes have waited
// for room.
type admission struct {
	maxStarting int64
	maxStall    time.Duration
	win         *jsutil.Window
	m           *metrics
	starting    atomic.Int64
}

// admit takes a place for a new run, or refuses it with a 429 [APIError]: release gives
// the place back once the run is stored (or failed to be).
func (a *admission) admit() (release func(), err error) {
	if full := a.win.Full(); full > a.maxStall {
		a.m.runRefused("stall")
		return nil, busy(fmt.Sprintf("the planner is saturated: JetStream is acknowledging its writes more slowly than they come (writes have waited for room for %s); no run was started, try again after %s",
			full.Round(time.Millisecond), retryAfter))
	}
	if n := a.starting.Add(1); n > a.maxStarting {
		a.starting.Add(-1)
		a.m.runRefused("starting")
		return nil, busy(fmt.Sprintf("the planner is saturated: it is starting as many runs as it may at once (%d); no run was started, try again after %s",
			a.maxStarting, retryAfter))
	}
	return func() { a.starting.Add(-1) }, nil
}

// busy is the refusal of a new run.
func busy(msg string) *APIError {
	return &APIError{Status: http.StatusTooManyRequests, Message: msg, RetryAfter: int(retryAfter / time.Second)}
}
