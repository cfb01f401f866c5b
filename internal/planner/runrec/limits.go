package runrec

import (
	"fmt"
	"math"
	"time"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// LoopAction says what the planner does when it sees the model repeat itself.
type LoopAction string

const (
	// LoopWarn records a warning on the run and goes on.
	LoopWarn LoopAction = "warn"
	// LoopStop ends the run with TerminationLoopDetected.
	LoopStop LoopAction = "stop"
	// LoopInject does not run the repeated call; it answers it with a warning that tells
	// the model it is looping, so the model can change course.
	LoopInject LoopAction = "inject"
)

// Limits bound one run. Zero fields take the defaults below; out-of-range values are
// refused by Validate so that a bad request gets a 400, not a run that never ends.
type Limits struct {
	// MaxSteps bounds the model calls of a run's turn, its nested runs' included.
	// Default 10, at most 1000.
	MaxSteps int `json:"maxSteps,omitempty"`
	// Timeout bounds the run's wall-clock time. Default 5m, at most 24h. A nested run
	// ends by its parent's deadline at the latest.
	Timeout tools.Duration `json:"timeout,omitempty"`
	// TokenBudget bounds input+output tokens over all steps of the run and its nested
	// runs: each answer's most (its input at its bound, its capped max_tokens) is
	// reserved before the model is asked (package budget). 0 means none.
	TokenBudget int `json:"tokenBudget,omitempty"`
	// CostBudget bounds the cost of the run and its nested runs (Run.Tree, in the
	// planner's price table's currency): each answer's most is reserved before the
	// model is asked, its max_tokens capped to fit (package budget), and a step whose calls
	// would exceed it is not dispatched. 0 means none; a budget needs a price for the
	// run's model.
	CostBudget float64 `json:"costBudget,omitempty"`
	// ErrorThreshold ends the run when this many tool calls have failed. Default 5. The
	// first invalid call of each tool is a free repair and does not count.
	ErrorThreshold int `json:"errorThreshold,omitempty"`
	// LoopThreshold is how many identical calls (same tool, same arguments) in a row make a
	// loop. Default 3, at least 2.
	LoopThreshold int `json:"loopThreshold,omitempty"`
	// LoopAction is what to do on a loop. Default inject.
	LoopAction LoopAction `json:"loopAction,omitempty"`
	// MaxDepth bounds nested runs (a run started by a tool of another run). Default 3.
	// A nested run's budgets are what its parent has left when it starts (package budget).
	MaxDepth int `json:"maxDepth,omitempty"`
	// ContextBudget bounds, in bytes, each tool output as the model sees it. An output
	// over it is replaced, in the model's context only, by a JSON object holding its
	// first ContextBudget bytes ("head"), its size, the call id as a handle and a note
	// saying so; the full output stays in the call's result (the results stream, GET
	// /v1/runs/{id}). A model's own call arguments over it are shown so too when the
	// conversation is replayed to it. Default 64 KiB, at most 16 MiB.
	ContextBudget int `json:"contextBudget,omitempty"`
}

// Defaults.
const (
	DefaultMaxSteps       = 10
	DefaultTimeout        = 5 * time.Minute
	DefaultErrorThreshold = 5
	DefaultLoopThreshold  = 3
	DefaultLoopAction     = LoopInject
	DefaultMaxDepth       = 3
	DefaultContextBudget  = 64 << 10
	// MaxMaxSteps is the largest MaxSteps a run may ask for.
	MaxMaxSteps = 1000
)

// WithDefaults returns l with zero fields set to their defaults.
func (l Limits) WithDefaults() Limits {
	if l.MaxSteps == 0 {
		l.MaxSteps = DefaultMaxSteps
	}
	if l.Timeout == 0 {
		l.Timeout = tools.Duration(DefaultTimeout)
	}
	if l.ErrorThreshold == 0 {
		l.ErrorThreshold = DefaultErrorThreshold
	}
	if l.LoopThreshold == 0 {
		l.LoopThreshold = DefaultLoopThreshold
	}
	if l.LoopAction == "" {
		l.LoopAction = DefaultLoopAction
	}
	if l.MaxDepth == 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	if l.ContextBudget == 0 {
		l.ContextBudget = DefaultContextBudget
	}
	return l
}

// ContextBytes is ContextBudget, or its default for a run stored without one.
func (l Limits) ContextBytes() int {
	if l.ContextBudget <= 0 {
		return DefaultContextBudget
	}
	return l.ContextBudget
}

// Validate refuses limits out of range, saying which and why.
func (l Limits) Validate() error {
	switch {
	case l.MaxSteps < 0 || l.MaxSteps > MaxMaxSteps:
		return fmt.Errorf("limits.maxSteps must be between 1 and %d, got %d", MaxMaxSteps, l.MaxSteps)
	case l.Timeout < 0 || l.Timeout.D() > 24*time.Hour:
		return fmt.Errorf("limits.timeout must be between 1ms and 24h, got %s", l.Timeout.D())
	case l.TokenBudget < 0:
		return fmt.Errorf("limits.tokenBudget must not be negative, got %d", l.TokenBudget)
	case l.CostBudget < 0 || math.IsNaN(l.CostBudget) || math.IsInf(l.CostBudget, 0):
		return fmt.Errorf("limits.costBudget must be a non-negative number, got %g", l.CostBudget)
	case l.ErrorThreshold < 0 || l.ErrorThreshold > 1000:
		return fmt.Errorf("limits.errorThreshold must be between 1 and 1000, got %d", l.ErrorThreshold)
	case l.LoopThreshold != 0 && (l.LoopThreshold < 2 || l.LoopThreshold > 100):
		return fmt.Errorf("limits.loopThreshold must be between 2 and 100, got %d", l.LoopThreshold)
	case l.MaxDepth < 0 || l.MaxDepth > 10:
		return fmt.Errorf("limits.maxDepth must be between 1 and 10, got %d", l.MaxDepth)
	case l.ContextBudget < 0 || l.ContextBudget > 16<<20:
		return fmt.Errorf("limits.contextBudget must be between 1 and %d bytes, got %d", 16<<20, l.ContextBudget)
	}
	switch l.LoopAction {
	case "", LoopWarn, LoopStop, LoopInject:
	default:
		return fmt.Errorf("limits.loopAction must be warn, stop or inject, got %q", l.LoopAction)
	}
	return nil
}
