package tools

import (
	"math"
	"time"
)

// RateLimit caps how often a tool's calls start across the whole fleet: PerSecond on
// average, with up to Burst calls at once after a quiet spell. Executors share the count
// through JetStream (see pkg/executor, "Limits"), so two replicas together start no more
// than one would.
type RateLimit struct {
	// PerSecond is the sustained rate, in calls per second across every replica
	// (fractions allowed: 0.5 is one call every two seconds). Must be positive.
	PerSecond float64 `json:"perSecond"`
	// Burst is how many calls may start at once after a quiet spell; 0 means 1.
	Burst int `json:"burst,omitempty"`
}

// Limits on what a definition may declare: beyond them a limit is a typo more often than
// a wish, and a wait beyond MaxLimitWait would hold a call in an executor for too long.
const (
	MaxRatePerSecond   = 1e6
	MaxRateBurst       = 1e6
	MaxInFlightLimit   = 10000 // the leases of one tenant are one value of at most 1 MiB
	DefaultLimitWait   = 30 * time.Second
	MaxLimitWait       = 10 * time.Minute
	minRatePerSecondEq = 1.0 / 3600 // one call an hour
)

// HasLimits reports whether d declares a limit that executors must share across the
// fleet (RateLimit or MaxInFlightPerTenant). Tools without one pay nothing for limits.
func (d Definition) HasLimits() bool { return d.RateLimit != nil || d.MaxInFlightPerTenant > 0 }

// EffectiveLimitWait is how long a call over one of d's limits may wait: LimitWait, or
// [DefaultLimitWait] when it is zero.
func (d Definition) EffectiveLimitWait() time.Duration {
	if d.LimitWait == 0 {
		return DefaultLimitWait
	}
	return d.LimitWait.D()
}

// EffectiveBurst is the rate limit's burst, 1 when it is zero.
func (r RateLimit) EffectiveBurst() int { return max(r.Burst, 1) }

// checkLimits refuses limits that are out of range, with a message that says the range.
func checkLimits(def Definition) error {
	if r := def.RateLimit; r != nil {
		if math.IsNaN(r.PerSecond) || r.PerSecond < minRatePerSecondEq || r.PerSecond > MaxRatePerSecond {
			return Errorf(CodeInvalidDefinition,
				"tool %q: rateLimit.perSecond must be between %g (one call an hour) and %g calls per second, got %g",
				def.Name, minRatePerSecondEq, float64(MaxRatePerSecond), r.PerSecond)
		}
		if r.Burst < 0 || r.Burst > MaxRateBurst {
			return Errorf(CodeInvalidDefinition, "tool %q: rateLimit.burst must be 0 to %d (0 means 1), got %d",
				def.Name, int(MaxRateBurst), r.Burst)
		}
	}
	if def.MaxInFlightPerTenant < 0 || def.MaxInFlightPerTenant > MaxInFlightLimit {
		return Errorf(CodeInvalidDefinition, "tool %q: maxInFlightPerTenant must be 0 (no cap) to %d, got %d",
			def.Name, int(MaxInFlightLimit), def.MaxInFlightPerTenant)
	}
	if def.LimitWait < 0 || def.LimitWait.D() > MaxLimitWait {
		return Errorf(CodeInvalidDefinition, "tool %q: limitWait must be 0 (30s) to %s, got %s",
			def.Name, MaxLimitWait, def.LimitWait.D())
	}
	return nil
}
