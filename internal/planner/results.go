package planner

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// handleResult records a tool result in its run and, when it was the last result of the
// step, feeds the step's results to the conversation and asks for the next step. Results
// of calls the planner did not make, and repeated results, are acknowledged and ignored.
func (p *Planner) handleResult(ctx context.Context, m jetstream.Msg) {
	_, res, err := events.DecodeResult(m)
	if err != nil {
		p.log.Warn().Err(err).Str("subject", m.Subject()).Msg("ignoring a result that cannot be read")
		p.ack(m)
		return
	}
	if err := p.recordResult(ctx, res); err != nil {
		if ctx.Err() != nil {
			_ = m.Nak()
			return
		}
		p.log.Error().Err(err).Str("run_id", res.RunID).Str("call_id", res.CallID).Msg("recording a result failed; it will be retried")
		_ = m.NakWithDelay(time.Second)
		return
	}
	p.ack(m)
}

func (p *Planner) recordResult(ctx context.Context, res events.Result) error {
	now := p.cfg.Now()
	run, err := p.runs.update(ctx, res.RunID, func(r *Run) (bool, error) {
		c := r.call(res.CallID)
		if c == nil || c.Done() {
			return false, nil
		}
		c.Status, c.Output, c.Error = string(res.Status), res.Output, res.Error
		c.Attempts, c.Executor, c.Validated = res.Attempts, res.Executor, res.Validated
		finished := res.FinishedAt
		if finished.IsZero() {
			finished = now
		}
		c.FinishedAt = &finished
		c.DurationMS = finished.Sub(c.CalledAt).Milliseconds()
		if res.Status != events.StatusOK {
			r.Errors++
			if len(c.Output) == 0 && c.Error != nil {
				c.Output = c.Error.ForModel()
			}
		}
		// Announced before the change is stored: whatever the change leads to (the next
		// step, the end of the run) is announced after it. A repeat is deduplicated.
		what := "tool_result"
		if c.Failed() {
			what = "tool_error"
		}
		p.emit(ctx, r, what, c.Step, c.ID, c)
		if r.Status == StatusRunning && r.stepComplete() {
			p.completeStep(r, now)
		}
		return true, nil
	})
	if errors.Is(err, errRunNotFound) {
		return nil // not a planner run
	}
	if err != nil {
		return err
	}
	return p.afterChange(ctx, run)
}

// stepComplete reports whether every call of the current step has its result.
func (r *Run) stepComplete() bool {
	calls := r.stepCalls()
	if len(calls) == 0 {
		return false
	}
	for _, c := range calls {
		if !c.Done() {
			return false
		}
	}
	return true
}

// completeStep feeds the finished step's results to the conversation, in the order of the
// model's calls, and moves the run to the next step, unless a stop condition ends it.
func (p *Planner) completeStep(r *Run, now time.Time) {
	calls := r.stepCalls()
	msg := provider.Message{Role: provider.RoleTool}
	for _, c := range calls {
		content := c.Output
		if len(content) == 0 {
			content = json.RawMessage("null")
		}
		msg.ToolResults = append(msg.ToolResults, provider.ToolResult{
			CallID: c.ModelCallID, Name: c.Name, Content: content, IsError: c.Failed()})
	}
	r.Messages = append(r.Messages, msg)
	for _, c := range calls {
		if c.Status == string(events.StatusOK) && p.cat.isFinal(c.Name) {
			r.Answer = string(c.Output)
			r.finish(TerminationFinalTool, c.Name+" is a final tool", now)
			return
		}
	}
	if r.Errors >= r.Limits.ErrorThreshold {
		r.finish(TerminationErrorThreshold, "too many tool calls failed", now)
		return
	}
	r.Step++
}

// afterDone announces the end of a run and, for a nested run, answers the parent's call.
// It runs every time a finished run is seen, and is idempotent: both messages carry ids
// that JetStream deduplicates.
func (p *Planner) afterDone(ctx context.Context, run *Run) error {
	p.forget(run.ID)
	p.emit(ctx, run, "done", run.Step, "", map[string]any{
		"termination": run.Termination, "detail": run.Detail, "answer": run.Answer})
	if run.ParentID == "" {
		return nil
	}
	return p.answerParent(ctx, run)
}

// allows reports whether the run may call name.
func (r *Run) allows(name string) bool {
	return r.Tools == nil || slices.Contains(r.Tools, name)
}

// toolNames returns the tools the run may call, given the catalog's names.
func (r *Run) toolNames(catalog []string) []string {
	if r.Tools != nil {
		return r.Tools
	}
	return catalog
}

func (r *Run) repaired(tool string) bool { return slices.Contains(r.Repaired, tool) }

// handleApprovalRequest marks a call of a planner run as waiting for approval and tells
// the run's watchers, who can answer through the API or over NATS.
func (p *Planner) handleApprovalRequest(ctx context.Context, m jetstream.Msg) {
	_, req, err := events.DecodeApprovalRequest(m)
	if err != nil {
		p.log.Warn().Err(err).Str("subject", m.Subject()).Msg("ignoring an approval request that cannot be read")
		p.ack(m)
		return
	}
	run, err := p.runs.update(ctx, req.RunID, func(r *Run) (bool, error) {
		c := r.call(req.CallID)
		if c == nil || c.Done() || c.Status == string(CallAwaitingApproval) {
			return false, nil
		}
		c.Status = string(CallAwaitingApproval)
		return true, nil
	})
	if errors.Is(err, errRunNotFound) {
		p.ack(m)
		return
	}
	if err != nil {
		_ = m.NakWithDelay(time.Second)
		return
	}
	if c := run.call(req.CallID); c != nil {
		p.emit(ctx, run, "approval_needed", c.Step, c.ID, req)
	}
	p.ack(m)
}

// Approve answers the approval request of a call: approve, deny with a reason, or approve
// with modified arguments (validated again by the executor before the tool runs).
func (p *Planner) Approve(ctx context.Context, callID string, ans events.ApprovalAnswer) error {
	if ans.Decision != events.DecisionApprove && ans.Decision != events.DecisionDeny {
		return requestErrorf("decision must be %q or %q, got %q", events.DecisionApprove, events.DecisionDeny, ans.Decision)
	}
	runID, ok := runOfCall(callID)
	if !ok {
		return notFoundf("no call %q", callID)
	}
	run, _, err := p.runs.get(ctx, runID)
	if errors.Is(err, errRunNotFound) {
		return notFoundf("no call %q", callID)
	}
	if err != nil {
		return err
	}
	c := run.call(callID)
	if c == nil {
		return notFoundf("no call %q", callID)
	}
	if c.Done() {
		return conflictf("call %s already has its result (%s)", callID, c.Status)
	}
	if len(ans.Arguments) > 0 {
		if _, err := p.cat.hydrate(c.Name, ans.Arguments); err != nil {
			te := tools.AsError(err, tools.CodeInvalidInput)
			return &APIError{Status: 400, Message: "the modified arguments are invalid: " + te.Message, Violations: te.Violations}
		}
	}
	return publishApproval(ctx, p.js, p.cfg.Source, c.Name, callID, ans)
}
