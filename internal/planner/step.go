package planner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/internal/planner/budget"
	"github.com/toolfleet/toolfleet/internal/planner/runrec"
	"github.com/toolfleet/toolfleet/internal/planner/runstore"
	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// publishAdvance asks some planner replica to take step of run. The message id is
// "<run>-<step>", so asking twice for the same step is one message.
func (p *Planner) publishAdvance(ctx context.Context, run string, step int) error {
	msg, err := events.NewPlanStep(p.cfg.Source, run, step, p.cfg.Now())
	if err != nil {
		return err
	}
	if _, err := jsutil.PublishSettled(ctx, p.js, msg); err != nil {
		return fmt.Errorf("publish step %d of run %s: %w", step, run, err)
	}
	return nil
}

// handleAdvance takes one step of a run: ask the model, answer what the planner can answer
// itself, and publish the rest of the calls to the fleet. It is idempotent: a step that
// was already taken is skipped, and a step whose calls were saved but maybe not published
// publishes them again (JetStream drops the repeats by id).
func (p *Planner) handleAdvance(ctx context.Context, m jetstream.Msg) {
	e, adv, err := events.DecodePlanStep(m)
	if err != nil {
		p.log.Error().Err(err).Str("subject", m.Subject()).Msg("dropping a plan message that cannot be read")
		_ = m.Term()
		return
	}
	log := p.log.With().Str("run_id", e.RunID).Int("step", adv.Step).Logger()
	if err := p.takeStep(ctx, p.msgClaim(m), e.RunID, adv.Step); err != nil {
		var leased *errLeased
		switch {
		case ctx.Err() != nil:
			_ = m.Nak() // shutting down: another replica takes the step
		case errors.As(err, &leased):
			_ = m.NakWithDelay(leased.wait)
		default:
			log.Error().Err(err).Msg("step failed; it will be retried")
			_ = m.NakWithDelay(time.Second)
		}
		return
	}
	p.ack(m)
}

// msgClaim is the claim of a step asked for by m.
func (p *Planner) msgClaim(m jetstream.Msg) msgClaim {
	return msgClaim{m: m}
}

// takeStep takes step of the run, as its stored control state has it.
func (p *Planner) takeStep(ctx context.Context, cl claim, runID string, step int) error {
	for {
		_, plan := cl.(msgClaim)
		run, rev, fresh, err := p.runs.GetCached(ctx, runID)
		if err == nil && !fresh && run.Status != StatusDone && (run.Step < step || plan && run.Lease != nil || run.Status == StatusPaused) {
			// This replica's copy is behind another's change, or shows a lease another
			// replica may have ended, or a pause another may have resumed: read it.
			run, rev, err = p.runs.Get(ctx, runID)
			fresh = true
		}
		if errors.Is(err, runstore.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if plan && run.Status == StatusRunning && run.Step == step && len(run.StepCalls()) == 0 {
			if err := p.leaseHeld(run, step); err != nil {
				return err
			}
		}
		err = p.stepFrom(ctx, cl, stepBase{stored: run, rev: rev, fresh: fresh, run: run}, step)
		if !errors.Is(err, errInjectedMeanwhile) {
			return err
		}
		// Messages were added while the model answered: asked again, with them.
	}
}

// stepFrom takes step of the run from b: b.run is the state the step starts from, and
// every write of the step is a compare-and-set on b (see [stepBase.update]). A step has
// three phases: the checks that may end it before the model is asked (stepChecks), the
// model's answer asked and recorded once (askAndRecord; skipped when a replica recorded
// it already), and its calls sent while the state it leaves is stored (sendAndStore).
func (p *Planner) stepFrom(ctx context.Context, cl claim, b stepBase, step int) error {
	if handled, err := p.stepChecks(ctx, b, step); handled {
		return err
	}
	stored, err := p.recorded(ctx, cl, b.run, step)
	if err != nil {
		return err
	}
	var charged *Run // the state whose totals budgets.ReserveStep charged to the run's ancestors
	if stored == nil {
		var handled bool
		if stored, charged, handled, err = p.askAndRecord(ctx, cl, b, step); handled {
			return err
		}
	}
	return p.sendAndStore(ctx, b, step, stored, charged)
}

// stepChecks decides whether step of b's run is to be taken: handled is true when it is
// not (a run done, paused, past the step, or ended here by a limit: err is the outcome).
func (p *Planner) stepChecks(ctx context.Context, b stepBase, step int) (handled bool, err error) {
	run := b.run
	if run.Status == StatusDone {
		return true, p.afterDone(ctx, run)
	}
	if run.Status == StatusPaused {
		return true, nil // a resume asks for the step again (pause.go)
	}
	if run.Step != step {
		return true, nil // a stale or repeated request
	}
	if calls := run.StepCalls(); len(calls) > 0 {
		// The model already answered this step (a resumed step); make sure its calls went out.
		return true, p.dispatch(ctx, run)
	}
	if t, detail := p.stopBeforeModel(run); t != "" {
		return true, p.end(ctx, b, step, t, detail)
	}
	if run.ParentID != "" && !budget.Budgeted(run) { // a budget's reservation checks them (package budget)
		t, detail, err := p.budgets.AncestorsStop(ctx, run)
		if err != nil {
			return true, err
		}
		if t != "" {
			return true, p.end(ctx, b, step, t, detail)
		}
	}
	return false, nil
}

// askAndRecord asks the model for step of b's run and records its answer once: stored is
// the step's record (this replica's, or another's stored first), charged the state whose
// totals were charged to the run's ancestors. handled is true when the step was finished
// here instead (the run ended, answered, or its batch stored and its calls sent: err is
// the outcome).
func (p *Planner) askAndRecord(ctx context.Context, cl claim, b stepBase, step int) (stored *runstore.StepRecord, charged *Run, handled bool, err error) {
	run := b.run
	if t, detail := p.askStopHook(ctx, run); t != "" {
		return nil, nil, true, p.end(ctx, b, step, t, detail)
	}
	p.stepStarted(ctx, run, step)
	msgs, err := p.rlog.Conversation(ctx, run)
	if errors.Is(err, runstore.ErrNoRecord) {
		// A part of the run's log is gone (expired, or never stored): no step can follow.
		return nil, nil, true, p.end(ctx, b, step, TerminationStorageError, fmt.Sprintf("the run's log is incomplete: %v", err))
	}
	if err != nil {
		return nil, nil, true, err
	}
	resp, offered, modelErr := p.askModel(ctx, run, msgs)
	if modelErr != nil && ctx.Err() != nil {
		return nil, nil, true, ctx.Err()
	}
	now := p.cfg.Now()
	var unpaid *budget.Stop
	if errors.As(modelErr, &unpaid) { // the model was not asked (package budget)
		return nil, nil, true, p.end(ctx, b, step, unpaid.T, unpaid.Detail)
	}
	if errors.Is(modelErr, budget.ErrNotReserved) {
		return nil, nil, true, modelErr
	}
	if modelErr != nil {
		if !run.Deadline.IsZero() && !now.Before(run.Deadline) {
			return nil, nil, true, p.end(ctx, b, step, TerminationTimeout,
				fmt.Sprintf("the run's time limit of %s ran out while the model was answering", run.Limits.Timeout.D()))
		}
		return nil, nil, true, p.end(ctx, b, step, TerminationModelError, modelErr.Error())
	}

	if len(resp.Message.ToolCalls) == 0 && run.ToolChoice.Mode != provider.ChoiceRequired {
		// The model's answer ends the run, and the control state holds all there is
		// of this step (the answer, the tool set, the usage): nothing to record.
		return nil, nil, true, p.answered(ctx, b, step, resp, offered, now)
	}
	// The answer is applied to a copy of the control state and recorded, with the state it
	// leaves, in the step's record, written once; the compare-and-set then makes the
	// recorded step (this replica's, or another's that recorded it first) part of the run.
	rec := p.newStepRecord(ctx, run, resp, offered, now)
	if run.ParentID != "" {
		// Charged to the runs it is nested in before its calls go out (package budget).
		if err := p.budgets.ReserveStep(ctx, rec, now); err != nil {
			return nil, nil, true, err
		}
		charged = rec.State
	}
	if p.runs.Batches && b.createdNow() {
		// One append to the journal: the record and the state the step leaves, in
		// one atomic batch, before the calls go out (commitStep).
		run, sent, err := p.commitStep(ctx, b, step, rec)
		if !errors.Is(err, runstore.ErrBatchFailed) {
			return nil, nil, true, p.stepStored(ctx, run, sent, charged, err)
		}
		// Refused, or its outcome unknown: the record is written on its own, which
		// settles what the batch did (its record, or the one stored first), and the
		// state after it.
		p.log.Debug().Err(err).Str("run_id", b.run.ID).Int("step", step).Msg("step batch not stored; writing its parts")
	}
	stored, err = p.rlog.WriteStep(ctx, run.ID, rec)
	if err != nil {
		if runstore.IsPermanent(err) {
			return nil, nil, true, p.end(ctx, b, step, TerminationStorageError,
				fmt.Sprintf("the model's answer at step %d could not be stored: %v", step, err))
		}
		return nil, nil, true, err
	}
	return stored, charged, false, nil
}

// sendAndStore announces step of b's run as stored records it and sends its calls while
// the state it leaves is stored. The calls carry the ids the stored state gives them,
// whichever replica stores it, and a result that comes back before the state is stored
// waits for it (recordResult). A first step taken while its run is being stored
// announces and encodes them meanwhile: its events are held until the run's started
// event, its calls wait for the create.
func (p *Planner) sendAndStore(ctx context.Context, b stepBase, step int, stored *runstore.StepRecord, charged *Run) error {
	run := b.run
	state := *stored.State
	state.Calls = slices.Clone(state.Calls)
	state.Lease = nil
	p.modelAnswered(ctx, &state, step, stored.Message, stored.Calls, stored.Warnings, run.Usage)
	var calls []*nats.Msg
	var err error
	callsAhead := state.Status == StatusRunning && state.Step == step && len(state.StepCalls()) > 0 && !nests(&state)
	if callsAhead {
		if calls, err = p.callMessages(ctx, &state); err != nil {
			return err
		}
	}
	if err := b.awaitCreate(ctx); err != nil {
		return err
	}
	var sent func(context.Context) error
	doneStoring := func() {}
	if callsAhead {
		ch := make(chan struct{})
		p.storing.Store(run.ID, ch)
		id := run.ID // run is the update's outcome below: nil when it failed
		doneStoring = func() { p.storing.CompareAndDelete(id, ch); close(ch) }
		if sent, err = p.sendCalls(ctx, calls); err != nil {
			doneStoring()
			return err
		}
	}
	run, err = b.update(ctx, p, step, applyStep(step, &state, run.TreeSeq))
	doneStoring()
	var sentCalls []*CallRecord
	if sent != nil {
		sentCalls = state.StepCalls()
		if serr := sent(ctx); serr != nil && err == nil {
			err = serr
		}
	}
	return p.stepStored(ctx, run, sentCalls, charged, err)
}

// applyStep is the change that makes the recorded step whose state is state part of
// the run: base is the run's tree totals as the step found them.
func applyStep(step int, state *Run, base int) func(r *Run) (bool, error) {
	return func(r *Run) (bool, error) {
		if canceledAt(r, step) {
			held := r.Reserved
			kept := keepCanceledStep(r, state) // its calls went out: they are the run's
			r.Reserved = held
			return kept, nil
		}
		if r.Status == StatusDone || r.Step != step || len(r.StepCalls()) > 0 || r.Recorded > step {
			return false, nil // another replica took the step meanwhile
		}
		ctl, deadline, tree := r.Controls, r.Deadline, budget.TreeStateOf(r)
		*r = *state
		keepControls(r, ctl, deadline)   // what callers changed while the model answered
		budget.KeepNested(r, base, tree) // and nested runs' charges
		r.Calls = slices.Clone(state.Calls)
		return true, nil
	}
}

// commitStep stores step's record rec, which this replica's model call made, and the
// state it leaves, in one atomic batch of the journal (see [runstore.Store.UpdateWith]): the
// record only if the step has none, the state only if the run is still at the revision
// the step started from. Once they are stored the step is announced and its calls go
// out: sent are the calls sent, once acknowledged. When the run moved on meanwhile (another
// replica took the step, a cancel), nothing is written and run is the run as stored.
// runstore.ErrBatchFailed: nothing may be assumed stored; the caller writes the parts one by one.
func (p *Planner) commitStep(ctx context.Context, b stepBase, step int, rec *runstore.StepRecord) (run *Run, sent []*CallRecord, err error) {
	runID, before := b.run.ID, b.run.Usage
	msg, err := p.rlog.StepMessage(ctx, runID, rec)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", runstore.ErrBatchFailed, err) // writeStep says why, or ends the run
	}
	state := *rec.State
	state.Calls = slices.Clone(state.Calls)
	state.Lease = nil
	if err := b.awaitCreate(ctx); err != nil {
		return nil, nil, err
	}
	run, wrote, err := b.updateWith(ctx, p, step, applyStep(step, &state, b.run.TreeSeq), []*nats.Msg{msg})
	if err != nil || !wrote {
		return run, nil, err
	}
	p.rlog.KeepStep(runID, rec)
	p.modelAnswered(ctx, &state, step, rec.Message, rec.Calls, rec.Warnings, before)
	if state.Status != StatusRunning || state.Step != step || len(state.StepCalls()) == 0 || nests(&state) {
		return run, nil, nil // no calls, or nested runs: dispatched from the stored state
	}
	calls, err := p.callMessages(ctx, &state)
	if err != nil {
		return run, nil, err
	}
	wait, err := p.sendCalls(ctx, calls)
	if err != nil {
		return run, nil, err
	}
	return run, state.StepCalls(), wait(ctx)
}

// stepStored does what the stored step calls for (err: storing it or sending its calls
// failed): the cancels of calls sent (sent) to a run canceled meanwhile, the charge of a
// nested run's step to its ancestors (charged: the state whose totals reserveStep
// charged), the next step or the run's end, or its calls when they did not go out yet.
func (p *Planner) stepStored(ctx context.Context, run *Run, sent []*CallRecord, charged *Run, err error) error {
	if err != nil {
		return err
	}
	if sent != nil && run.Termination == TerminationCanceled {
		p.cancelCalls(ctx, run, sent, run.Caller()) // canceled while its calls went out
	}
	if run.ParentID != "" && run.Status == StatusRunning &&
		(charged == nil || charged.TreeSeq != run.TreeSeq || charged.Tree() != run.Tree()) {
		// Another replica's record of the step was stored, or charges came meanwhile.
		if _, err := p.budgets.RollUp(ctx, run, 0); err != nil {
			return err
		}
	}
	if run.Status == StatusDone || len(run.StepCalls()) == 0 {
		return p.afterChange(ctx, run)
	}
	if sent != nil {
		return nil
	}
	return p.dispatch(ctx, run)
}

// answered stores the model's final answer at step, which completes the run: the last
// step has no record (see [runstore.Log.Assemble]). errInjectedMeanwhile: messages were added
// to the run while the model answered without them, and nothing was stored.
func (p *Planner) answered(ctx context.Context, b stepBase, step int, resp *provider.Response, offered StepTools, now time.Time) error {
	before, injected := b.run.Usage, b.run.Injected
	run, err := b.update(ctx, p, step, func(r *Run) (bool, error) {
		if r.Status == StatusDone || r.Step != step || len(r.StepCalls()) > 0 || r.Recorded > step {
			return false, nil // another replica took the step meanwhile
		}
		if r.Injected != injected {
			return false, errInjectedMeanwhile
		}
		r.Seen = injected
		r.Offered = []StepTools{offered}
		p.applyModelResponse(ctx, r, resp, now)
		return true, nil
	})
	if err != nil {
		return err
	}
	p.modelAnswered(ctx, run, step, resp.Message, nil, nil, before)
	return p.afterChange(ctx, run)
}

// recorded returns the record of step when one is stored already, so that its answer
// is applied instead of the model being asked again: the step came back because the
// replica that recorded the step stopped, or failed to store its state. The log is read
// only for a step asked for before (a redelivered message, or a step once leased), or a
// step this replica recorded.
func (p *Planner) recorded(ctx context.Context, cl claim, run *Run, step int) (*runstore.StepRecord, error) {
	if !p.rlog.Known(run.ID, step) && !cl.retried() && (run.Lease == nil || run.Lease.Owner == p.replica) {
		return nil, nil
	}
	rec, err := p.rlog.Step(ctx, run.ID, step)
	if errors.Is(err, runstore.ErrNoRecord) {
		return nil, nil
	}
	return rec, err
}

// nests reports whether the current step of r calls run_agent: such a step starts its
// nested runs once its state is stored.
func nests(r *Run) bool {
	for _, c := range r.StepCalls() {
		if c.Name == AgentToolName {
			return true
		}
	}
	return false
}

// newStepRecord applies the model's answer at the run's step to a copy of its control
// state and returns the step's record: the answer, the calls it made, how the previous
// step's calls ended, and the state it leaves.
func (p *Planner) newStepRecord(ctx context.Context, run *Run, resp *provider.Response, offered StepTools, now time.Time) *runstore.StepRecord {
	next := run.Control().Clone() // a deep copy: the record keeps what it is given
	step := next.Step
	rec := &runstore.StepRecord{Step: step, Closed: next.Calls, Offered: &offered, Seen: run.Injected}
	next.Seen = run.Injected
	next.Settled = askedApproval(next.Calls)
	next.Calls, next.Warnings, next.Lease = nil, nil, nil
	next.Reserved = nil // what the run holds for its tree stays the stored run's (applyStep)
	next.Offered = []StepTools{offered}
	msg := resp.Message
	msg.Role = provider.RoleAssistant
	rec.Message = msg
	p.applyModelResponse(ctx, next, resp, now)
	next.Recorded = step + 1
	rec.Calls = next.Calls
	rec.Warnings = next.Warnings
	rec.Retried = slices.Contains(next.RetriedSteps, step)
	rec.State = next.Control()
	return rec
}

// askedApproval returns the calls that asked for an approval (or have a sub-call that
// did): the step's calls the next step's control state keeps as Settled, so that
// the lists see how their approvals ended.
func askedApproval(calls []*CallRecord) []*CallRecord {
	var out []*CallRecord
	for _, c := range calls {
		asked := c.ApprovalRequestedAt != nil || c.Approval != nil
		for _, s := range c.Subs {
			asked = asked || s.ApprovalRequestedAt != nil || s.Approval != nil
		}
		if asked {
			out = append(out, c)
		}
	}
	return out
}

// end ends the run at step with t, unless it ended or moved on meanwhile, and does what
// its end calls for.
func (p *Planner) end(ctx context.Context, b stepBase, step int, t Termination, detail string) error {
	turn := b.run.Turn
	run, err := b.update(ctx, p, step, func(r *Run) (bool, error) {
		// t was decided on the state of turn: a run continued since (a follow-up reopened
		// it at this same step, with its own deadline and counters) is not ended by it.
		if r.Status == StatusDone || r.Turn != turn || r.Step != step || len(r.StepCalls()) > 0 || r.Recorded > step {
			return false, nil
		}
		r.Finish(t, detail, p.cfg.Now())
		return true, nil
	})
	if err != nil {
		return err
	}
	return p.afterChange(ctx, run)
}

// stopBeforeModel checks the stop conditions that forbid another model call.
func (p *Planner) stopBeforeModel(r *Run) (Termination, string) {
	now := p.cfg.Now()
	switch {
	case !r.Deadline.IsZero() && !now.Before(r.Deadline):
		return TerminationTimeout, fmt.Sprintf("the run's time limit of %s is up", r.Limits.Timeout.D())
	case budget.StepsStop(r) != "": // steps count per continuation, its nested runs' too
		return TerminationMaxSteps, budget.StepsStop(r)
	case budget.TokensStop(r) != "": // the tree's tokens: its own and its nested runs'
		return TerminationTokenBudget, budget.TokensStop(r)
	case r.Errors >= r.Limits.ErrorThreshold:
		return TerminationErrorThreshold, fmt.Sprintf("%d tool calls failed (threshold %d)", r.Errors, r.Limits.ErrorThreshold)
	case budget.CostStop(r) != "":
		return TerminationCostBudget, budget.CostStop(r)
	}
	return "", ""
}

// askModel calls the run's model (the step's claim is kept meanwhile: local.go). It returns
// the tools the model was offered too.
func (p *Planner) askModel(ctx context.Context, run *Run, msgs []provider.Message) (*provider.Response, StepTools, error) {
	model, ok := p.cfg.Models[run.Model]
	if !ok {
		return nil, StepTools{}, fmt.Errorf("model %q is not configured on this planner", run.Model)
	}
	defs, offered, err := p.stepTools(ctx, run, msgs)
	if err != nil {
		return nil, offered, err
	}
	req := provider.Request{System: run.System, Messages: msgs, Tools: defs, ToolChoice: run.ToolChoice}
	if budget.Budgeted(run) { // the most the answer may cost is reserved, its max_tokens capped to fit
		if err := p.budgets.Answer(ctx, run, &req); err != nil {
			return nil, offered, err
		}
	}
	mctx, cancel := run.Within(ctx, p.cfg.ModelTimeout)
	defer cancel()
	mctx, span := p.chatSpan(mctx, run, model)
	began := time.Now()
	offered.AskedAt = p.cfg.Now()
	resp, err := p.generate(mctx, run, model, req)
	endChat(span, resp, err)
	var usage provider.Usage
	if err == nil {
		usage = resp.Usage
	}
	offered.ModelMS = time.Since(began).Milliseconds()
	p.m.modelCall(run.Model, run.Tenant, time.Since(began), usage, err)
	if err != nil {
		return nil, offered, fmt.Errorf("model %s: %w", run.Model, err)
	}
	return resp, offered, nil
}

// applyModelResponse records the model's answer in the run's control state: usage, and a
// call record for every tool call (the assistant message is the step record's), answering at once those the planner can answer
// itself (unknown tool, invalid arguments, a loop warning, the depth limit), and those
// the run's policy hook denies (policy.go).
func (p *Planner) applyModelResponse(ctx context.Context, r *Run, resp *provider.Response, now time.Time) {
	r.Usage = r.Usage.Add(resp.Usage)
	r.StepUsage = resp.Usage
	r.Cost += p.cfg.Prices.ModelCost(r.Model, resp.Usage)
	if r.ParentID != "" {
		r.TreeSeq++ // its next charge to the runs it is nested in (package budget)
	}
	msg := resp.Message
	if len(msg.ToolCalls) == 0 && r.ToolChoice.Mode == provider.ChoiceRequired {
		if slices.Contains(r.RetriedSteps, r.Step-1) {
			r.Finish(TerminationToolRequired, fmt.Sprintf(
				"toolChoice is required, but the model answered without a tool call at steps %d and %d", r.Step-1, r.Step), now)
			return
		}
		// Asked once more, told why (runstore.RetryNudge, in the conversation after the step's
		// message); the answer is not taken as the run's answer.
		r.RetriedSteps = append(r.RetriedSteps, r.Step)
		r.Warnings = append(r.Warnings, fmt.Sprintf("step %d: the model answered without a tool call under toolChoice required; asked again", r.Step))
		r.Step++
		return
	}
	if len(msg.ToolCalls) == 0 {
		r.Answer = msg.Text
		r.Finish(TerminationCompleted, "", now)
		return
	}
	for i, tc := range msg.ToolCalls {
		c := &CallRecord{ID: callID(r.ID, r.Step, i), ModelCallID: tc.ID, Name: tc.Name,
			Arguments: tc.Arguments, Step: r.Step, Status: string(CallPending), CalledAt: now, Validated: true}
		r.Calls = append(r.Calls, c)
		r.CountCall()

		n := r.Loop.Add(callKey(tc.Name, tc.Arguments))
		if n >= r.Limits.LoopThreshold {
			warning := fmt.Sprintf("%s was called %d times in a row with the same arguments", tc.Name, n)
			switch r.Limits.LoopAction {
			case runrec.LoopStop:
				c.AnswerLocal(string(events.StatusError), tools.Errorf(codeLoopDetected, "%s; the run is stopped", warning), now)
				r.Finish(TerminationLoopDetected, warning, now)
				return
			case runrec.LoopInject:
				c.AnswerLocal(string(events.StatusError), tools.Errorf(codeLoopDetected,
					"%s; calling it again will not give a different result. Change the arguments, use another tool, or answer with what you have", warning), now)
				r.Warnings = append(r.Warnings, warning)
				continue
			default:
				r.Warnings = append(r.Warnings, warning)
			}
		}
		p.checkCall(r, c, now)
	}
	p.askPolicy(ctx, r)
	refused := p.cfg.Prices.ChargeStep(r, now)
	for _, c := range r.StepCalls() {
		if !c.Done() { // it goes out: the run called the tool
			r.NoteCalled(c.Name)
		}
	}
	if refused {
		return
	}
	if stepComplete(r) {
		p.completeStep(r, now)
	}
}

// codeLoopDetected is the error code of a call answered by the loop detector.
const codeLoopDetected tools.Code = "loop_detected"

// checkCall validates one call before it goes to the fleet, answering it locally when it
// cannot go: a tool unknown to the catalog (no_such_tool), a tool the run does not allow
// at this step (not_allowed), arguments that break the schema, or a nested run past the
// depth limit. A refused call counts as a failed call, like an unknown tool: only invalid
// arguments get a free repair.
func (p *Planner) checkCall(r *Run, c *CallRecord, now time.Time) {
	if _, inCatalog := p.cat.get(c.Name); !inCatalog && c.Name != AgentToolName {
		c.AnswerLocal(string(events.StatusNoSuchTool), tools.Errorf(tools.CodeNoSuchTool,
			"tool %q is not available: no executor serves it; %s", c.Name, mayCall(r)), now)
		r.Errors++
		return
	}
	if why := callRefusal(r, c.Name); why != "" {
		c.AnswerLocal(string(events.StatusError), tools.Errorf(tools.CodeNotAllowed, "%s; %s", why, mayCall(r)), now)
		r.Errors++
		return
	}
	if c.Name == AgentToolName {
		if err := p.checkAgentCall(r, c); err != nil {
			c.AnswerLocal(string(events.StatusError), err, now)
			if !budget.IsCode(err.Code) { // the run ends by that budget at its next step
				r.Errors++
			}
		}
		return
	}
	refuse := func(te *tools.Error) {
		c.AnswerLocal(string(events.StatusOf(te)), te, now)
		if te.Code == tools.CodeInvalidInput && !repaired(r, c.Name) {
			r.Repaired = append(r.Repaired, c.Name) // the one free repair
			return
		}
		r.Errors++
	}
	call, err := p.cat.hydrateModelCall(c.Name, c.Arguments)
	if err != nil {
		refuse(tools.AsError(err, tools.CodeInvalidInput))
		return
	}
	c.Validated = call.Validated()
	c.NoSchemaMode = call.Definition().NoSchema()
	c.Arguments = call.Arguments()
	if d := call.Definition(); d.Composite != nil {
		// Each sub-call is held to the same rules (composite.go).
		subs, validated, te := p.checkSubCalls(r, c.Name, c.ID, nil, d, c.Arguments)
		if te != nil {
			refuse(te)
			return
		}
		c.Subs, c.Validated = subs, c.Validated && validated
	}
}

// refusal says why the run may not call name at its current step, or "" when it may.
// The agent tool at the depth limit is left to checkAgentCall, which says so.
func callRefusal(r *Run, name string) string {
	switch {
	case r.ToolChoice.Mode == provider.ChoiceNone:
		return fmt.Sprintf("tool %q was not run: toolChoice is none, so no tool may be called", name)
	case r.ToolChoice.Mode == provider.ChoiceTool && name != r.ToolChoice.Tool:
		return fmt.Sprintf("tool %q was not run: toolChoice names %q, the only tool that may be called", name, r.ToolChoice.Tool)
	}
	if why := toolSetRefusal(r, name); why != "" {
		return fmt.Sprintf("tool %q was not run: %s", name, why)
	}
	return ""
}

// toolSetRefusal says why name is outside the run's tool set at its current step (its
// tools or activeTools, less the tools disabled for it, narrowed to the tools offered
// at the step), or "" when it is inside. It is refusal without toolChoice, which only
// says which tool the model itself calls: a composite's sub-calls are held to it
// (composite.go).
func toolSetRefusal(r *Run, name string) string {
	switch {
	case !allows(r, name):
		return "it is not among this run's tools"
	case slices.Contains(r.Disabled, name):
		return "it is disabled for this run"
	case name == AgentToolName && r.Depth >= r.Limits.MaxDepth:
		return ""
	}
	if o := r.OfferedAt(r.Step); o != nil && !slices.Contains(o.Tools, name) {
		return "it was not offered at this step"
	}
	return ""
}

// mayCall tells the model what it may call at the current step.
func mayCall(r *Run) string {
	switch r.ToolChoice.Mode {
	case provider.ChoiceNone:
		return "answer in text"
	case provider.ChoiceTool:
		return fmt.Sprintf("call %s", r.ToolChoice.Tool)
	}
	if o := r.OfferedAt(r.Step); o != nil {
		return fmt.Sprintf("tools you may call: %v", o.Tools)
	}
	if r.Tools == nil {
		return "call only the tools you were offered"
	}
	return fmt.Sprintf("tools you may call: %v", r.Tools)
}

// dispatch publishes the current step's unanswered calls to the fleet, in parallel, and
// starts its nested runs. A step resumed after a crash is dispatched again: the calls
// carry the same ids, so JetStream drops the repeats, and a nested run is created once.
func (p *Planner) dispatch(ctx context.Context, run *Run) error {
	sent, err := p.publishCalls(ctx, run)
	if err != nil {
		return err
	}
	return sent(ctx)
}

// publishCalls is dispatch without the wait for the calls' acknowledgements: it returns
// a function that waits for them.
func (p *Planner) publishCalls(ctx context.Context, run *Run) (wait func(context.Context) error, err error) {
	msgs, err := p.callMessages(ctx, run)
	if err != nil {
		return nil, err
	}
	return p.sendCalls(ctx, msgs)
}

// callMessages announces the current step's unanswered calls (tool_called) and encodes
// them for sendCalls, and starts the step's nested runs. With parallel: false only the
// first goes: the next goes out when its result is in (dispatchNext).
func (p *Planner) callMessages(ctx context.Context, run *Run) ([]*nats.Msg, error) {
	calls, err := p.withArguments(ctx, run, run.StepCalls())
	if err != nil {
		return nil, err
	}
	var msgs []*nats.Msg
	sc := &stepContext{p: p, run: run} // for tools that ask for their run (runcontext.go)
	for _, c := range calls {
		if c.Local || c.Done() {
			continue
		}
		if c.Name == AgentToolName {
			if err := p.startChild(ctx, run, c); err != nil {
				return nil, err
			}
			if run.Sequential {
				break
			}
			continue
		}
		data := callData(c, run.Metadata) // large arguments by reference (argsref.go)
		if err := sc.attach(ctx, c, &data); err != nil {
			return nil, err
		}
		msg, err := events.NewCall(events.CallOptions{Source: p.cfg.Source, ID: c.ID, RunID: run.ID, Deadline: run.Deadline,
			TraceParent: run.TraceParent, TraceState: run.TraceState, Caller: run.Caller()}, data)
		if err != nil {
			return nil, err
		}
		// Announced before the call goes out, so it precedes its result's announcement.
		p.emit(ctx, run, "tool_called", run.Step, c.ID, calledDetail(c))
		msgs = append(msgs, msg)
		if run.Sequential {
			break
		}
	}
	return msgs, nil
}

// sendCalls publishes the calls encoded by callMessages, waiting for room while
// JetStream falls behind (bounded by ctx), and returns a function that waits for their
// acknowledgements.
func (p *Planner) sendCalls(ctx context.Context, msgs []*nats.Msg) (wait func(context.Context) error, err error) {
	futures := make([]jetstream.PubAckFuture, 0, len(msgs))
	for _, msg := range msgs {
		f, err := p.win.Publish(ctx, msg)
		if err != nil {
			return nil, fmt.Errorf("publish call %s: %w", msg.Header.Get(jetstream.MsgIDHeader), err)
		}
		futures = append(futures, f)
	}
	return func(ctx context.Context) error {
		for _, f := range futures {
			// A late PubAck, or its twin (a step taken twice) being stored: published
			// again under its id until settled.
			if err := jsutil.Settle(ctx, p.js, f, runstore.TryTimeout); err != nil {
				return fmt.Errorf("publish call: %w", err)
			}
		}
		return nil
	}, nil
}

// withArguments returns copies of calls of the run's current step with their arguments,
// which the control state does not hold: they are in the step's record.
func (p *Planner) withArguments(ctx context.Context, run *Run, calls []*CallRecord) ([]*CallRecord, error) {
	out := make([]*CallRecord, len(calls))
	var rec *runstore.StepRecord
	for i, c := range calls {
		cc := *c
		out[i] = &cc
		if cc.Arguments != nil {
			continue
		}
		if rec == nil {
			var err error
			if rec, err = p.rlog.Step(ctx, run.ID, c.Step); err != nil {
				return nil, fmt.Errorf("step %d of run %s: %w", c.Step, run.ID, err)
			}
		}
		for _, made := range rec.Calls {
			if made.ID == c.ID {
				cc.Arguments = made.Arguments
				withArgumentsRef(&cc, made)
			}
		}
	}
	return out, nil
}

// afterChange does what a stored change of the run calls for: the next step's request, or
// the end of the run. Both are idempotent.
func (p *Planner) afterChange(ctx context.Context, run *Run) error {
	if run.Status == StatusDone {
		return p.afterDone(ctx, run)
	}
	if run.Status == StatusPaused {
		return p.afterPause(ctx, run)
	}
	if len(run.StepCalls()) == 0 {
		return p.publishAdvanceTurn(ctx, run.ID, run.Step, run.Turn)
	}
	return nil
}

// jsonText returns v as JSON, or null.
func jsonText(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage("null")
	}
	return b
}
