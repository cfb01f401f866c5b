package planner

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/toolfleet/toolfleet/internal/planner/runrec"
	"github.com/toolfleet/toolfleet/internal/planner/runstore"
	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// Pause and resume: the resumable loop. A run pauses at a step boundary — once every
// call of a step has its result and before the model is asked for the next step — when
// its start asked for it (StartRequest.Pause: after every step, or after a step that
// called one of the named tools) or a caller asked for it ([Planner.Pause], POST
// /v1/runs/{id}/pause). A paused run has status paused and Run.Paused says since when
// and why; nothing of it runs: it is a value in the runs bucket like any other (no
// goroutine, timer or lease per run, and the sweeper does not watch it), so it waits at
// no cost and survives planner restarts. Its wall clock does not run while it waits:
// [Planner.Resume] (POST /v1/runs/{id}/resume) starts it again from the resume, like a
// continuation's, and the run goes on with the step it paused before.
//
// A resume may edit the conversation first: replace messages, drop them, compact a
// range into a summary message, and add messages after it. The edit is a message record
// of the run log (toolfleet.runlog.<run>.msg.<k>, like a follow-up's), applied where
// the model's conversation reaches it: the model sees the edited conversation from then
// on, while the run log, GET /v1/runs/{id}/messages and the run's events keep the
// original (the record says what was replaced, dropped and summarized, by whom). Edits
// name messages by their index in the conversation as the model would be asked it at
// the resume (GET /v1/runs/{id}/messages?view=model), and must leave every call id
// with exactly one result after it and no result without its call ([pairedCalls],
// checked on the whole edited conversation). A resume may also change the run's
// limits (within their ranges, as at start) and its pause options.
//
// Who may: the rule of follow-ups (auth.go): the owner's role or an operator role of
// the run's tenant (another tenant: 404; another role: 403). Nested runs are paused and
// resumed with their parent only (409). A follow-up sent to a paused run is kept and
// the run stays paused: the model sees it after the resume. A paused run can be
// canceled. A pause asked of a run whose next model answer ends it has no effect.

// pauseAtBoundary pauses r, which has just moved past its finished step, when its pause
// options or a pause request say so.
func pauseAtBoundary(r *Run, now time.Time) {
	if r.Status != StatusRunning || r.ParentID != "" {
		return
	}
	p := &runrec.RunPause{At: now, Step: r.Step}
	switch {
	case r.PauseRequested != nil:
		p.Reason, p.By, p.Why = "requested", r.PauseRequested.By, r.PauseRequested.Reason
	case r.PauseOn == nil:
		return
	case r.PauseOn.AfterEveryStep:
		p.Reason = "after_step"
	default:
		for _, c := range r.Calls {
			if c.Step == r.Step-1 && slices.Contains(r.PauseOn.AfterTools, c.Name) {
				p.Reason, p.Tool = "after_tool", c.Name
				break
			}
		}
		if p.Reason == "" {
			return
		}
	}
	r.Status, r.Paused, r.PauseRequested = StatusPaused, p, nil
}

// settled reports whether a run in status s waits for a caller (it ended, or is
// paused): what [Planner.Wait] waits for.
func settled(s Status) bool { return s == StatusDone || s == StatusPaused }

// afterPause announces that run paused (once per step: the event's id names it).
func (p *Planner) afterPause(ctx context.Context, run *Run) error {
	p.emit(ctx, run, "paused", run.Step, "", run.Paused)
	return nil
}

// Pause asks the run id to pause at its next step boundary, acting for caller: a paused
// run is returned as it is; a run that ended, and a nested run, are refused with 409.
func (p *Planner) Pause(ctx context.Context, id string, caller events.Identity, req PauseRequest) (*Run, error) {
	req.At, req.By = p.cfg.Now().UTC(), DescribeCaller(caller) // the record names the caller, never a by it wrote
	if len(req.Reason) > 1024 || len(req.By) > 256 {
		return nil, requestErrorf("by is at most 256 bytes and reason at most 1024")
	}
	run, err := p.runs.Update(ctx, id, func(r *Run) (bool, error) {
		if err := p.mayAct(r, caller, "pause"); err != nil {
			return false, err
		}
		switch {
		case r.Status == StatusDone:
			return false, alreadyDone(r)
		case r.ParentID != "":
			return false, conflictf("run %s is a nested run: pause its parent %s", r.ID, r.ParentID)
		case r.Status == StatusPaused || r.PauseRequested != nil:
			return false, nil
		}
		r.PauseRequested = &req
		acted(r, caller)
		return true, nil
	})
	if errors.Is(err, runstore.ErrNotFound) {
		return nil, notFoundf("no run %q", id)
	}
	return run, err
}

// ResumeRequest is the body of POST /v1/runs/{id}/resume: all of it optional. Indices
// name messages of the conversation as the model would be asked it now (GET
// /v1/runs/{id}/messages?view=model), all as it stands before the edit.
type ResumeRequest struct {
	// Replace replaces messages (a tool message's replacement must answer the same calls).
	Replace []MessageReplacement `json:"replace,omitempty"`
	// Drop removes messages.
	Drop []int `json:"drop,omitempty"`
	// Compact replaces messages From..To-1 by one message holding Summary.
	Compact *Compaction `json:"compact,omitempty"`
	// Input (one user message) and Messages are added after the edited conversation.
	Input    string             `json:"input,omitempty"`
	Messages []provider.Message `json:"messages,omitempty"`
	// Limits, if set, replaces the run's limits field by field (zero fields keep theirs),
	// within the ranges a start allows.
	Limits *Limits `json:"limits,omitempty"`
	// Pause, if set, replaces the run's pause options ({} pauses no more by itself).
	Pause *PauseOptions `json:"pause,omitempty"`
	// Caller is who resumes (the API sets it from the bearer token).
	Caller events.Identity `json:"-"`
}

// check refuses what is wrong with the request itself.
func (q *ResumeRequest) check() error {
	if err := q.Pause.Validate(); err != nil {
		return err
	}
	for i, m := range q.Messages {
		if m.Role != provider.RoleUser && m.Role != provider.RoleAssistant {
			return fmt.Errorf("messages[%d].role must be user or assistant, got %q", i, m.Role)
		}
		if len(m.ToolCalls) > 0 || len(m.ToolResults) > 0 {
			return fmt.Errorf("messages[%d]: added messages carry text, not tool calls or results", i)
		}
	}
	return nil
}

// added returns the messages the resume adds after the edit.
func (q *ResumeRequest) added() []provider.Message {
	msgs := slices.Clone(q.Messages)
	if strings.TrimSpace(q.Input) != "" {
		msgs = append(msgs, provider.Message{Role: provider.RoleUser, Text: q.Input})
	}
	return msgs
}

// resumedLimits returns the run's limits changed by ch, or why they cannot be.
func (p *Planner) resumedLimits(r *Run, ch *Limits) (Limits, error) {
	l := r.Limits
	if ch == nil {
		return l, nil
	}
	if ch.MaxDepth != 0 {
		return l, errors.New("limits.maxDepth cannot change after the start")
	}
	set := func(dst *int, v int) {
		if v != 0 {
			*dst = v
		}
	}
	set(&l.MaxSteps, ch.MaxSteps)
	set(&l.TokenBudget, ch.TokenBudget)
	set(&l.ErrorThreshold, ch.ErrorThreshold)
	set(&l.LoopThreshold, ch.LoopThreshold)
	set(&l.ContextBudget, ch.ContextBudget)
	if ch.Timeout != 0 {
		l.Timeout = ch.Timeout
	}
	if ch.CostBudget != 0 {
		l.CostBudget = ch.CostBudget
	}
	if ch.LoopAction != "" {
		l.LoopAction = ch.LoopAction
	}
	if err := l.Validate(); err != nil {
		return r.Limits, err
	}
	if l.CostBudget > 0 && !p.cfg.Prices.Priced(r.Model) {
		return r.Limits, fmt.Errorf("limits.costBudget needs a price for model %q, and the planner's price table has none", r.Model)
	}
	return l, nil
}

// Resume resumes the paused run id with req's edits and changes and asks for its next
// step. A run that is not paused is refused with 409 (and returned).
func (p *Planner) Resume(ctx context.Context, id string, req ResumeRequest) (*Run, error) {
	if err := req.check(); err != nil {
		return nil, requestErrorf("%v", err)
	}
	added := req.added()
	for {
		run, _, err := p.runs.Get(ctx, id)
		if errors.Is(err, runstore.ErrNotFound) || err == nil && !visibleTo(run, req.Caller) {
			return nil, notFoundf("no run %q", id)
		}
		if err != nil {
			return nil, err
		}
		if err := p.mayAct(run, req.Caller, "resume"); err != nil {
			return nil, err
		}
		if run.Status != StatusPaused {
			return run, conflictf("run %s is %s, not paused", id, run.Status)
		}
		limits, err := p.resumedLimits(run, req.Limits)
		if err != nil {
			return nil, requestErrorf("%v", err)
		}
		rec := runstore.MessageRecord{Messages: added, By: req.Caller}
		if len(req.Replace)+len(req.Drop) > 0 || req.Compact != nil {
			msgs, err := p.rlog.Conversation(ctx, run)
			if err != nil {
				return nil, err
			}
			rec.Edit = &runrec.ConversationEdit{Replace: req.Replace, Drop: req.Drop, Compact: req.Compact, Before: len(msgs)}
			if _, err := rec.Edit.Check(msgs); err != nil {
				return nil, requestErrorf("%v", err)
			}
		}
		k := run.Injected
		if k >= maxInjections {
			return run, conflictf("run %s has taken %d message records, the most a run takes", id, maxInjections)
		}
		if len(rec.Messages) > 0 || rec.Edit != nil {
			wrote, err := p.rlog.PutMessage(ctx, id, k, &rec)
			if err != nil {
				if runstore.IsPermanent(err) {
					return nil, &APIError{Status: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("the resume's messages cannot be stored: %v", err)}
				}
				return nil, err
			}
			if !wrote { // record k is another request's: count it, and edit what it leaves
				stored, err := p.rlog.Injection(ctx, id, k)
				if err != nil {
					return nil, err
				}
				var closed []*CallRecord
				if _, err := p.applyInjection(ctx, id, k, stored, false, &closed); err != nil {
					return nil, err
				}
				continue
			}
			k++
		}
		now := p.cfg.Now()
		resumed := false
		run, err = p.runs.Update(ctx, id, func(r *Run) (bool, error) {
			resumed = false
			if r.Status != StatusPaused {
				return false, nil
			}
			r.Injected = max(r.Injected, k)
			if r.Paused != nil {
				r.PausedMS += max(0, now.Sub(r.Paused.At).Milliseconds()) // its duration leaves it out
			}
			r.Status, r.Paused, r.PauseRequested = StatusRunning, nil, nil
			r.Limits = limits
			if req.Pause != nil {
				r.PauseOn = pauseOn(req.Pause)
			}
			r.Deadline = now.Add(limits.Timeout.D()) // the wall clock starts again
			acted(r, req.Caller)
			resumed = true
			return true, nil
		})
		if err != nil {
			return nil, err
		}
		if !resumed {
			return run, conflictf("run %s is %s, not paused", id, run.Status)
		}
		detail := map[string]any{"by": DescribeCaller(req.Caller), "added": len(added), "limits": run.Limits}
		if rec.Edit != nil {
			detail["edit"] = rec.Edit
		}
		p.emit(ctx, run, "resumed", run.Step, "", detail)
		return run, p.afterChange(ctx, run)
	}
}

// ModelConversation returns the conversation the paused run id would be asked with now
// (edits applied), for caller: what resume edits' indices name. A run that is not
// paused is refused with 409.
func (p *Planner) ModelConversation(ctx context.Context, id string, caller events.Identity) ([]provider.Message, error) {
	run, _, err := p.runs.Get(ctx, id)
	if errors.Is(err, runstore.ErrNotFound) || err == nil && !visibleTo(run, caller) {
		return nil, notFoundf("no run %q", id)
	}
	if err != nil {
		return nil, err
	}
	if run.Status != StatusPaused {
		return nil, conflictf("run %s is %s: the model's view is given for a paused run", id, run.Status)
	}
	return p.rlog.Conversation(ctx, run)
}
