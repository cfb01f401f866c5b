package runrec

import (
	"bytes"
	"maps"
	"slices"

	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/pick"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Deep copies of a run, field by field: a replica copies a run's state a few times per
// step (the remembered control state it hands out, the copy a result is applied to before
// the step it completes, the state a step record keeps), and a JSON round trip of the
// state cost more than the rest of the planner's work on a step. A copy shares no
// memory that the planner writes to with its original; it shares only what is never
// written in place (strings, and a picker's opaque details). TestCloneRun fills every
// field and checks both, so a field added to these types without its copy fails it.

// Clone returns a deep copy of r.
func (r *Run) Clone() *Run {
	if r == nil {
		return nil
	}
	c := *r
	c.Canceled = clonePtr(r.Canceled)
	c.Disabled = slices.Clone(r.Disabled)
	c.Actors = slices.Clone(r.Actors)
	c.Tools = slices.Clone(r.Tools)
	c.Called = slices.Clone(r.Called)
	c.Metadata = maps.Clone(r.Metadata)
	c.Messages = cloneMessages(r.Messages)
	c.Calls = cloneCalls(r.Calls)
	c.Settled = cloneCalls(r.Settled)
	c.StopWhen = slices.Clone(r.StopWhen)
	c.StopHook = clonePtr(r.StopHook)
	c.StopMatch = clonePtr(r.StopMatch)
	c.PolicyHook = clonePtr(r.PolicyHook)
	c.PauseRequested = clonePtr(r.PauseRequested)
	c.Paused = clonePtr(r.Paused)
	c.PauseOn = r.PauseOn.Clone()
	c.Repaired = slices.Clone(r.Repaired)
	c.Warnings = slices.Clone(r.Warnings)
	c.Offered = cloneOffered(r.Offered)
	c.RetriedSteps = slices.Clone(r.RetriedSteps)
	c.Lease = clonePtr(r.Lease)
	c.Reserved = slices.Clone(r.Reserved)
	c.FinishedAt = clonePtr(r.FinishedAt)
	c.ForkedFrom = clonePtr(r.ForkedFrom)
	return &c
}

// clonePtr copies the value p points at (a struct without references of its own).
func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func cloneCalls(calls []*CallRecord) []*CallRecord {
	if calls == nil {
		return nil
	}
	out := make([]*CallRecord, len(calls))
	for i, c := range calls {
		out[i] = c.Clone()
	}
	return out
}

// Clone returns a deep copy of c.
func (c *CallRecord) Clone() *CallRecord {
	if c == nil {
		return nil
	}
	cc := *c
	cc.Arguments = cloneRaw(c.Arguments)
	cc.Output = cloneRaw(c.Output)
	cc.Error = cloneToolError(c.Error)
	cc.Approval = cloneApproval(c.Approval)
	cc.ArgumentsOriginal = cloneRaw(c.ArgumentsOriginal)
	cc.Policy = clonePolicy(c.Policy)
	cc.ArgumentsRef = clonePtr(c.ArgumentsRef)
	cc.FinishedAt = clonePtr(c.FinishedAt)
	cc.StartedAt = clonePtr(c.StartedAt)
	cc.ApprovalRequestedAt = clonePtr(c.ApprovalRequestedAt)
	cc.ApprovalExpiresAt = clonePtr(c.ApprovalExpiresAt)
	cc.AttemptSpans = slices.Clone(c.AttemptSpans)
	cc.Nested = clonePtr(c.Nested)
	cc.Subs = cloneSubs(c.Subs)
	return &cc
}

func cloneSubs(subs []*SubCall) []*SubCall {
	if subs == nil {
		return nil
	}
	out := make([]*SubCall, len(subs))
	for i, s := range subs {
		c := *s
		c.Policy = clonePolicy(s.Policy)
		c.Approval = cloneApproval(s.Approval)
		c.ApprovalRequestedAt = clonePtr(s.ApprovalRequestedAt)
		c.ApprovalExpiresAt = clonePtr(s.ApprovalExpiresAt)
		c.FinishedAt = clonePtr(s.FinishedAt)
		out[i] = &c
	}
	return out
}

// cloneRaw copies a JSON value, keeping nil nil.
func cloneRaw[T ~[]byte](b T) T {
	if b == nil {
		return nil
	}
	return T(bytes.Clone([]byte(b)))
}

func cloneToolError(e *tools.Error) *tools.Error {
	if e == nil {
		return nil
	}
	c := *e
	c.Violations = slices.Clone(e.Violations)
	return &c
}

func cloneApproval(a *events.Approval) *events.Approval {
	if a == nil {
		return nil
	}
	c := *a
	c.ArgumentsOriginal = cloneRaw(a.ArgumentsOriginal)
	c.ArgumentsOriginalRef = clonePtr(a.ArgumentsOriginalRef)
	c.ArgumentsApproved = cloneRaw(a.ArgumentsApproved)
	return &c
}

func cloneOffered(o []StepTools) []StepTools {
	if o == nil {
		return nil
	}
	out := make([]StepTools, len(o))
	for i, st := range o {
		out[i] = StepTools{Step: st.Step, Tools: slices.Clone(st.Tools), Picked: clonePicked(st.Picked),
			AskedAt: st.AskedAt, ModelMS: st.ModelMS}
	}
	return out
}

// clonePicked copies the picker's results; a definition is not kept in a run's (the
// catalog has it), and a provenance's details are the picker's, never written.
func clonePicked(picked []pick.Result) []pick.Result {
	if picked == nil {
		return nil
	}
	out := slices.Clone(picked)
	for i := range out {
		out[i].Provenance = clonePtr(out[i].Provenance)
	}
	return out
}

func cloneMessages(msgs []provider.Message) []provider.Message {
	if msgs == nil {
		return nil
	}
	out := make([]provider.Message, len(msgs))
	for i, m := range msgs {
		out[i] = m
		if m.ToolCalls != nil {
			out[i].ToolCalls = make([]provider.ToolCall, len(m.ToolCalls))
			for j, tc := range m.ToolCalls {
				tc.Arguments = cloneRaw(tc.Arguments)
				out[i].ToolCalls[j] = tc
			}
		}
		if m.ToolResults != nil {
			out[i].ToolResults = make([]provider.ToolResult, len(m.ToolResults))
			for j, tr := range m.ToolResults {
				tr.Content = cloneRaw(tr.Content)
				out[i].ToolResults[j] = tr
			}
		}
	}
	return out
}

func clonePolicy(recs []events.PolicyRecord) []events.PolicyRecord {
	if recs == nil {
		return nil
	}
	out := make([]events.PolicyRecord, len(recs))
	for i, r := range recs {
		r.ArgumentsOriginal = cloneRaw(r.ArgumentsOriginal)
		r.ArgumentsOriginalRef = clonePtr(r.ArgumentsOriginalRef)
		r.ArgumentsModified = cloneRaw(r.ArgumentsModified)
		out[i] = r
	}
	return out
}
