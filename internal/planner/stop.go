package planner

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/internal/planner/runrec"
	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// StopHook is a service the planner asks, before each step after the first, whether
// the run goes on: a NATS request on Subject (any language can answer it, like an
// approval) with the last step's [StopSummary], answered by a [StopDecision] within
// Timeout. When it does not answer in time, or answers something unreadable, OnError
// decides: "continue" (the default: a hook is a policy that may end runs early, and its
// outage should not end every run in flight, which still have their limits) or "stop"
// (for a hook that must supervise every step). Subject and timeout follow the rules
// every hook shares ([events.Hook]).
type StopHook = events.Hook

// StopSummary is what a stop hook is asked with: the step that just ended.
type StopSummary struct {
	RunID string `json:"runId"`
	Step  int    `json:"step"`
	// Calls are the step's calls with how they ended.
	Calls []StopCall `json:"calls"`
	// Usage is the step's tokens; Tokens the run's so far (input and output).
	Usage  provider.Usage `json:"usage"`
	Tokens int            `json:"tokens"`
	// RunUsage is the run's so far; Errors its failed calls so far.
	RunUsage provider.Usage `json:"runUsage"`
	Errors   int            `json:"errors"`
	// Cost is the run's cost so far, when the planner has prices (see PriceTable).
	Cost float64 `json:"cost,omitempty"`
}

// StopCall is one call in a [StopSummary].
type StopCall struct {
	CallID string       `json:"callId"`
	Tool   string       `json:"tool"`
	Status string       `json:"status"`
	Error  *tools.Error `json:"error,omitempty"`
}

// StopDecision is a stop hook's answer.
type StopDecision struct {
	// Action is "continue" or "stop".
	Action string `json:"action"`
	Reason string `json:"reason,omitempty"`
}

// Bounds of the stop conditions.
const (
	maxStopConditions = 8
	maxStopPattern    = 512
	// stopMatchBytes is how much of an output the conditions look at.
	stopMatchBytes      = 64 << 10
	hookOnErrorContinue = "continue"
	hookOnErrorStop     = "stop"
)

// validateStop checks a run request's stop conditions and hook.
func validateStop(conds []StopCondition, hook *StopHook) error {
	if len(conds) > maxStopConditions {
		return fmt.Errorf("stopWhen has %d conditions, at most %d", len(conds), maxStopConditions)
	}
	for i, c := range conds {
		if c.Tool == "" && c.OutputContains == "" && c.OutputMatches == "" {
			return fmt.Errorf("stopWhen[%d] is empty: give a tool, outputContains or outputMatches", i)
		}
		if c.Tool != "" && !tools.NamePattern.MatchString(c.Tool) {
			return fmt.Errorf("stopWhen[%d].tool %q is not a tool name", i, c.Tool)
		}
		if len(c.OutputContains) > maxStopPattern || len(c.OutputMatches) > maxStopPattern {
			return fmt.Errorf("stopWhen[%d]: a pattern is at most %d bytes", i, maxStopPattern)
		}
		if c.OutputMatches != "" {
			if _, err := regexp.Compile(c.OutputMatches); err != nil {
				return fmt.Errorf("stopWhen[%d].outputMatches: %v", i, err)
			}
		}
	}
	if hook == nil {
		return nil
	}
	return hook.Check("stopHook", hookOnErrorContinue, hookOnErrorStop)
}

// stopRegexps keeps the compiled stopWhen patterns most recently used, at most
// maxStopRegexps of them: a pattern is matched against every successful result of its
// run, and compiling one costs 4-15 µs for a typical pattern but up to 170 µs for one
// of the 512 bytes allowed (regexp.Compile, 2 cores), against a step's 2-5 ms. The
// patterns are callers' input, so the cache is bounded (the least recently used goes
// first; golang-lru, a library made for exactly this) rather than keyed forever: its
// worst case is maxStopRegexps compiled 512-byte patterns, about 90 KB each.
var stopRegexps = func() *lru.Cache[string, *regexp.Regexp] {
	c, err := lru.New[string, *regexp.Regexp](maxStopRegexps)
	if err != nil {
		panic(err) // only for a size below 1
	}
	return c
}()

// maxStopRegexps bounds stopRegexps.
const maxStopRegexps = 128

// stopRegexp returns pattern compiled, nil when it does not compile (validated at the
// start; a stored run is not trusted blindly).
func stopRegexp(pattern string) *regexp.Regexp {
	if re, ok := stopRegexps.Get(pattern); ok {
		return re
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil
	}
	stopRegexps.Add(pattern, re)
	return re
}

// matchStop checks the call c, whose result just came in, against the run's stop
// conditions, and remembers the first match until the step completes.
func matchStop(r *Run, c *CallRecord) {
	if r.StopMatch != nil || len(r.StopWhen) == 0 || c.Status != string(events.StatusOK) {
		return
	}
	text := outputText(c.Output)
	for i, cond := range r.StopWhen {
		if cond.Tool != "" && cond.Tool != c.Name {
			continue
		}
		if cond.OutputContains != "" && !strings.Contains(text, cond.OutputContains) {
			continue
		}
		if cond.OutputMatches != "" {
			if re := stopRegexp(cond.OutputMatches); re == nil || !re.MatchString(text) {
				continue
			}
		}
		r.StopMatch = &runrec.StopMatch{CallID: c.ID, Detail: fmt.Sprintf("stopWhen[%d]: %s", i, describe(cond, c.Name))}
		return
	}
}

func describe(c StopCondition, tool string) string {
	s := tool + " succeeded"
	if c.OutputContains != "" {
		s += fmt.Sprintf(" with an output containing %q", c.OutputContains)
	}
	if c.OutputMatches != "" {
		s += fmt.Sprintf(" with an output matching %q", c.OutputMatches)
	}
	return s
}

// outputText is the text the conditions match: a JSON string's value, any other output's
// JSON text, at most stopMatchBytes of it.
func outputText(out json.RawMessage) string {
	var s string
	if len(out) > 0 && out[0] == '"' && json.Unmarshal(out, &s) == nil {
	} else {
		s = string(out)
	}
	if len(s) > stopMatchBytes {
		s = s[:stopMatchBytes]
	}
	return s
}

// stopMatched ends the run r, whose step completed, when one of its calls matched a stop
// condition; it reports whether it did.
func stopMatched(r *Run, now time.Time) bool {
	if r.StopMatch == nil {
		return false
	}
	m := r.StopMatch
	r.StopMatch = nil
	r.Answer, r.AnswerCall = "", m.CallID
	r.Finish(TerminationStopCondition, m.Detail, now)
	return true
}

// askStopHook asks the run's stop hook whether the run goes on after its last step, and
// returns a termination when it is to stop.
func (p *Planner) askStopHook(ctx context.Context, r *Run) (Termination, string) {
	h := r.StopHook
	if h == nil || r.Step == 0 {
		return "", ""
	}
	sum := StopSummary{RunID: r.ID, Step: r.Step - 1, Calls: []StopCall{}, RunUsage: r.Usage, Tokens: r.Usage.Total(),
		Errors: r.Errors, Usage: r.StepUsage, Cost: r.Cost}
	for _, c := range r.Calls {
		if c.Step == r.Step-1 {
			sum.Calls = append(sum.Calls, StopCall{CallID: c.ID, Tool: c.Name, Status: c.Status, Error: c.Error})
		}
	}
	hctx, cancel := r.Within(ctx, h.Wait())
	defer cancel()
	dec, err := p.requestStopHook(hctx, *h, sum)
	switch {
	case err != nil && h.OnError == hookOnErrorStop:
		return TerminationStopHook, fmt.Sprintf("the stop hook %s could not be asked after step %d (%v), and its onError is stop", h.Subject, sum.Step, err)
	case err != nil:
		p.log.Warn().Err(err).Str("run_id", r.ID).Str("hook", h.Subject).Msg("stop hook not answered; the run goes on (onError continue)")
		return "", ""
	case dec.Action == "stop":
		reason := dec.Reason
		if reason == "" {
			reason = "no reason given"
		}
		return TerminationStopHook, fmt.Sprintf("the stop hook %s stopped the run after step %d: %s", h.Subject, sum.Step, reason)
	}
	return "", ""
}

func (p *Planner) requestStopHook(ctx context.Context, h StopHook, sum StopSummary) (StopDecision, error) {
	var dec StopDecision
	if err := jsutil.AskHook(ctx, p.nc, h, nil, sum, &dec); err != nil {
		return dec, err
	}
	if dec.Action != "continue" && dec.Action != "stop" {
		return dec, fmt.Errorf(`answer's action must be "continue" or "stop", got %q`, dec.Action)
	}
	return dec, nil
}
