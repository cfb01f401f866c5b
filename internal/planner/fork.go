package planner

import (
	"context"
	"errors"
	"slices"

	"github.com/toolfleet/toolfleet/internal/planner/runrec"
	"github.com/toolfleet/toolfleet/internal/planner/runstore"
	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// Fork: rerun a run from any step. [Planner.Fork] (POST /v1/runs/{id}/fork) starts a
// new run whose conversation is the original's as its model was asked it at step k
// (runstore.Log.ConversationAt: the input, steps 0..k-1 with their calls' results, the
// messages added before step k, resume edits applied), edited with a resume's edits
// (replace, drop, compact, input, messages, limits, pause: [ResumeRequest], checked the
// same way), and with another model or tool set if asked. The calls of steps before k
// are not run again: their recorded results are in the fork's conversation as they
// were (no side effect happens twice); the fork's step 0 is step k taken anew. Starting
// a fork reads the original's records and outputs once, each kind in one batched
// direct get; it asks no model and calls no tool. BenchmarkForkLongRun (a 200-step run
// forked at step 199): p50 17-42 ms on 2 cores under a load average of 20, about 10 ms
// of it the fork's own CPU, mostly decoding the 199 records.
//
// The fork is a run like any other, started for the caller: it runs with the forker's
// identity and rights and counts against its own limits (the original's unless the
// request changes them), from zero — the reused steps cost it nothing. Its tools are
// the request's (each checked as a start checks them: a tool the forker may not call
// is refused, 403), or else the original's without those the forker may not call (a
// fork never gains a tool its forker may not call: a user's fork of an admin's run
// cannot call the admin's tools); its model is the request's or the original's, and
// one the forker may not use (Config.ModelRoles) is refused (403). Forking is allowed
// to whoever may see the run (its tenant; another tenant gets 404). It records
// Run.ForkedFrom {run, step}, shown by GET /v1/runs/{id} and in lists (filter
// forkedFrom=).
//
// A run still running (or paused) may be forked from a step it has finished: any step
// up to its last recorded one, and the step after it once that one's calls have all
// ended (409 while they run). fromStep outside 0..Recorded is a 400.

// ForkPoint names the run and step a fork was forked from (Run.ForkedFrom).
type ForkPoint = runrec.ForkPoint

// ForkRequest is the body of POST /v1/runs/{id}/fork.
type ForkRequest struct {
	// FromStep is the step taken anew: the fork's conversation is the original's up
	// to the start of that step.
	FromStep int `json:"fromStep"`
	// The edits and changes of a resume, on the conversation up to FromStep (indices as
	// in the model's view of it, which GET /v1/runs/{id}/messages?view=model&step=K shows).
	ResumeRequest
	// Model and Tools, if set, replace the original's.
	Model string   `json:"model,omitempty"`
	Tools []string `json:"tools,omitempty"`
}

// Fork starts a fork of run id from req.FromStep, for req.Caller (see above).
func (p *Planner) Fork(ctx context.Context, id string, req ForkRequest) (*Run, error) {
	release, err := p.admit.admit()
	if err != nil {
		return nil, err
	}
	defer release()
	sreq, err := p.forkStart(ctx, id, req)
	if err != nil {
		return nil, err
	}
	return p.start(ctx, sreq, newRunID(), nil, "")
}

// forkStart is the start request of a fork of run id: the original's, the
// conversation up to req.FromStep edited by req, and req's changes.
func (p *Planner) forkStart(ctx context.Context, id string, req ForkRequest) (StartRequest, error) {
	if err := req.check(); err != nil {
		return StartRequest{}, requestErrorf("%v", err)
	}
	orig, _, err := p.runs.Get(ctx, id)
	if errors.Is(err, runstore.ErrNotFound) || err == nil && !visibleTo(orig, req.Caller) {
		return StartRequest{}, notFoundf("no run %q", id)
	}
	if err != nil {
		return StartRequest{}, err
	}
	if outOfRange, err := runstore.ForkableAt(orig, req.FromStep); outOfRange {
		return StartRequest{}, requestErrorf("%v", err)
	} else if err != nil {
		return StartRequest{}, conflictf("%v", err)
	}
	limits, err := p.resumedLimits(orig, req.Limits)
	if err != nil {
		return StartRequest{}, requestErrorf("%v", err)
	}
	msgs, err := p.rlog.ConversationAt(ctx, orig, req.FromStep)
	if err != nil {
		return StartRequest{}, err
	}
	edit := runrec.ConversationEdit{Replace: req.Replace, Drop: req.Drop, Compact: req.Compact, Before: len(msgs)}
	if msgs, err = edit.Check(msgs); err != nil {
		return StartRequest{}, requestErrorf("%v", err)
	}
	msgs = append(msgs, req.added()...)
	sreq := StartRequest{Messages: msgs, System: orig.System, Model: req.Model, Tools: req.Tools,
		ToolChoice: orig.ToolChoice.String(), Limits: limits, Pick: &orig.Pick, Metadata: orig.Metadata,
		StopWhen: orig.StopWhen, StopHook: orig.StopHook, PolicyHook: orig.PolicyHook, Pause: orig.PauseOn,
		Caller: req.Caller, forkedFrom: &ForkPoint{Run: orig.ID, Step: req.FromStep}}
	if sreq.Model == "" {
		sreq.Model = orig.Model
	}
	if req.Pause != nil {
		sreq.Pause = req.Pause
	}
	parallel := !orig.Sequential
	sreq.Parallel = &parallel
	if req.Tools == nil && orig.Tools != nil {
		// The original's tools, less those the forker may not call.
		sreq.Tools = slices.DeleteFunc(slices.Clone(orig.Tools), func(n string) bool {
			return p.checkNamed(n, req.Caller, "tools") != nil
		})
		if len(sreq.Tools) == 0 {
			return StartRequest{}, forbiddenf("the tools of run %s (%v) may not be called by %s: give the fork tools of its own", orig.ID, orig.Tools, DescribeCaller(req.Caller))
		}
	}
	if c := orig.ToolChoice.Tool; c != "" && !slices.Contains(sreq.Tools, c) && sreq.Tools != nil {
		sreq.ToolChoice = "" // the tool it named is not among the fork's
	}
	return sreq, nil
}

// ConversationAt returns the conversation the model of run id was asked with at step
// (resume edits applied), for caller: what a fork's edits from that step name by index
// (GET /v1/runs/{id}/messages?view=model&step=K).
func (p *Planner) ConversationAt(ctx context.Context, id string, step int, caller events.Identity) ([]provider.Message, error) {
	run, _, err := p.runs.Get(ctx, id)
	if errors.Is(err, runstore.ErrNotFound) || err == nil && !visibleTo(run, caller) {
		return nil, notFoundf("no run %q", id)
	}
	if err != nil {
		return nil, err
	}
	if outOfRange, err := runstore.ForkableAt(run, step); outOfRange {
		return nil, requestErrorf("%v", err)
	} else if err != nil {
		return nil, conflictf("%v", err)
	}
	return p.rlog.ConversationAt(ctx, run, step)
}
