package plannerapi

import (
	"net/http"
	"strconv"

	"github.com/toolfleet/toolfleet/internal/planner"
)

// postFork is POST /v1/runs/{id}/fork (planner.ForkRequest): 201 with the new run; 400
// for a fromStep that is not a step of the run or an edit that does not fit its
// conversation; 403 for a tool or model the caller may not use; 404 for a run of
// another tenant; 409 for a step whose previous step's calls are still under way.
func (a *api) postFork(w http.ResponseWriter, r *http.Request) {
	var req planner.ForkRequest
	if err := decodeBody(r, &req); err != nil {
		writeError(w, err)
		return
	}
	req.Caller = callerOf(r)
	run, err := a.p.Fork(r.Context(), r.PathValue("id"), req)
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Location", "/v1/runs/"+run.ID)
	writeJSON(w, http.StatusCreated, a.p.View(run))
}

// getDiff is GET /v1/runs/{a}/diff/{b}: the runs compared step by step (planner.RunDiff);
// 404 when either is not the caller's tenant's.
func (a *api) getDiff(w http.ResponseWriter, r *http.Request) {
	d, err := a.p.Diff(r.Context(), r.PathValue("a"), r.PathValue("b"), callerOf(r))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// stepConversation is GET /v1/runs/{id}/messages?view=model&step=K: the conversation
// the model was asked at step K, which a fork from K edits by index.
func (a *api) stepConversation(w http.ResponseWriter, r *http.Request) {
	step, err := strconv.Atoi(r.URL.Query().Get("step"))
	if err != nil {
		writeError(w, requestErrorf("step must be a step number, got %q", r.URL.Query().Get("step")))
		return
	}
	msgs, err := a.p.ConversationAt(r.Context(), r.PathValue("id"), step, callerOf(r))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, msgs)
}
