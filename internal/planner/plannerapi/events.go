package plannerapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"strconv"
	"strings"

	"github.com/toolfleet/toolfleet/internal/planner"
)

// runEvents streams the run's lifecycle events from its first one, as SSE, until the run
// is done or the client leaves. Each event's SSE id is its stream sequence: a client
// that reconnects with Last-Event-ID (or ?lastEventId=) gets only the events after
// that one, and one that saw the run's done event is answered 204 (which tells an
// EventSource to stop reconnecting).
func (a *api) runEvents(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	run, err := a.p.GetFor(r.Context(), id, callerOf(r))
	if err != nil {
		writeError(w, err)
		return
	}
	if wantsJSON(r) {
		a.runEventList(w, r, run)
		return
	}
	after, resume, err := lastEventID(r.Header.Get("Last-Event-ID"), r.URL.Query().Get("lastEventId"))
	if err != nil {
		writeError(w, requestErrorf("%v", err))
		return
	}
	if resume && a.p.SawDone(r.Context(), run, after) {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	evs, err := a.p.FollowEvents(r.Context(), run, after)
	if err != nil {
		writeError(w, err)
		return
	}
	writeEvents(w, evs, true)
}

// wantsJSON reports whether the request asks for a run's events as a JSON list (Accept:
// application/json, and not text/event-stream) rather than as SSE.
func wantsJSON(r *http.Request) bool {
	acc := r.Header.Get("Accept")
	return strings.Contains(acc, "application/json") && !strings.Contains(acc, "text/event-stream")
}

// runEventList is GET /v1/runs/{id}/events with Accept: application/json: the run's
// events stored so far, a page at a time (?limit, ?cursor: the previous page's next).
func (a *api) runEventList(w http.ResponseWriter, r *http.Request, run *planner.Run) {
	q := r.URL.Query()
	if err := knownParams(q, "limit", "cursor"); err != nil {
		writeError(w, err)
		return
	}
	limit, err := intParam(q, "limit")
	if err != nil {
		writeError(w, err)
		return
	}
	page, err := a.p.ListEvents(r.Context(), run, q.Get("cursor"), limit)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, page)
}

// tenantEvents streams every run event of the caller's tenant as it happens (from the
// one after Last-Event-ID on a reconnection), as SSE, until the client leaves: the same
// names, ids and data as a run's events.
func (a *api) tenantEvents(w http.ResponseWriter, r *http.Request) {
	after, _, err := lastEventID(r.Header.Get("Last-Event-ID"), r.URL.Query().Get("lastEventId"))
	if err != nil {
		writeError(w, requestErrorf("%v", err))
		return
	}
	evs, err := a.p.FollowTenantEvents(r.Context(), callerOf(r), after)
	if err != nil {
		writeError(w, err)
		return
	}
	writeEvents(w, evs, false)
}

// writeEvents answers 200 and writes evs as SSE until they end, or until a done event
// when untilDone.
func writeEvents(w http.ResponseWriter, evs iter.Seq2[planner.FollowedEvent, error], untilDone bool) {
	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if flusher != nil {
		flusher.Flush()
	}
	for e, err := range evs {
		if err != nil {
			return
		}
		fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", e.Seq, e.What, compactJSON(e.Data))
		if flusher != nil {
			flusher.Flush()
		}
		if untilDone && e.What == "done" {
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

// lastEventID reads the Last-Event-ID header (or the lastEventId query parameter, for
// clients that cannot set headers) of an SSE reconnection: the stream sequence of the
// last event the client saw. ok is false when there is none.
func lastEventID(h string, query string) (seq uint64, ok bool, err error) {
	v := strings.TrimSpace(h)
	if v == "" {
		v = strings.TrimSpace(query)
	}
	if v == "" {
		return 0, false, nil
	}
	seq, err = strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("Last-Event-ID must be the id of an event of this stream (a number), got %q", v)
	}
	return seq, true, nil
}
