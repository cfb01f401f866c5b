package planner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/internal/planner/runrec"
	"github.com/toolfleet/toolfleet/internal/planner/runstore"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// CancelRequest is the body of POST /v1/runs/{id}/cancel (optional) and of a cancel over
// NATS ([events.RunCancelSubject]).
type CancelRequest struct {
	// By is not taken from the caller: the record names the caller who cancels
	// (DescribeCaller). It is accepted for older clients and otherwise ignored.
	By     string `json:"by,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// alreadyDone is the conflict Cancel answers for a run that has ended (by a cancel or
// otherwise): the run is returned with it.
func alreadyDone(r *Run) error {
	return conflictf("run %s has ended already (%s)", r.ID, r.Termination)
}

// Cancel ends the run id, acting for caller (a run of another tenant is not found),
// with Termination canceled and who and why: its calls that have no result, and the open
// sub-calls of its composite calls, get a cancel event (executors stop them: their
// results say canceled, or interrupted for a non-idempotent tool, or whatever they ended
// with first), calls parked for approval are answered canceled without running, and its
// nested runs are canceled with it.
// Results that come later are recorded; no further step is taken.
//
// A run that has ended already (canceled or not) is refused with a 409 [APIError] and
// returned as it stands; cancels of its calls are published again then (a cancel is
// idempotent: same event id), so a cancel interrupted between storing and publishing is
// completed by the next one.
func (p *Planner) Cancel(ctx context.Context, id string, caller events.Identity, req CancelRequest) (*Run, error) {
	now := p.cfg.Now().UTC()
	by := DescribeCaller(caller)
	canceled := false
	run, err := p.runs.Update(ctx, id, func(r *Run) (bool, error) {
		canceled = false
		if err := p.mayAct(r, caller, "cancel"); err != nil {
			return false, err
		}
		if r.Status == StatusDone {
			return false, nil
		}
		detail := "canceled by " + by
		if req.Reason != "" {
			detail += ": " + req.Reason
		}
		r.Canceled = &runrec.RunCancel{By: by, Reason: req.Reason, At: now}
		r.Finish(TerminationCanceled, detail, now)
		canceled = true
		return true, nil
	})
	if errors.Is(err, runstore.ErrNotFound) {
		return nil, notFoundf("no run %q", id)
	}
	if err != nil {
		return nil, err
	}
	if run.Termination == TerminationCanceled {
		p.cancelCalls(ctx, run, run.StepCalls(), caller)
	}
	if !canceled {
		return run, alreadyDone(run)
	}
	if err := p.afterChange(ctx, run); err != nil {
		return run, err
	}
	if p.waitStored(ctx, run.ID) {
		// This replica was storing a step whose calls had gone out: the run keeps them
		// (keepCanceledStep), and the answer shows them as the cancel leaves them.
		if latest, _, err := p.runs.Get(ctx, run.ID); err == nil {
			run = latest
		}
	}
	return p.settleCanceledCalls(ctx, run), nil
}

// cancelSettle bounds how long a cancel waits for the answers of its run's calls.
// Executors answer a cancel within milliseconds; a call of a tool nobody serves is not
// answered before the no-such-tool timeout, and is shown as it is then.
const cancelSettle = 2 * time.Second

// settleCanceledCalls returns the canceled run once each of its calls without a result
// at the cancel has its answer (canceled, interrupted, or the result it finished with),
// or as it is after cancelSettle: a cancel answered with the run as it was at the
// cancel would show calls running that were canceled a moment later.
func (p *Planner) settleCanceledCalls(ctx context.Context, run *Run) *Run {
	ctx, cancel := context.WithTimeout(ctx, cancelSettle)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		settled := true
		for _, c := range run.StepCalls() {
			settled = settled && (c.Local || c.Done())
		}
		if settled {
			return run
		}
		select {
		case <-ctx.Done():
			return run
		case <-tick.C:
		}
		if latest, _, err := p.runs.Get(ctx, run.ID); err == nil {
			run = latest
		}
	}
}

// cancelCalls publishes sender's cancel of every call of calls (of the canceled run)
// that has no result, and of every open sub-call of its composite calls, and cancels
// the nested runs of its run_agent calls for sender. sender is who canceled the run (or,
// for the planner's own cancels, the run's owner): the executors act on a cancel only
// from a sender that may act on the call (events.MayAct), as the planner checked before;
// a composite makes its sub-calls as the run's caller, so the same sender may cancel
// them. The composite cancels the sub-call it waits for when its own cancel stops it; a
// sub-call's own cancel also ends one whose composite is not running anywhere (its
// executor stopped, the composite answered canceled before it ran again).
func (p *Planner) cancelCalls(ctx context.Context, run *Run, calls []*CallRecord, sender events.Identity) {
	why := CancelRequest{Reason: "the run was canceled"}
	if run.Canceled != nil {
		why.By = run.Canceled.By
		if run.Canceled.Reason != "" {
			why.Reason += ": " + run.Canceled.Reason
		}
	}
	for _, c := range calls {
		if c.Local || c.Done() {
			continue
		}
		if c.Name == AgentToolName {
			child := why
			child.Reason = "its parent run " + run.ID + " was canceled"
			if _, err := p.Cancel(ctx, childID(c.ID), sender, child); err != nil && !isAPIStatus(err, http.StatusNotFound, http.StatusConflict) {
				p.log.Warn().Err(err).Str("run_id", run.ID).Str("call_id", c.ID).Msg("canceling a nested run")
			}
			continue
		}
		p.publishCancel(ctx, run.ID, sender, c.Name, c.ID, why)
		for _, s := range c.Subs {
			if !s.Done() {
				p.publishCancel(ctx, run.ID, sender, s.Name, s.ID, why)
			}
		}
	}
}

// publishCancel publishes sender's cancel of callID, a call of tool of run, for why.
func (p *Planner) publishCancel(ctx context.Context, run string, sender events.Identity, tool, callID string, why CancelRequest) {
	msg, err := events.NewCancel(p.cfg.Source, sender, tool, callID, events.Cancel{RunID: run, Reason: why.Reason, By: why.By})
	if err == nil {
		_, err = jsutil.PublishSettled(ctx, p.js, msg)
	}
	if err != nil && !jsutil.IsAlreadyAnswered(err) {
		p.log.Warn().Err(err).Str("run_id", run).Str("call_id", callID).Msg("publishing the cancel of a call")
	}
}

func isAPIStatus(err error, statuses ...int) bool {
	var apiErr *APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	for _, s := range statuses {
		if apiErr.Status == s {
			return true
		}
	}
	return false
}

// Assembled returns the run with its conversation and calls (see [Planner.Get]), or as
// it is when they cannot be read now.
func (p *Planner) Assembled(ctx context.Context, run *Run) *Run {
	if run == nil {
		return nil
	}
	if full, err := p.rlog.Assemble(ctx, run); err == nil {
		return full
	}
	return run
}

// DescribeCaller names a caller for the record (the By of a cancel, a pause, an
// approval): its identity, tenant/role or "anonymous" ([events.Identity.Describe]), as
// the executors name the sender of an answer or a cancel over NATS — whatever door it
// came through, and never a name the request wrote.
func DescribeCaller(id events.Identity) string { return id.Describe() }

// ControlReply is the answer of the planner's NATS control endpoint: the HTTP status the
// API would answer, the run, and the error.
type ControlReply struct {
	Status int       `json:"status"`
	Run    *RunView  `json:"run,omitempty"`
	Error  *APIError `json:"error,omitempty"`
}

// serveControl serves the NATS equivalent of the control endpoints as a micro service
// (queue group: one replica answers each request) until ctx ends: a request on
// events.RunCancelSubject(caller, run) with an optional CancelRequest body cancels the
// run for that caller, under the same rule as the API's (the subject's tenant and role
// tokens are the caller's identity: NATS permissions let a tenant's user publish on its
// own subjects only). The reply is a ControlReply.
func (p *Planner) serveControl(ctx context.Context) error {
	svc, err := micro.AddService(p.nc, micro.Config{Name: "toolfleet-planner", Version: "0.1.0",
		Description: "controls toolfleet planner runs (cancel)"})
	if err != nil {
		return fmt.Errorf("planner: control service: %w", err)
	}
	if err := svc.AddEndpoint("cancel", micro.HandlerFunc(func(req micro.Request) { p.handleCancelRequest(ctx, req) }),
		micro.WithEndpointSubject(events.AllRunCancels)); err != nil {
		_ = svc.Stop()
		return fmt.Errorf("planner: control endpoint: %w", err)
	}
	<-ctx.Done()
	return svc.Stop()
}

func (p *Planner) handleCancelRequest(ctx context.Context, req micro.Request) {
	reply := func(run *Run, err error) {
		out := ControlReply{Status: http.StatusOK}
		if run != nil {
			v := p.View(run)
			out.Run = &v
		}
		if err != nil {
			var apiErr *APIError
			if !errors.As(err, &apiErr) {
				apiErr = &APIError{Status: http.StatusInternalServerError, Message: err.Error()}
			}
			out.Status, out.Error = apiErr.Status, apiErr
		}
		b, _ := json.Marshal(out)
		_ = req.Respond(b)
	}
	run, caller, ok := events.ParseRunCancelSubject(req.Subject())
	if !ok {
		reply(nil, requestErrorf("%q is not a run cancel subject: use toolfleet.control.cancel.<run>, followed by .<tenant>.<role> for a caller with an identity", req.Subject()))
		return
	}
	var body CancelRequest
	if len(req.Data()) > 0 {
		if err := json.Unmarshal(req.Data(), &body); err != nil {
			reply(nil, requestErrorf("malformed cancel request: %v", err))
			return
		}
	}
	r, err := p.Cancel(ctx, run, caller, body)
	reply(r, err)
}

// canceledAt reports whether r was canceled while its model answered step (the step
// is not part of it yet).
func canceledAt(r *Run, step int) bool {
	return r.Status == StatusDone && r.Termination == TerminationCanceled && r.Step == step &&
		r.Recorded == step && len(r.StepCalls()) == 0
}

// keepCanceledStep makes the recorded step whose state is st part of the run r, which
// was canceled while the model answered it: the step's calls are the run's (their
// cancels are published, their results recorded), and the run stays canceled.
func keepCanceledStep(r *Run, st *Run) bool {
	if len(st.StepCalls()) == 0 {
		return false
	}
	canceled := *r
	*r = *st
	r.Calls = slices.Clone(st.Calls)
	keepControls(r, canceled.Controls, canceled.Deadline)
	r.Status, r.Termination, r.Detail, r.FinishedAt = canceled.Status, canceled.Termination, canceled.Detail, canceled.FinishedAt
	r.Answer, r.AnswerCall = "", ""
	return true
}
