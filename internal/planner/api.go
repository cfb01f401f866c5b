package planner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// maxRequestBytes bounds a request body of the API.
const maxRequestBytes = 4 << 20

// Handler returns the planner's HTTP API:
//
//	POST /v1/runs                 start a run (StartRequest; "wait": true answers when it is done)
//	GET  /v1/runs/{id}            the run: status, answer, every call with its timeline
//	GET  /v1/runs/{id}/messages   the run's conversation, in order (provider.Message list)
//	GET  /v1/runs/{id}/events     the run's lifecycle as Server-Sent Events, from its start
//	POST /v1/approvals/{callId}   answer an approval: {"decision":"approve"|"deny","by","reason","arguments"};
//	                              the first answer wins (202), later ones get 409 with the decision that stood
//	POST /v1/runs/{id}/cancel     cancel the run (optional {"by","reason"}): 200 with the run, ended canceled;
//	                              409 with {"error","run"} when it had ended already
//	POST /v1/runs/{id}/messages   add a follow-up ({"input"|"messages","id","wait","waitTimeout"}) and continue the
//	                              run (202; 200 when "id" was taken already, nothing added); 409 with {"error","run"}
//	                              for a canceled, storage_error, token_budget or nested run
//	POST /v1/runs/{id}/tools      enable/disable tools for the next steps, with an optional reminder the model sees
//	                              at its next step ({"enable","disable","reminder","id"}): 200 with the run
//	GET  /healthz, /readyz        liveness (the process serves) and readiness (NATS is connected)
//
// auth decides who may call it and as whom ([APIAuth]): a caller sees only its tenant's
// runs and calls; any other is answered 404, as if it did not exist.
func (p *Planner) Handler(auth APIAuth) http.Handler {
	probes := http.NewServeMux()
	probes.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	probes.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !p.nc.IsConnected() {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not connected to NATS"})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/runs", p.postRun)
	mux.HandleFunc("GET /v1/runs/{id}", p.getRun)
	mux.HandleFunc("GET /v1/runs/{id}/messages", p.getMessages)
	mux.HandleFunc("GET /v1/runs/{id}/events", p.runEvents)
	mux.HandleFunc("POST /v1/approvals/{callId}", p.postApproval)
	// Run control (control.go, messages.go, availability.go).
	mux.HandleFunc("POST /v1/runs/{id}/cancel", p.postCancel)
	mux.HandleFunc("POST /v1/runs/{id}/messages", p.postMessages)
	mux.HandleFunc("POST /v1/runs/{id}/tools", p.postTools)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &APIError{Status: http.StatusNotFound, Message: fmt.Sprintf("no such endpoint: %s %s", r.Method, r.URL.Path)})
	})
	authed := auth.Middleware(mux, func(w http.ResponseWriter) {
		writeError(w, &APIError{Status: http.StatusUnauthorized, Message: "missing or wrong bearer token"})
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" {
			probes.ServeHTTP(w, r)
			return
		}
		authed.ServeHTTP(w, r)
	})
}

type postRunRequest struct {
	StartRequest
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

func (p *Planner) postRun(w http.ResponseWriter, r *http.Request) {
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
	run, err := p.Start(r.Context(), req.StartRequest)
	if err != nil {
		writeError(w, err)
		return
	}
	status := http.StatusAccepted
	if req.Wait {
		ctx, cancel := context.WithTimeout(r.Context(), wait)
		defer cancel()
		if done, err := p.Wait(ctx, run.ID); err == nil {
			run, status = done, http.StatusOK
		} else if done != nil {
			run = done
		}
	}
	w.Header().Set("Location", "/v1/runs/"+run.ID)
	writeJSON(w, status, view(run))
}

// getVisible returns the run id if the request's caller may see it, and 404 otherwise.
func (p *Planner) getVisible(r *http.Request, id string) (*Run, error) {
	run, err := p.Get(r.Context(), id)
	if err == nil && !run.visibleTo(callerOf(r)) {
		return nil, notFoundf("no run %q", id)
	}
	return run, err
}

func (p *Planner) getRun(w http.ResponseWriter, r *http.Request) {
	run, err := p.getVisible(r, r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, view(run))
}

// getMessages answers the run's conversation as the model saw it: the input, then per
// step the model's message and its calls' results (outputs over the run's context
// budget as the model was shown them).
func (p *Planner) getMessages(w http.ResponseWriter, r *http.Request) {
	run, err := p.getVisible(r, r.PathValue("id"))
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

func (p *Planner) postApproval(w http.ResponseWriter, r *http.Request) {
	var ans events.ApprovalAnswer
	if err := decodeBody(r, &ans); err != nil {
		writeError(w, err)
		return
	}
	if err := checkDecision(&ans); err != nil {
		writeError(w, err)
		return
	}
	callID := r.PathValue("callId")
	runID, ok := runOfCall(callID)
	if !ok {
		writeError(w, notFoundf("no call %q", callID))
		return
	}
	if _, err := p.getVisible(r, runID); err != nil {
		if errors.As(err, new(*APIError)) {
			err = notFoundf("no call %q", callID)
		}
		writeError(w, err)
		return
	}
	if err := p.Approve(r.Context(), callID, callerOf(r), ans); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"callId": r.PathValue("callId"), "decision": ans.Decision})
}

// runEvents streams the run's lifecycle events from its first one, as SSE, until the run
// is done or the client leaves. Each event's SSE id is its stream sequence: a client
// that reconnects with Last-Event-ID (or ?lastEventId=) gets only the events after
// that one, and one that saw the run's done event is answered 204 (which tells an
// EventSource to stop reconnecting).
func (p *Planner) runEvents(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	run, err := p.getVisible(r, id)
	if err != nil {
		writeError(w, err)
		return
	}
	filter, err := events.RunEventsSubject(run.Tenant, id)
	if err != nil {
		writeError(w, requestErrorf("%v", err))
		return
	}
	occ := jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}, DeliverPolicy: jetstream.DeliverAllPolicy}
	after, resume, err := lastEventID(r.Header.Get("Last-Event-ID"), r.URL.Query().Get("lastEventId"))
	if err != nil {
		writeError(w, requestErrorf("%v", err))
		return
	}
	if resume {
		if p.sawDone(r.Context(), run, after) {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		occ.DeliverPolicy, occ.OptStartSeq = jetstream.DeliverByStartSequencePolicy, after+1
	}
	cons, err := p.js.OrderedConsumer(r.Context(), events.StreamEvents, occ)
	if err != nil {
		writeError(w, err)
		return
	}
	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if flusher != nil {
		flusher.Flush()
	}
	msgs, err := cons.Messages()
	if err != nil {
		return
	}
	defer msgs.Stop()
	// A client that goes away ends the wait in Next.
	defer context.AfterFunc(r.Context(), msgs.Stop)()
	for {
		m, err := msgs.Next()
		if err != nil {
			return
		}
		_, what, _, ok := events.ParseRunEventSubject(m.Subject())
		if !ok { // the filter makes this impossible; never act on a guess
			continue
		}
		meta, _ := m.Metadata()
		var seq uint64
		if meta != nil {
			seq = meta.Sequence.Stream
		}
		data := m.Data()
		if e, err := events.Decode(m, 0); err == nil {
			data = e.Data
		}
		fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", seq, what, compactJSON(data))
		if flusher != nil {
			flusher.Flush()
		}
		if what == "done" {
			return
		}
	}
}

// compactJSON puts data on one line, as an SSE data field needs.
func compactJSON(b []byte) []byte {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return bytes.ReplaceAll(b, []byte("\n"), []byte(" "))
	}
	return buf.Bytes()
}

// decodeBody reads a JSON body strictly: unknown fields and trailing data are errors.
func decodeBody(r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		return &APIError{Status: http.StatusUnsupportedMediaType, Message: "send a JSON body with Content-Type: application/json"}
	}
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, maxRequestBytes))
	dec.DisallowUnknownFields()
	tooLarge := &APIError{Status: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("the request body is larger than %d bytes", maxRequestBytes)}
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
	var apiErr *APIError
	switch {
	case errors.As(err, &apiErr):
	case unavailable(err):
		w.Header().Set("Retry-After", "1")
		apiErr = &APIError{Status: http.StatusServiceUnavailable,
			Message: "NATS did not answer in time (a server restarting, or a stream electing its leader); try again: " + err.Error()}
	default:
		apiErr = &APIError{Status: http.StatusInternalServerError, Message: err.Error()}
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

// RunView is a run as the API shows it: its outcome and metadata, every tool call with its
// timeline, without the internal bookkeeping.
type RunView struct {
	ID          string      `json:"id"`
	ParentID    string      `json:"parentId,omitempty"`
	Depth       int         `json:"depth"`
	Status      Status      `json:"status"`
	Termination Termination `json:"termination,omitempty"`
	Detail      string      `json:"detail,omitempty"`
	Answer      string      `json:"answer,omitempty"`
	Model       string      `json:"model"`
	// Steps is how many times the model answered (a step stopped before its model call,
	// by max_steps or a time limit, is not one).
	Steps    int               `json:"steps"`
	Calls    []*CallRecord     `json:"calls"`
	Tokens   int               `json:"tokens"`
	Usage    any               `json:"usage"`
	Warnings []string          `json:"warnings,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
	// Tenant and Role are the identity the run acts with (its caller's API token's).
	Tenant     string     `json:"tenant,omitempty"`
	Role       string     `json:"role,omitempty"`
	CreatedAt  time.Time  `json:"createdAt"`
	FinishedAt *time.Time `json:"finishedAt,omitempty"`
	DurationMS int64      `json:"durationMs"`
	// Offered is, per step, the tools the model was offered and, when the picker chose
	// them, the picker's scores and reasons.
	Offered []StepTools `json:"offered,omitempty"`
	// Cost is what the run has cost so far (see PriceTable); CostBudget its budget.
	Cost       float64 `json:"cost"`
	CostBudget float64 `json:"costBudget,omitempty"`
	// The run's tree totals: what it and its nested runs (theirs included) used so far,
	// which its budgets are checked against; for a run without nested runs, its own
	// (steps, tokens, usage, cost).
	TreeSteps  int            `json:"treeSteps"`
	TreeTokens int            `json:"treeTokens"`
	TreeUsage  provider.Usage `json:"treeUsage"`
	TreeCost   float64        `json:"treeCost"`
	// Run control: who canceled it and why; its tool set (absent: the catalog) and the
	// tools disabled for its next steps; how many times it was continued.
	Canceled *RunCancel `json:"canceled,omitempty"`
	Tools    []string   `json:"tools,omitempty"`
	Disabled []string   `json:"disabled,omitempty"`
	Turn     int        `json:"turn,omitempty"`
}

func view(r *Run) RunView {
	v := RunView{ID: r.ID, ParentID: r.ParentID, Depth: r.Depth, Status: r.Status, Termination: r.Termination,
		Detail: r.Detail, Answer: r.Answer, Model: r.Model, Steps: r.stepsTaken(), Calls: r.Calls,
		Tokens: r.Usage.Total(), Usage: r.Usage, Warnings: r.Warnings, Metadata: r.Metadata, Tenant: r.Tenant, Role: r.Role,
		CreatedAt: r.CreatedAt, FinishedAt: r.FinishedAt, Offered: r.Offered, Cost: r.Cost, CostBudget: r.Limits.CostBudget,
		Canceled: r.Canceled, Tools: r.Tools, Disabled: r.Disabled, Turn: r.Turn}
	tree := r.Tree()
	v.TreeSteps, v.TreeTokens, v.TreeUsage, v.TreeCost = tree.Steps, tree.Usage.Total(), tree.Usage, tree.Cost
	if v.Calls == nil {
		v.Calls = []*CallRecord{}
	}
	if r.FinishedAt != nil {
		v.DurationMS = r.FinishedAt.Sub(r.CreatedAt).Milliseconds()
	}
	return v
}
