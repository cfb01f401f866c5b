package planner

import (
	"sync"
	"time"
)

// The recent calls of each tool (GET /v1/tools' "recent"): the calls whose results
// were stored within the last recentWindow, whoever made them, counted by every
// replica from the results streams (resultcount.go), so every replica answers the same
// whichever served the calls. Calls the planner answered itself (refusals, nested
// runs) have no result there and are not counted.

const (
	recentWindow = 5 * time.Minute
	// recentBucket is the granularity of the window: it slides by this much.
	recentBucket = 10 * time.Second
	nBuckets     = int(recentWindow / recentBucket)
)

// RecentCalls is what a tool's calls did within Window.
type RecentCalls struct {
	Window string `json:"window"`
	Calls  int    `json:"calls"`
	Errors int    `json:"errors"`
}

type statBucket struct {
	slot           int64 // the bucket's start, in recentBucket units since the epoch
	calls, errored int
}

type toolStat struct {
	buckets [nBuckets]statBucket
	// executors are the replicas that answered its calls, with when they last did.
	executors map[string]time.Time
}

type toolStats struct {
	mu    sync.Mutex
	tools map[string]*toolStat
}

func newToolStats() *toolStats { return &toolStats{tools: map[string]*toolStat{}} }

// add counts a call of tool that ended at at (failed or not), answered by executor.
func (s *toolStats) add(tool string, at time.Time, failed bool, executor string, now time.Time) {
	if now.Sub(at) >= recentWindow {
		return
	}
	slot := at.UnixNano() / int64(recentBucket)
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tools[tool]
	if t == nil {
		t = &toolStat{executors: map[string]time.Time{}}
		s.tools[tool] = t
	}
	b := &t.buckets[int(slot%int64(nBuckets))]
	if b.slot != slot {
		*b = statBucket{slot: slot}
	}
	b.calls++
	if failed {
		b.errored++
	}
	if executor != "" && at.After(t.executors[executor]) {
		t.executors[executor] = at
	}
}

// recent returns what tool's calls did within the window ending now, and the executors
// that answered them.
func (s *toolStats) recent(tool string, now time.Time) (RecentCalls, []string) {
	out := RecentCalls{Window: "5m"}
	executors := []string{}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tools[tool]
	if t == nil {
		return out, executors
	}
	oldest := now.Add(-recentWindow).UnixNano() / int64(recentBucket)
	for _, b := range t.buckets {
		if b.slot > oldest {
			out.Calls += b.calls
			out.Errors += b.errored
		}
	}
	for id, at := range t.executors {
		if now.Sub(at) < recentWindow {
			executors = append(executors, id)
		} else {
			delete(t.executors, id)
		}
	}
	return out, executors
}
