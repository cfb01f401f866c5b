package plannerapi

import (
	"context"
	"errors"
	"net/http"

	"github.com/toolfleet/toolfleet/internal/planner"
)

// postCancel is POST /v1/runs/{id}/cancel: 200 with the canceled run; 409 with
// {"error", "run"} for a run that has ended; 404 for another tenant's run.
func (a *api) postCancel(w http.ResponseWriter, r *http.Request) {
	var req planner.CancelRequest
	if err := decodeOptionalBody(r, &req); err != nil {
		writeError(w, err)
		return
	}
	run, err := a.p.Cancel(r.Context(), r.PathValue("id"), callerOf(r), req)
	a.writeControl(w, a.p.Assembled(r.Context(), run), err)
}

// postTools is POST /v1/runs/{id}/tools: 200 with the run.
func (a *api) postTools(w http.ResponseWriter, r *http.Request) {
	var c planner.ToolsChange
	if err := decodeBody(r, &c); err != nil {
		writeError(w, err)
		return
	}
	run, err := a.p.ChangeTools(r.Context(), r.PathValue("id"), callerOf(r), c)
	a.writeControl(w, a.p.Assembled(r.Context(), run), err)
}

// postMessages is POST /v1/runs/{id}/messages: 202 with the run (continued, or running
// with the messages queued for its next step); 200 with the run when the follow-up's id
// was taken already; 409 with {"error","run"} for a run that cannot be continued.
func (a *api) postMessages(w http.ResponseWriter, r *http.Request) {
	var req struct {
		planner.FollowUp
		Wait        bool   `json:"wait,omitempty"`
		WaitTimeout string `json:"waitTimeout,omitempty"`
	}
	if err := decodeBody(r, &req); err != nil {
		writeError(w, err)
		return
	}
	wait, err := waitFor(req.WaitTimeout)
	if err != nil {
		writeError(w, err)
		return
	}
	req.Caller = callerOf(r)
	run, added, err := a.p.Continue(r.Context(), r.PathValue("id"), req.FollowUp)
	if err != nil {
		a.writeControl(w, a.p.Assembled(r.Context(), run), err)
		return
	}
	status := http.StatusAccepted
	if !added {
		status = http.StatusOK
	}
	if req.Wait && added {
		ctx, cancel := context.WithTimeout(r.Context(), wait)
		defer cancel()
		if done, err := a.p.Wait(ctx, run.ID); err == nil {
			run, status = done, http.StatusOK
		} else if done != nil {
			run = done
		}
	} else {
		run = a.p.Assembled(r.Context(), run)
	}
	writeJSON(w, status, a.p.View(run))
}

// writeControl answers a control request: 200 with the run, or the error with the run
// as it stands beside it when there is one (a 409).
func (a *api) writeControl(w http.ResponseWriter, run *planner.Run, err error) {
	if err == nil {
		writeJSON(w, http.StatusOK, a.p.View(run))
		return
	}
	var apiErr *planner.APIError
	if !errors.As(err, &apiErr) || run == nil {
		writeError(w, err)
		return
	}
	writeJSON(w, apiErr.Status, map[string]any{"error": apiErr, "run": a.p.View(run)})
}
