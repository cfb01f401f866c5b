package plannertest

import (
	"sync"
	"time"
)

// Clock is a clock a test moves (a planner's Config.Now): it starts at the time it is
// made and goes forward only when the test says, so that a run's time limit runs out
// when the test wants it to, and never because the machine was slow.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a Clock at the time now.
func NewClock() *Clock { return &Clock{now: time.Now()} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}
