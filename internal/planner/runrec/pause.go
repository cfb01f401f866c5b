package runrec

import (
	"fmt"
	"slices"
	"time"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// maxPauseTools bounds PauseOptions.AfterTools.
const maxPauseTools = 64

// PauseOptions says when a run pauses by itself: after every step, or after a step
// that called one of AfterTools (the planner's StartRequest.Pause; a resume may change them).
type PauseOptions struct {
	AfterEveryStep bool     `json:"afterEveryStep,omitempty"`
	AfterTools     []string `json:"afterTools,omitempty"`
}

// Clone returns a copy of o.
func (o *PauseOptions) Clone() *PauseOptions {
	if o == nil {
		return nil
	}
	return &PauseOptions{AfterEveryStep: o.AfterEveryStep, AfterTools: slices.Clone(o.AfterTools)}
}

// Empty reports whether o pauses the run at no step.
func (o *PauseOptions) Empty() bool { return o == nil || !o.AfterEveryStep && len(o.AfterTools) == 0 }

// Validate refuses options a run may not have, saying which and why.
func (o *PauseOptions) Validate() error {
	if o == nil {
		return nil
	}
	if len(o.AfterTools) > maxPauseTools {
		return fmt.Errorf("pause.afterTools names %d tools, at most %d", len(o.AfterTools), maxPauseTools)
	}
	for i, n := range o.AfterTools {
		if !tools.NamePattern.MatchString(n) {
			return fmt.Errorf("pause.afterTools[%d]: %q is not a tool name", i, n)
		}
	}
	return nil
}

// RunPause says why and since when a run is paused (Run.Paused).
type RunPause struct {
	At time.Time `json:"at"`
	// Step is the step the run goes on with when it is resumed.
	Step int `json:"step"`
	// Reason: "after_step" (afterEveryStep), "after_tool" (Tool named in afterTools) or
	// "requested" (a pause request, By and Why from it).
	Reason string `json:"reason"`
	Tool   string `json:"tool,omitempty"`
	By     string `json:"by,omitempty"`
	Why    string `json:"why,omitempty"`
}

// PauseRequest is the optional body of POST /v1/runs/{id}/pause, and a pause request
// waiting for its run's next step boundary (Run.PauseRequested).
type PauseRequest struct {
	By     string    `json:"by,omitempty"`
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at,omitzero"`
}
