package planner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/internal/planner/budget"
	"github.com/toolfleet/toolfleet/internal/planner/runrec"
	"github.com/toolfleet/toolfleet/internal/planner/runstore"
	"github.com/toolfleet/toolfleet/internal/tick"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// handleResult records a tool result in its run and, when it was the last result of the
// step, feeds the step's results to the conversation and asks for the next step. Results
// of calls the planner did not make, and repeated results, are acknowledged and ignored
// (those of a run id no planner makes without reading the runs bucket).
func (p *Planner) handleResult(ctx context.Context, m jetstream.Msg) {
	_, res, err := events.DecodeResult(m)
	if err != nil {
		p.log.Warn().Err(err).Str("subject", m.Subject()).Msg("ignoring a result that cannot be read")
		p.ack(m)
		return
	}
	if !plannerRun(res.RunID) {
		p.ack(m)
		return
	}
	if _, _, tenant, ok := events.ParseResultSubject(m.Subject()); !ok || tenant != res.Caller.Tenant {
		p.log.Warn().Str("subject", m.Subject()).Str("tenant", res.Caller.Tenant).Msg("ignoring a result whose subject and caller disagree")
		p.ack(m)
		return
	}
	if err := p.rlog.Resolve(ctx, &res); err != nil {
		if !jsutil.IsPayloadGone(err) {
			p.log.Error().Err(err).Str("run_id", res.RunID).Str("call_id", res.CallID).Msg("reading an output stored by reference failed; it will be retried")
			_ = m.NakWithDelay(time.Second)
			return
		}
		// It will never be readable: the call is answered with why.
		failure := tools.Errorf(tools.CodeInternal, "the output of call %s was stored by reference and cannot be read: %v", res.CallID, err)
		res.Status, res.Error, res.Output, res.OutputRef = events.StatusError, failure, failure.ForModel(), nil
	}
	err = p.recordResult(ctx, m, res)
	if errors.Is(err, errStepNotStored) && p.waitStored(ctx, res.RunID) {
		err = p.recordResult(ctx, m, res)
	}
	if err != nil {
		if ctx.Err() != nil {
			_ = m.Nak()
			return
		}
		if errors.Is(err, errStepNotStored) {
			_ = m.NakWithDelay(stepNotStoredDelay(m))
			return
		}
		if runstore.IsPermanent(err) && p.failRun(ctx, res.RunID, err) == nil {
			p.ack(m)
			return
		}
		p.log.Error().Err(err).Str("run_id", res.RunID).Str("call_id", res.CallID).Msg("recording a result failed; it will be retried")
		_ = m.NakWithDelay(time.Second)
		return
	}
	p.ack(m)
}

// recordResult records res, the result of a call, in its run. When it is the last
// result of its step and the run goes on, this replica takes the next step itself and
// stores the result with it, in one compare-and-set: m, the result's message, stays
// unacknowledged meanwhile, and is the step's claim (see local.go).
func (p *Planner) recordResult(ctx context.Context, m jetstream.Msg, res events.Result) error {
	now := p.cfg.Now()
	ahead, announced := false, false
	apply := func(r *Run) (bool, error) {
		c := r.Call(res.CallID)
		ahead = c == nil && callAhead(r, res.CallID)
		// A result for another tenant's call of the same ids (its caller chose them) is
		// not this run's.
		if res.Caller.Tenant != r.Tenant {
			return false, nil
		}
		if c == nil {
			// A composite call's sub-call settles; the call goes on until its own result.
			if _, s := subCall(r, res.CallID); s != nil {
				return subResult(s, res, now), nil
			}
		}
		if c == nil || c.Done() {
			return false, nil
		}
		c.Status, c.Output, c.Error = string(res.Status), res.Output, res.Error
		// The output is not kept in the run's state: it stays in the results stream, read
		// by call id; this replica remembers it for the next step's conversation.
		p.rlog.KeepOutput(r.ID, c.Step, c.ID, res.Output)
		c.Attempts, c.Executor, c.Validated = res.Attempts, res.Executor, res.Validated
		c.NoSchemaMode = res.NoSchemaMode
		// The executor's record is what was carried out (an answer over NATS, an expiry);
		// the planner's own record of the same decision is kept.
		addToolPolicy(c, res.Policy) // before the approval: the tool's hook was asked first
		if a := res.Approval; a != nil && (c.Approval == nil || c.Approval.Decision != a.Decision) {
			setCallApproval(c, a)
		}
		finished := res.FinishedAt
		if finished.IsZero() {
			finished = now
		}
		c.Finish(finished) // its duration leaves out its time parked for approval
		if !res.StartedAt.IsZero() {
			started := res.StartedAt
			c.StartedAt = &started
		}
		c.LimitWaitMS, c.AttemptSpans = res.LimitWaitMS, res.AttemptSpans
		settleSubs(c, res.Status, res.Output, finished)
		countOutcome(r, c)
		if r.Sequential {
			calledNext(r, now)
		}
		matchStop(r, c)
		if res.Status != events.StatusOK {
			// A nested run that ended for its tree's budget is no failed call: the run
			// ends by that budget at its next step (answerParent).
			if c.Name != AgentToolName || res.Error == nil || !budget.IsCode(res.Error.Code) {
				r.Errors++
			}
			if len(c.Output) == 0 && c.Error != nil {
				c.Output = c.Error.ForModel()
			}
		}
		// Announced (once) before the change is stored: whatever the change leads to
		// (the next step, the end of the run) is announced after it.
		if !announced {
			announced = true
			what := "tool_result"
			if c.Failed() {
				what = "tool_error"
			}
			detail := c
			if withArgs, err := p.withArguments(ctx, r, []*CallRecord{c}); err == nil {
				detail = withArgs[0]
			}
			p.emit(ctx, r, what, c.Step, c.ID, p.eventCall(detail))
			p.recordUsage(ctx, r, c)
		}
		if r.Status == StatusRunning && stepComplete(r) {
			p.completeStep(r, now)
		}
		return true, nil
	}
	for {
		stored, rev, fresh, err := p.runs.GetCached(ctx, res.RunID)
		if err == nil && !fresh && stored.Call(res.CallID) == nil && callAhead(stored, res.CallID) {
			// This replica's copy is behind the call's step (its calls went out while its
			// state was being stored): wait for the state if this replica stores it, else
			// read it, so that the result completing the step takes the next step here.
			if p.waitStored(ctx, res.RunID) && ctx.Err() == nil {
				continue
			}
			stored, rev, err = p.runs.Get(ctx, res.RunID)
			fresh = true
		}
		if errors.Is(err, runstore.ErrNotFound) {
			return nil // not a planner run
		}
		if err != nil {
			return err
		}
		if next, ok := p.stepsOn(stored, apply); ok && ctx.Err() == nil {
			err := p.stepFrom(ctx, p.msgClaim(m), stepBase{stored: stored, rev: rev, fresh: fresh, pre: apply, run: next}, next.Step)
			if errors.Is(err, errInjectedMeanwhile) {
				continue // asked again, from the state with the new messages
			}
			return err
		}
		run, err := p.runs.UpdateFrom(ctx, res.RunID, stored, rev, fresh, apply)
		if err != nil {
			return err
		}
		if ahead {
			return errStepNotStored
		}
		if err := p.afterChange(ctx, run); err != nil {
			return err
		}
		return p.dispatchNext(ctx, run)
	}
}

// stepsOn applies the result (apply) to a copy of the stored run and returns it when
// the result completes its step and the run goes on to a step this replica can take
// at once (the run's next model call).
func (p *Planner) stepsOn(stored *Run, apply func(*Run) (bool, error)) (*Run, bool) {
	if stored.Status != StatusRunning {
		return nil, false
	}
	next := stored.Clone()
	if changed, err := apply(next); err != nil || !changed {
		return nil, false
	}
	return next, next.Status == StatusRunning && next.Step > stored.Step && len(next.StepCalls()) == 0
}

// errStepNotStored: a result or an approval request came for a call of a step whose
// state is not stored yet (its calls go out while it is being stored); it is handled
// again shortly.
var errStepNotStored = errors.New("the call's step is not stored yet")

// stepNotStoredDelay is how long such a message waits before it is handled again: 10ms
// at first (the state is being stored), doubling up to 2s (the replica storing it
// stopped, and another takes the step over when the step's message comes back).
func stepNotStoredDelay(m jetstream.Msg) time.Duration {
	n := uint64(1)
	if meta, err := m.Metadata(); err == nil {
		n = meta.NumDelivered
	}
	return min(10*time.Millisecond<<min(n-1, 10), 2*time.Second)
}

// waitStored waits until this replica has stored the state of the step of run whose
// calls went out first, if it is storing one; it reports whether it waited.
func (p *Planner) waitStored(ctx context.Context, run string) bool {
	v, ok := p.storing.Load(run)
	if !ok {
		return false
	}
	select {
	case <-v.(chan struct{}):
	case <-ctx.Done():
	}
	return true
}

// loadCall reads the run of callID and the call's record in its control state. The
// approval request of a call can be seen before its step's state is stored (calls go
// out while it is being stored), so a call of a step not stored yet is waited for, on
// this replica's write or, for another replica's, by reading again for a little while.
func (p *Planner) loadCall(ctx context.Context, runID, callID string) (*Run, uint64, *CallRecord, error) {
	b := tick.Backoff{First: 10 * time.Millisecond}
	for {
		run, rev, err := p.runs.Get(ctx, runID)
		if err != nil {
			return nil, 0, nil, err
		}
		c := run.Call(callID)
		wait := b.Next()
		if c != nil || !callAhead(run, callID) || wait > 2*time.Second {
			return run, rev, c, nil
		}
		if !p.waitStored(ctx, runID) && !tick.Sleep(ctx, wait) {
			return nil, 0, nil, ctx.Err()
		}
	}
}

// callAhead reports whether call is a call of r, which is running, at a step whose record
// r has not made part of it yet.
func callAhead(r *Run, call string) bool {
	if r.Status != StatusRunning {
		return false
	}
	parts := strings.Split(topCallID(call), "-") // a sub-call is its call's
	if len(parts) != 3 || parts[0] != r.ID {
		return false
	}
	step, err := strconv.Atoi(parts[1])
	return err == nil && step >= r.Recorded
}

// eventCall returns the call record as a result event carries it: whole when it fits an
// event, else without its arguments, else without its output too ("truncated": the
// run, GET /v1/runs/{id}, has them).
func (p *Planner) eventCall(c *CallRecord) any {
	limit := int(p.cfg.Events.WithDefaults().MaxMsgSize) - 16<<10
	if len(c.Arguments)+len(c.Output)+len(c.ArgumentsOriginal) <= limit {
		return c
	}
	cc := *c
	cc.Arguments, cc.ArgumentsOriginal = nil, nil
	truncated := []string{"arguments"}
	if len(cc.Output) > limit {
		cc.Output = nil
		truncated = append(truncated, "output")
	}
	return struct {
		*CallRecord
		Truncated []string `json:"truncated"`
	}{&cc, truncated}
}

// stepComplete reports whether every call of the current step has its result.
func stepComplete(r *Run) bool {
	calls := r.StepCalls()
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

// completeStep moves the run past its finished step, unless a stop condition ends it.
// The step's results join the conversation as they are: the conversation is assembled
// from the step's record and the calls' results (runstore.Log), in the order of the
// model's calls.
func (p *Planner) completeStep(r *Run, now time.Time) {
	for _, c := range r.StepCalls() {
		if c.Status == string(events.StatusOK) && p.cat.isFinal(c.Name) {
			r.Answer, r.AnswerCall = string(c.Output), c.ID
			r.Finish(TerminationFinalTool, c.Name+" is a final tool", now)
			return
		}
	}
	if stopMatched(r, now) {
		return
	}
	if r.Errors >= r.Limits.ErrorThreshold {
		r.Finish(TerminationErrorThreshold, "too many tool calls failed", now)
		return
	}
	r.Step++
	pauseAtBoundary(r, now) // pause.go
}

// failRun ends a run whose state cannot be stored (a permanent error, such as a value
// over the server's max payload) with TerminationStorageError, instead of retrying the
// write until the run's time limit.
func (p *Planner) failRun(ctx context.Context, runID string, cause error) error {
	run, err := p.runs.Update(ctx, runID, func(r *Run) (bool, error) {
		if r.Status == StatusDone {
			return false, nil
		}
		r.Finish(TerminationStorageError, fmt.Sprintf("the run's state could not be stored: %v", cause), p.cfg.Now())
		return true, nil
	})
	if err != nil {
		p.log.Error().Err(err).Str("run_id", runID).Msg("ending a run whose state cannot be stored")
		return err
	}
	return p.afterChange(ctx, run)
}

// answer returns the run's answer: the model's text, or the output of the final tool.
func (p *Planner) answer(ctx context.Context, run *Run) string {
	if run.Answer != "" || run.AnswerCall == "" {
		return run.Answer
	}
	out, err := p.rlog.Output(ctx, run.Tenant, run.ID, &CallRecord{ID: run.AnswerCall})
	if err != nil {
		p.log.Warn().Err(err).Str("run_id", run.ID).Msg("reading the final tool's output")
	}
	return string(out)
}

// afterDone announces the end of a run and, for a nested run, answers the parent's call.
// It runs every time a finished run is seen, and is idempotent: both messages carry ids
// that JetStream deduplicates.
func (p *Planner) afterDone(ctx context.Context, run *Run) error {
	p.forget(run.ID)
	if run.AnswerCall != "" && run.Answer == "" {
		r := *run
		r.Answer = p.answer(ctx, run)
		run = &r
	}
	p.rlog.Forget(run.ID)
	p.emit(ctx, run, "done", run.Step, "", map[string]any{
		"termination": run.Termination, "detail": run.Detail, "answer": run.Answer})
	if run.ParentID == "" {
		return nil
	}
	// Its last charge reaches its ancestors before its answer lets its parent go on.
	if _, err := p.budgets.RollUp(ctx, run, 0); err != nil {
		return err
	}
	return p.answerParent(ctx, run)
}

// allows reports whether the run may call name.
func allows(r *Run, name string) bool {
	return r.Tools == nil || slices.Contains(r.Tools, name)
}

// toolNames returns the tools the run may call, given the catalog's names.
func toolNames(r *Run, catalog []string) []string {
	if r.Tools != nil {
		return r.Tools
	}
	return catalog
}

func repaired(r *Run, tool string) bool { return slices.Contains(r.Repaired, tool) }

// countOutcome counts c, which has just got its result, in r's tool errors and denials
// (its sub-calls' denials with it): what the run's outcome says (runrec.OutcomeOf).
func countOutcome(r *Run, c *CallRecord) {
	if runrec.IsToolError(c.Status) {
		r.ToolErrors++
	}
	if runrec.IsDenial(c.Approval) {
		r.Denials++
	}
	for _, s := range c.Subs {
		if runrec.IsDenial(s.Approval) {
			r.Denials++
		}
	}
}

// expiresAt is when the approval request req is denied unanswered (nil: not said).
func expiresAt(req events.ApprovalRequest) *time.Time {
	if req.ExpiresAt.IsZero() {
		return nil
	}
	t := req.ExpiresAt.UTC()
	return &t
}

// handleApprovalRequest marks a call of a planner run as waiting for approval and tells
// the run's watchers, who can answer through the API or over NATS.
func (p *Planner) handleApprovalRequest(ctx context.Context, m jetstream.Msg) {
	_, req, err := events.DecodeApprovalRequest(m)
	if err != nil {
		p.log.Warn().Err(err).Str("subject", m.Subject()).Msg("ignoring an approval request that cannot be read")
		p.ack(m)
		return
	}
	ahead, now := false, p.cfg.Now()
	run, err := p.runs.Update(ctx, req.RunID, func(r *Run) (bool, error) {
		c := r.Call(req.CallID)
		ahead = c == nil && callAhead(r, req.CallID)
		if req.Caller.Tenant != r.Tenant || r.Status == StatusDone {
			return false, nil
		}
		parked := now
		if c == nil {
			// A sub-call of a composite call waits like a call of the run.
			if pc, s := subCall(r, req.CallID); s != nil && !pc.Done() && !s.Done() && s.Status != string(CallAwaitingApproval) {
				s.Status, s.ApprovalRequestedAt, s.ApprovalExpiresAt = string(CallAwaitingApproval), &parked, expiresAt(req)
				return true, nil
			}
		}
		if c == nil || c.Done() || c.Status == string(CallAwaitingApproval) {
			return false, nil
		}
		c.Status = string(CallAwaitingApproval)
		c.ApprovalRequestedAt, c.ApprovalExpiresAt = &parked, expiresAt(req)
		return true, nil
	})
	if errors.Is(err, runstore.ErrNotFound) {
		p.ack(m)
		return
	}
	if err != nil {
		_ = m.NakWithDelay(time.Second)
		return
	}
	if ahead {
		_ = m.NakWithDelay(stepNotStoredDelay(m))
		return
	}
	if c := run.Call(req.CallID); c != nil {
		p.emit(ctx, run, "approval_needed", c.Step, c.ID, req)
	} else if c, s := subCall(run, req.CallID); s != nil {
		p.emit(ctx, run, "approval_needed", c.Step, s.ID, req)
	}
	p.ack(m)
}

// Approve answers the approval request of a call: approve, deny with a reason, or approve
// with modified arguments (validated again by the executor before the tool runs). The
// first answer wins: it is recorded on the call by a compare-and-set on the run before it
// is published, and a later answer is refused (409) with the decision that stood. A call
// that is not waiting for an approval is refused too (409); an unknown call is 404.
//
// caller answers: it must be allowed to act on the run (404 outside its tenant, 403 for
// a role that is neither the owner's nor an operator role) and to call the tool itself
// (403), since an approval lets the call run (events.MayAct, as the executors decide it
// for an answer over NATS). The answer records who gave it, the caller
// (DescribeCaller); what ans.By says is kept as the record's ClaimedBy.
//
// callID may name a sub-call of a composite call of the run (<call>-sub-<n>): it is
// answered the same way, for its own tool, and recorded on the composite call's record
// (CallRecord.Subs); once the composite call has its result, it takes no answer.
func (p *Planner) Approve(ctx context.Context, callID string, caller events.Identity, ans events.ApprovalAnswer) error {
	if err := CheckDecision(&ans); err != nil {
		return err
	}
	runID, ok := runOfCall(callID)
	if !ok {
		return notFoundf("no call %q", callID)
	}
	run, rev, _, err := p.loadCall(ctx, runID, callID)
	if errors.Is(err, runstore.ErrNotFound) {
		return notFoundf("no call %q", callID)
	}
	if err != nil {
		return err
	}
	if err := p.mayAct(run, caller, "answer the approvals of"); err != nil {
		return err
	}
	slot := slotOf(run, callID)
	if slot.call == nil {
		// Not a call of the current step: an earlier one has ended; look it up.
		full, err := p.rlog.Assemble(ctx, run)
		if err != nil {
			return err
		}
		for _, fc := range full.Calls {
			if fc.ID == callID {
				return answerable(fc)
			}
			for _, s := range fc.Subs {
				if s.ID == callID {
					return approvalSlot{call: fc, sub: s}.answerable()
				}
			}
		}
		return notFoundf("no call %q", callID)
	}
	if err := slot.answerable(); err != nil {
		return err
	}
	tool := slot.tool()
	if d, ok := p.cat.get(tool); ok {
		act := events.Act{Actor: caller, Owner: run.Caller(), What: "answer the approvals of", Kind: "run", ID: run.ID}
		if err := p.refusal(events.MayAct(act, p.cfg.OperatorRoles, &d)); err != nil {
			return err
		}
	}
	args, err := p.slotArguments(ctx, run, slot)
	if err != nil {
		return err
	}
	if len(ans.Arguments) > 0 {
		if _, err := p.cat.hydrate(tool, ans.Arguments); err != nil {
			te := tools.AsError(err, tools.CodeInvalidInput)
			return &APIError{Status: 400, Message: "the modified arguments are invalid: " + te.Message, Violations: te.Violations}
		}
	}
	rec := &events.Approval{Decision: ans.Decision, By: DescribeCaller(caller), ClaimedBy: ans.By, Reason: ans.Reason, At: p.cfg.Now().UTC()}
	if ans.Decision == events.DecisionApprove && len(ans.Arguments) > 0 {
		rec.ArgumentsOriginal, rec.ArgumentsApproved = args, ans.Arguments
	}
	run, err = p.runs.UpdateFrom(ctx, runID, run, rev, true, func(r *Run) (bool, error) {
		slot := slotOf(r, callID)
		if slot.call == nil {
			return false, notFoundf("no call %q", callID)
		}
		if err := slot.answerable(); err != nil {
			return false, err
		}
		slot.setApproval(rec)
		return true, nil
	})
	if err != nil {
		return err
	}
	dup, err := publishApproval(ctx, p.js, p.cfg.Source, caller, tool, callID, ans)
	if err != nil || dup {
		// Not published, or an answer over NATS came first (same answer id): take the
		// record back; the result will carry the decision that stood.
		if _, uerr := p.runs.Update(context.WithoutCancel(ctx), runID, func(r *Run) (bool, error) {
			return slotOf(r, callID).takeBack(rec), nil
		}); uerr != nil {
			p.log.Warn().Err(uerr).Str("run_id", runID).Str("call_id", callID).Msg("taking back an approval that was not published")
		}
		if err != nil {
			return err
		}
		return conflictf("call %s was answered already, over NATS", callID)
	}
	if slot := slotOf(run, callID); slot.call != nil {
		p.emit(ctx, run, "approval_answered", slot.call.Step, callID, rec)
	}
	return nil
}

// approvalSlot is what an approval answers in a run: a call of its current step (sub
// nil), or a sub-call of a composite call among them; call is nil when the run has
// neither.
type approvalSlot struct {
	call *CallRecord
	sub  *runrec.SubCall
}

// approvalSlot returns the call or sub-call id of r's current step.
func slotOf(r *Run, id string) approvalSlot {
	if c := r.Call(id); c != nil {
		return approvalSlot{call: c}
	}
	c, s := subCall(r, id)
	return approvalSlot{call: c, sub: s}
}

func (a approvalSlot) tool() string {
	if a.sub != nil {
		return a.sub.Name
	}
	return a.call.Name
}

// answerable is [answerable] for the slot: a sub-call whose composite call has ended
// takes no answer either.
func (a approvalSlot) answerable() error {
	if a.sub == nil {
		return answerable(a.call)
	}
	if a.call.Done() && !a.sub.Done() {
		return conflictf("call %s is not awaiting approval: its composite call %s has ended (%s)", a.sub.ID, a.call.ID, a.call.Status)
	}
	return approvalConflict(a.sub.ID, a.sub.Status, a.sub.Approval)
}

// setApproval records the decision rec.
func (a approvalSlot) setApproval(rec *events.Approval) {
	if a.sub == nil {
		setCallApproval(a.call, rec)
		return
	}
	a.sub.Approval = rec // the sub-call's approved arguments are the record's
}

// takeBack removes rec, when it is the decision recorded, and reports whether it was.
func (a approvalSlot) takeBack(rec *events.Approval) bool {
	if a.call == nil {
		return false
	}
	ptr := &a.call.Approval
	if a.sub != nil {
		ptr = &a.sub.Approval
	}
	if got := *ptr; got == nil || !got.At.Equal(rec.At) || got.Decision != rec.Decision || got.By != rec.By {
		return false
	}
	*ptr = nil
	if a.sub == nil {
		undoApprovalArguments(a.call)
	}
	return true
}

// slotArguments returns the arguments of the call or sub-call of the slot, from the
// step's record when the control state does not hold them.
func (p *Planner) slotArguments(ctx context.Context, run *Run, a approvalSlot) (json.RawMessage, error) {
	withArgs, err := p.withArguments(ctx, run, []*CallRecord{a.call})
	if err != nil {
		return nil, err
	}
	args := withArgs[0].Arguments
	if a.sub == nil {
		return args, nil
	}
	path, ok := subPath(a.call.ID, a.sub.ID)
	if !ok {
		return nil, fmt.Errorf("call %s is not a sub-call of %s", a.sub.ID, a.call.ID)
	}
	return subArgs(args, path)
}

// CheckDecision says, as a 400, what is wrong with an approval answer: a decision other
// than approve or deny, or arguments on a deny ("arguments": null counts as none).
func CheckDecision(ans *events.ApprovalAnswer) error {
	if ans.Decision != events.DecisionApprove && ans.Decision != events.DecisionDeny {
		return requestErrorf("decision must be %q or %q, got %q", events.DecisionApprove, events.DecisionDeny, ans.Decision)
	}
	if strings.TrimSpace(string(ans.Arguments)) == "null" { // as good as none
		ans.Arguments = nil
	}
	if ans.Decision == events.DecisionDeny && len(ans.Arguments) > 0 {
		return requestErrorf("arguments replace a call's arguments on an approval; a deny takes none")
	}
	return nil
}

// answerable reports, as an API error, why the call cannot take an approval answer: it
// was answered before (409 with the decision that stood), it has its result, or it never
// asked for an approval.
func answerable(c *CallRecord) error { return approvalConflict(c.ID, c.Status, c.Approval) }

// approvalConflict is answerable for the call id of status whose decision is a.
func approvalConflict(id, status string, a *events.Approval) error {
	switch {
	case a != nil:
		return &APIError{Status: http.StatusConflict, Approval: a,
			Message: fmt.Sprintf("call %s was answered already: %s", id, a.Decision)}
	case status != string(CallPending) && status != string(CallAwaitingApproval):
		return conflictf("call %s already has its result (%s)", id, status)
	case status != string(CallAwaitingApproval):
		return conflictf("call %s is not awaiting approval", id)
	}
	return nil
}

// setApproval records the decision on the call; when the approval modified the
// arguments, Arguments become what runs and ArgumentsOriginal keeps what the model asked.
func setCallApproval(c *CallRecord, a *events.Approval) {
	undoApprovalArguments(c) // replacing a record that modified them
	c.Approval = a
	if len(a.ArgumentsApproved) > 0 {
		if c.ArgumentsOriginal == nil { // else a policy hook modified them: the model's are kept
			orig := c.Arguments
			if orig == nil { // the control state keeps a call's arguments in its step's record
				orig = a.ArgumentsOriginal
			}
			c.ArgumentsOriginal = orig
		}
		c.Arguments = a.ArgumentsApproved
	}
}
