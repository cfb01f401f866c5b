package planner

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/internal/planner/runrec"
	"github.com/toolfleet/toolfleet/internal/planner/runstore"
	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// FollowUp adds input to a run and continues it: the body of POST /v1/runs/{id}/messages.
type FollowUp struct {
	// Input is a shorthand for one user message after Messages.
	Input    string             `json:"input,omitempty"`
	Messages []provider.Message `json:"messages,omitempty"`
	// ID is the client's id of the follow-up (an idempotency key): a follow-up whose id
	// the run has taken already is not added again.
	ID string `json:"id,omitempty"`
	// Tools, if set, enables and disables tools for the continuation (its reminder and
	// id are not used: the follow-up is the message).
	Tools *ToolsChange `json:"tools,omitempty"`
	// Caller is who sends it (the API sets it from the bearer token): only the run's
	// tenant may.
	Caller events.Identity `json:"-"`
}

// maxInjections bounds the message records of one run.
const maxInjections = 10000

// errInjectedMeanwhile: messages were added to the run while the model answered its
// step without them; the step is taken again.
var errInjectedMeanwhile = errors.New("messages were added while the model answered")

// Continue adds the follow-up's messages to the run id and continues it:
//
//   - a run that ended (completed, final_tool, max_steps, timeout, error_threshold,
//     loop_detected, model_error, tool_required) is reopened: it keeps its id and its
//     conversation, the follow-up joins it, and the next step is asked for. Limits apply
//     per continuation: its steps count from the continuation's first step (MaxSteps),
//     its wall clock starts again (Timeout), its failed calls and the loop window start
//     from zero; the token budget (TokenBudget) is the whole run's. Calls of its last step
//     still without a result are answered canceled (and a cancel event is published);
//   - a running run takes the messages before its next model call;
//   - a canceled run, a run ended by storage_error or token_budget, and a nested run
//     (continued through its parent) are refused with 409.
//
// The returned bool is false when the follow-up's ID had been taken already: nothing was
// added. It is safe to call from any replica, at any time: messages go to the run log
// once, and the compare-and-set on the run makes them part of it.
func (p *Planner) Continue(ctx context.Context, id string, f FollowUp) (*Run, bool, error) {
	msgs := slices.Clone(f.Messages)
	if strings.TrimSpace(f.Input) != "" {
		msgs = append(msgs, provider.Message{Role: provider.RoleUser, Text: f.Input})
	}
	if len(msgs) == 0 {
		return nil, false, requestErrorf("give the follow-up an input or messages")
	}
	for i, m := range msgs {
		switch m.Role {
		case provider.RoleUser, provider.RoleAssistant:
		default:
			return nil, false, requestErrorf("messages[%d].role must be user or assistant, got %q", i, m.Role)
		}
		if len(m.ToolCalls) > 0 || len(m.ToolResults) > 0 {
			return nil, false, requestErrorf("messages[%d]: a follow-up carries text, not tool calls or results", i)
		}
	}
	if f.ID != "" && len(f.ID) > 256 {
		return nil, false, requestErrorf("id is longer than 256 bytes")
	}
	var change *ToolsChange
	if !f.Tools.Empty() {
		change = &ToolsChange{Enable: f.Tools.Enable, Disable: f.Tools.Disable}
	}
	return p.inject(ctx, id, f.Caller, runstore.MessageRecord{Key: f.ID, Messages: msgs, Tools: change, By: f.Caller}, true)
}

// continuable says, as an API error, why run cannot take more messages (cont: and go on).
func continuable(r *Run, cont bool) error {
	if r.Status != StatusDone {
		return nil
	}
	switch {
	case r.Termination == TerminationCanceled || r.Termination == TerminationStorageError:
		return conflictf("run %s ended %s: it cannot be continued", r.ID, r.Termination)
	case !cont:
		return nil
	case r.Termination == TerminationTokenBudget:
		return conflictf("run %s used its token budget of %d: it cannot be continued", r.ID, r.Limits.TokenBudget)
	case r.ParentID != "":
		return conflictf("run %s is a nested run: continue its parent %s", r.ID, r.ParentID)
	}
	return nil
}

// inject adds the messages of rec to the run (cont: continuing a run that ended) and
// returns the run as stored; added is false for a repeat of a key the run has already.
func (p *Planner) inject(ctx context.Context, id string, caller events.Identity, rec runstore.MessageRecord, cont bool) (*Run, bool, error) {
	run, _, err := p.runs.Get(ctx, id)
	if errors.Is(err, runstore.ErrNotFound) || err == nil && !visibleTo(run, caller) {
		return nil, false, notFoundf("no run %q", id)
	}
	if err != nil {
		return nil, false, err
	}
	if err := p.mayAct(run, caller, "send messages to"); err != nil {
		return nil, false, err
	}
	if rec.Key != "" {
		for k := range run.Injected {
			got, err := p.rlog.Injection(ctx, id, k)
			if err != nil {
				return nil, false, err
			}
			if got.Key == rec.Key {
				return run, false, nil
			}
		}
	}
	if err := continuable(run, cont); err != nil {
		return run, false, err
	}
	if err := p.checkTools(run, caller, rec.Tools); err != nil {
		return nil, false, err
	}
	for k := run.Injected; ; k++ {
		if k >= maxInjections {
			return run, false, conflictf("run %s has taken %d message records, the most a run takes", id, maxInjections)
		}
		wrote, err := p.rlog.PutMessage(ctx, id, k, &rec)
		if err != nil {
			if runstore.IsPermanent(err) {
				return nil, false, &APIError{Status: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("the messages cannot be stored: %v", err)}
			}
			return nil, false, err
		}
		stored := &rec
		if !wrote { // record k is there: another request's (or an earlier try of this one)
			if stored, err = p.rlog.Injection(ctx, id, k); err != nil {
				return nil, false, err
			}
		}
		var closed []*CallRecord
		run, err = p.applyInjection(ctx, id, k, stored, cont, &closed)
		if err != nil {
			return run, false, err
		}
		if len(closed) > 0 {
			p.cancelCalls(ctx, run, closed, stored.By)
		}
		if stored.Key != rec.Key || !wrote && rec.Key == "" {
			continue // record k was another request's: it is applied; write ours after it
		}
		if run.Status == StatusRunning {
			if err := p.afterChange(ctx, run); err != nil {
				return run, true, err
			}
		}
		return run, true, nil
	}
}

// applyInjection makes message record k (rec) part of the run: the run counts it, takes
// its tools change and its caller as an actor and, with cont, a run that ended is
// reopened. closed receives the calls reopening answered canceled (as they were before,
// for their cancel events).
func (p *Planner) applyInjection(ctx context.Context, id string, k int, rec *runstore.MessageRecord, cont bool, closed *[]*CallRecord) (*Run, error) {
	for {
		*closed = nil
		needAnswer := -1
		run, err := p.runs.Update(ctx, id, func(r *Run) (bool, error) {
			*closed, needAnswer = nil, -1
			if r.Injected != k {
				return false, nil // applied already
			}
			reopen := cont && r.Status == StatusDone && continuable(r, true) == nil
			if reopen && r.AnswerUnrecorded() && !p.rlog.Known(r.ID, r.Step) {
				needAnswer = r.Step
				return false, nil
			}
			r.Injected = k + 1
			applyTools(r, rec.Tools)
			acted(r, rec.By)
			if reopen {
				*closed = p.reopen(r, p.cfg.Now())
			}
			return true, nil
		})
		if err != nil || needAnswer < 0 {
			return run, err
		}
		// The answer that completed the run has no step record: write it, so that the
		// conversation can go on after it.
		if err := p.recordAnswer(ctx, run); err != nil {
			return run, err
		}
	}
}

// recordAnswer writes the step record of the answer that completed run (once: any
// replica writes the same).
func (p *Planner) recordAnswer(ctx context.Context, run *Run) error {
	rec := &runstore.StepRecord{Step: run.Step, Message: provider.Message{Role: provider.RoleAssistant, Text: run.Answer},
		Seen: run.Seen, State: run.Control()}
	if o := run.OfferedAt(run.Step); o != nil {
		oc := *o
		rec.Offered = &oc
	}
	_, err := p.rlog.WriteStep(ctx, run.ID, rec)
	return err
}

// reopen continues the ended run r at its next step, with fresh per-continuation
// limits, and returns copies of the calls it answered canceled.
func (p *Planner) reopen(r *Run, now time.Time) []*CallRecord {
	var closed []*CallRecord
	for _, c := range r.StepCalls() {
		if c.Done() {
			continue
		}
		if !c.Local {
			cc := *c
			closed = append(closed, &cc)
		}
		c.AnswerLocal(string(events.StatusCanceled), tools.Errorf(tools.CodeCanceled,
			"the run ended (%s) before the call's result came", r.Termination), now)
	}
	switch {
	case r.AnswerUnrecorded():
		r.Recorded = r.Step + 1
		r.Step++
	case r.Recorded > r.Step:
		r.Step = r.Recorded
	}
	r.Status, r.Termination, r.Detail, r.FinishedAt = StatusRunning, "", "", nil
	r.Answer, r.AnswerCall = "", ""
	r.Errors, r.Loop = 0, runrec.LoopWindow{}
	r.Turn++
	r.TurnStart = r.Step
	r.Deadline = now.Add(r.Limits.Timeout.D())
	return closed
}

// keepControls carries what callers changed on the run (ctl, the deadline of its
// continuation) over to the state st of a step recorded before they did.
func keepControls(st *Run, ctl runrec.Controls, deadline time.Time) {
	seen := st.Seen
	st.Controls = ctl
	st.Seen = seen
	st.Deadline = deadline
}

// publishAdvanceTurn is publishAdvance for a run in its turn-th continuation: the
// message id names the turn, so that a step asked again in a later turn is not a
// duplicate of the same step asked in an earlier one.
func (p *Planner) publishAdvanceTurn(ctx context.Context, run string, step, turn int) error {
	if turn == 0 {
		return p.publishAdvance(ctx, run, step)
	}
	msg, err := events.NewPlanStep(p.cfg.Source, run, step, p.cfg.Now())
	if err != nil {
		return err
	}
	id := msg.Header.Get(jetstream.MsgIDHeader) + "-t" + strconv.Itoa(turn)
	msg.Header.Set(jetstream.MsgIDHeader, id)
	msg.Header.Set("ce-id", id) // the event id and the message id must be equal
	if _, err := jsutil.PublishSettled(ctx, p.js, msg); err != nil {
		return fmt.Errorf("publish step %d of run %s: %w", step, run, err)
	}
	return nil
}
