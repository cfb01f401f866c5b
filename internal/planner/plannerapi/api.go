package plannerapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/planner"
	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// maxRequestBytes bounds a request body of the API.
const maxRequestBytes = 4 << 20

// Handler returns the HTTP API of planner p:
//
//	POST /v1/runs                 start a run (StartRequest; "wait": true answers when it is done or paused)
//	GET  /v1/runs/{id}            the run: status, answer, every call with its timeline
//	GET  /v1/runs/{id}/messages   the run's conversation, in order (provider.Message list); ?view=model: a
//	                              paused run's conversation as the model will be asked it (resume edits applied);
//	                              ?view=model&step=K: as the model was asked it at step K (what a fork edits)
//	GET  /v1/runs/{id}/events     the run's lifecycle as Server-Sent Events, from its start; with Accept:
//	                              application/json, the events stored so far as a paged list (?limit, ?cursor)
//	POST /v1/approvals/{callId}   answer an approval: {"decision":"approve"|"deny","by","reason","arguments"};
//	                              the first answer wins (202), later ones get 409 with the decision that stood
//	POST /v1/runs/{id}/cancel     cancel the run (optional {"by","reason"}): 200 with the run, ended canceled;
//	                              409 with {"error","run"} when it had ended already
//	POST /v1/runs/{id}/messages   add a follow-up ({"input"|"messages","id","wait","waitTimeout"}) and continue the
//	                              run (202; 200 when "id" was taken already, nothing added); 409 with {"error","run"}
//	                              for a canceled, storage_error, token_budget or nested run
//	POST /v1/runs/{id}/tools      enable/disable tools for the next steps, with an optional reminder the model sees
//	                              at its next step ({"enable","disable","reminder","id"}): 200 with the run
//	POST /v1/runs/{id}/pause      pause at the next step boundary (optional {"by","reason"}): 200 with the run
//	POST /v1/runs/{id}/resume     resume a paused run, optionally editing its conversation and limits
//	                              (planner.ResumeRequest): 200 with the run; 409 when it is not paused
//	POST /v1/runs/{id}/fork       start a new run from the run's step fromStep, with a resume's edits and
//	                              "model", "tools" (planner.ForkRequest): 201 with the new run
//	GET  /v1/runs/{a}/diff/{b}    the two runs compared step by step (planner.RunDiff)
//	GET  /v1/runs                 the caller's runs, newest first, filtered and paginated (planner.RunFilter)
//	GET  /v1/approvals            approvals: pending (oldest first), answered (newest first) or all
//	GET  /v1/tools                the tools the caller may call, with their consumers and recent calls
//	GET  /v1/dead-letters         the caller's tenant's dead letters, newest first
//	GET  /v1/events               every run event of the caller's tenant as Server-Sent Events
//	GET  /healthz, /readyz        liveness (the process serves) and readiness (NATS is connected)
//	GET  /openapi.json            the OpenAPI 3.1 document of this API (openapi.yaml; no token needed)
//
// auth decides who may call it and as whom ([Auth]): a caller sees only its tenant's
// runs and calls; any other is answered 404, as if it did not exist.
func Handler(p *planner.Planner, auth Auth) http.Handler {
	a := &api{p: p}
	probes := http.NewServeMux()
	probes.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	probes.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !p.Connected() {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not connected to NATS"})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
	probes.HandleFunc("GET /openapi.json", serveOpenAPI)
	mux := http.NewServeMux()
	for _, rt := range routes {
		mux.HandleFunc(rt.pattern, func(w http.ResponseWriter, r *http.Request) { rt.handle(a, w, r) })
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &planner.APIError{Status: http.StatusNotFound, Message: fmt.Sprintf("no such endpoint: %s %s", r.Method, r.URL.Path)})
	})
	authed := auth.Middleware(mux, func(w http.ResponseWriter) {
		writeError(w, &planner.APIError{Status: http.StatusUnauthorized, Message: "missing or wrong bearer token"})
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if publicPaths[r.URL.Path] {
			probes.ServeHTTP(w, r)
			return
		}
		authed.ServeHTTP(w, r)
	})
}

// routes are the API's endpoints behind its tokens.
var routes = []struct {
	pattern string
	handle  func(*api, http.ResponseWriter, *http.Request)
}{
	{"POST /v1/runs", (*api).postRun},
	{"GET /v1/runs/{id}", (*api).getRun},
	{"GET /v1/runs/{id}/messages", (*api).getMessages},
	{"GET /v1/runs/{id}/events", (*api).runEvents},
	{"POST /v1/approvals/{callId}", (*api).postApproval},
	// Run control (control.go).
	{"POST /v1/runs/{id}/cancel", (*api).postCancel},
	{"POST /v1/runs/{id}/messages", (*api).postMessages},
	{"POST /v1/runs/{id}/tools", (*api).postTools},
	{"POST /v1/runs/{id}/pause", (*api).postPause},
	{"POST /v1/runs/{id}/resume", (*api).postResume},
	// Fork and diff (fork.go).
	{"POST /v1/runs/{id}/fork", (*api).postFork},
	{"GET /v1/runs/{a}/diff/{b}", (*api).getDiff},
	// Lists and the tenant's events (lists.go, events.go).
	{"GET /v1/runs", (*api).listRuns},
	{"GET /v1/approvals", (*api).listApprovals},
	{"GET /v1/tools", (*api).listTools},
	{"GET /v1/dead-letters", (*api).listDeadLetters},
	{"GET /v1/events", (*api).tenantEvents},
}

// publicPaths are served without a token: the probes and the API's description.
var publicPaths = map[string]bool{"/healthz": true, "/readyz": true, "/openapi.json": true}

// api serves the HTTP API over the planner's methods.
type api struct {
	p *planner.Planner
}

type postRunRequest struct {
	planner.StartRequest
	// Wait answers when the run is done (or after WaitTimeout, with the run as it is).
	Wait        bool   `json:"wait,omitempty"`
	WaitTimeout string `json:"waitTimeout,omitempty"`
}

// waitFor is how long a request with "wait" waits: its waitTimeout, 5 minutes by default.
func waitFor(waitTimeout string) (time.Duration, error) {
	if waitTimeout == "" {
		return 5 * time.Minute, nil
	}
	d, err := time.ParseDuration(waitTimeout)
	if err != nil || d <= 0 || d > time.Hour {
		return 0, requestErrorf("waitTimeout must be a duration between 1ms and 1h, got %q", waitTimeout)
	}
	return d, nil
}

func (a *api) postRun(w http.ResponseWriter, r *http.Request) {
	var req postRunRequest
	if err := decodeBody(r, &req); err != nil {
		writeError(w, err)
		return
	}
	wait, err := waitFor(req.WaitTimeout)
	if err != nil {
		writeError(w, err)
		return
	}
	req.Caller = callerOf(r) // the token's identity, never the body's
	// A caller's W3C trace context (traceparent, tracestate headers) is the run's parent,
	// whether or not this planner traces: its calls, events and results carry it.
	ctx := events.ContextWithTrace(r.Context(), r.Header.Get("traceparent"), r.Header.Get("tracestate"))
	run, err := a.p.Start(ctx, req.StartRequest)
	if err != nil {
		writeError(w, err)
		return
	}
	status := http.StatusAccepted
	if req.Wait {
		ctx, cancel := context.WithTimeout(r.Context(), wait)
		defer cancel()
		if done, err := a.p.Wait(ctx, run.ID); err == nil {
			run, status = done, http.StatusOK
		} else if done != nil {
			run = done
		}
	}
	w.Header().Set("Location", "/v1/runs/"+run.ID)
	writeJSON(w, status, a.p.View(run))
}

func (a *api) getRun(w http.ResponseWriter, r *http.Request) {
	run, err := a.p.GetFor(r.Context(), r.PathValue("id"), callerOf(r))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, a.p.View(run))
}

// getMessages answers the run's conversation as the model saw it: the input, then per
// step the model's message and its calls' results (outputs over the run's context
// budget as the model was shown them).
func (a *api) getMessages(w http.ResponseWriter, r *http.Request) {
	switch view := r.URL.Query().Get("view"); view {
	case "", "run":
	case "model":
		if r.URL.Query().Has("step") {
			a.stepConversation(w, r) // fork.go
			return
		}
		msgs, err := a.p.ModelConversation(r.Context(), r.PathValue("id"), callerOf(r))
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, msgs)
		return
	default:
		writeError(w, &planner.APIError{Status: http.StatusBadRequest, Message: "view must be run or model, got " + strconv.Quote(view)})
		return
	}
	run, err := a.p.GetFor(r.Context(), r.PathValue("id"), callerOf(r))
	if err != nil {
		writeError(w, err)
		return
	}
	msgs := run.Messages
	if msgs == nil {
		msgs = []provider.Message{}
	}
	writeJSON(w, http.StatusOK, msgs)
}

func (a *api) postApproval(w http.ResponseWriter, r *http.Request) {
	var ans events.ApprovalAnswer
	if err := decodeBody(r, &ans); err != nil {
		writeError(w, err)
		return
	}
	if err := planner.CheckDecision(&ans); err != nil {
		writeError(w, err)
		return
	}
	callID := r.PathValue("callId")
	if err := a.p.CallVisible(r.Context(), callID, callerOf(r)); err != nil {
		writeError(w, err)
		return
	}
	if err := a.p.Approve(r.Context(), callID, callerOf(r), ans); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"callId": r.PathValue("callId"), "decision": ans.Decision})
}

// requestErrorf is a 400: the request is wrong, as the message says.
func requestErrorf(format string, args ...any) error {
	return &planner.APIError{Status: http.StatusBadRequest, Message: fmt.Sprintf(format, args...)}
}

// decodeOptionalBody is decodeBody for a request whose body may be left out: none
// leaves v as it is.
func decodeOptionalBody(r *http.Request, v any) error {
	if r.ContentLength == 0 {
		return nil
	}
	return decodeBody(r, v)
}

// decodeBody reads a JSON body strictly: unknown fields and trailing data are errors.
func decodeBody(r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		return &planner.APIError{Status: http.StatusUnsupportedMediaType, Message: "send a JSON body with Content-Type: application/json"}
	}
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, maxRequestBytes))
	dec.DisallowUnknownFields()
	tooLarge := &planner.APIError{Status: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("the request body is larger than %d bytes", maxRequestBytes)}
	if err := dec.Decode(v); err != nil {
		var over *http.MaxBytesError
		if errors.As(err, &over) { // cut off at the limit: not malformed, too large
			return tooLarge
		}
		if errors.Is(err, io.EOF) {
			return requestErrorf("the request body is empty; send a JSON object")
		}
		return requestErrorf("malformed JSON body: %v", err)
	}
	if dec.More() {
		return requestErrorf("malformed JSON body: trailing data after the object")
	}
	if dec.InputOffset() > maxRequestBytes {
		return tooLarge
	}
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, err error) {
	var apiErr *planner.APIError
	switch {
	case errors.As(err, &apiErr):
		if apiErr.RetryAfter > 0 { // 429: the planner is saturated
			w.Header().Set("Retry-After", strconv.Itoa(apiErr.RetryAfter))
		}
	case unavailable(err):
		w.Header().Set("Retry-After", "1")
		apiErr = &planner.APIError{Status: http.StatusServiceUnavailable,
			Message: "NATS did not answer in time (a server restarting, or a stream electing its leader); try again: " + err.Error()}
	default:
		apiErr = &planner.APIError{Status: http.StatusInternalServerError, Message: err.Error()}
	}
	writeJSON(w, apiErr.Status, map[string]any{"error": apiErr})
}

// unavailable reports whether err is NATS not answering, or answering that JetStream is
// unavailable for now: a failure that passes (503), not a fault of the request or of
// the planner (500).
func unavailable(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, jetstream.ErrAsyncPublishTimeout) || errors.Is(err, nats.ErrConnectionReconnecting) ||
		errors.As(err, &apiErr) && apiErr.Code == http.StatusServiceUnavailable
}
