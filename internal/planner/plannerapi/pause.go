package plannerapi

import (
	"net/http"

	"github.com/toolfleet/toolfleet/internal/planner"
)

// postPause is POST /v1/runs/{id}/pause (optional {"by","reason"}): 200 with the run,
// which pauses at its next step boundary (paused already: as it is); 409 with
// {"error","run"} for a run that ended or a nested run.
func (a *api) postPause(w http.ResponseWriter, r *http.Request) {
	var req planner.PauseRequest
	if err := decodeOptionalBody(r, &req); err != nil {
		writeError(w, err)
		return
	}
	run, err := a.p.Pause(r.Context(), r.PathValue("id"), callerOf(r), req)
	a.writeControl(w, a.p.Assembled(r.Context(), run), err)
}

// postResume is POST /v1/runs/{id}/resume (planner.ResumeRequest, optional): 200 with
// the run, running again; 400 for an edit that does not fit the conversation; 409 with
// {"error","run"} for a run that is not paused.
func (a *api) postResume(w http.ResponseWriter, r *http.Request) {
	var req planner.ResumeRequest
	if err := decodeOptionalBody(r, &req); err != nil {
		writeError(w, err)
		return
	}
	req.Caller = callerOf(r)
	run, err := a.p.Resume(r.Context(), r.PathValue("id"), req)
	a.writeControl(w, a.p.Assembled(r.Context(), run), err)
}
