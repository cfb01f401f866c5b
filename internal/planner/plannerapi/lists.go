package plannerapi

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/toolfleet/toolfleet/internal/planner"
)

// The lists (GET /v1/runs, /v1/approvals, /v1/tools, /v1/dead-letters): the query's
// filters are checked here (a bad one is a 400 that names it), the rest is the
// planner's.

// knownParams refuses a query parameter the list does not take: a misspelt filter
// would otherwise select everything.
func knownParams(q url.Values, known ...string) error {
	for name := range q {
		ok := false
		for _, k := range known {
			ok = ok || name == k
		}
		if !ok {
			return requestErrorf("bad filter %s: unknown; this list takes %v", name, known)
		}
	}
	return nil
}

// intParam reads an integer query parameter (0 when absent).
func intParam(q url.Values, name string) (int, error) {
	v := q.Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, requestErrorf("bad filter %s: must be an integer, got %q", name, v)
	}
	if n < 1 {
		return 0, requestErrorf("bad filter %s: must be 1 to %d, got %d", name, planner.MaxPageSize, n)
	}
	return n, nil
}

// timeParam reads an RFC 3339 time query parameter (zero when absent).
func timeParam(q url.Values, name string) (time.Time, error) {
	v := q.Get(name)
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, requestErrorf("bad filter %s: must be an RFC 3339 time (e.g. 2025-01-31T12:00:00Z), got %q", name, v)
	}
	return t, nil
}

// metadataParams takes the metadata.KEY=VALUE filters out of q (runs whose metadata
// has every one): each key once.
func metadataParams(q url.Values) (map[string]string, error) {
	var meta map[string]string
	for name, values := range q {
		key, ok := strings.CutPrefix(name, "metadata.")
		if !ok {
			continue
		}
		if key == "" || len(values) != 1 {
			return nil, requestErrorf("bad filter %s: give metadata.KEY=VALUE, each key once", name)
		}
		if meta == nil {
			meta = map[string]string{}
		}
		meta[key] = values[0]
		delete(q, name)
	}
	return meta, nil
}

// listRuns is GET /v1/runs.
func (a *api) listRuns(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	meta, err := metadataParams(q)
	if err != nil {
		writeError(w, err)
		return
	}
	if err := knownParams(q, "status", "termination", "outcome", "tool", "parent", "forkedFrom", "since", "until", "q", "limit", "cursor"); err != nil {
		writeError(w, err)
		return
	}
	f := planner.RunFilter{Status: planner.Status(q.Get("status")), Termination: planner.Termination(q.Get("termination")),
		Outcome: planner.Outcome(q.Get("outcome")), Metadata: meta,
		Tool: q.Get("tool"), Parent: q.Get("parent"), Q: q.Get("q"), Cursor: q.Get("cursor"), ForkedFrom: q.Get("forkedFrom")}
	if f.Since, err = timeParam(q, "since"); err != nil {
		writeError(w, err)
		return
	}
	if f.Until, err = timeParam(q, "until"); err != nil {
		writeError(w, err)
		return
	}
	if f.Limit, err = intParam(q, "limit"); err != nil {
		writeError(w, err)
		return
	}
	page, err := a.p.ListRuns(r.Context(), callerOf(r), f)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, page)
}

// listApprovals is GET /v1/approvals.
func (a *api) listApprovals(w http.ResponseWriter, r *http.Request) {
	q, limit, ok := pageQuery(w, r, "status")
	if !ok {
		return
	}
	page, err := a.p.ListApprovals(r.Context(), callerOf(r), planner.ApprovalFilter{Status: q.Get("status"), Limit: limit, Cursor: q.Get("cursor")})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, page)
}

// listTools is GET /v1/tools.
func (a *api) listTools(w http.ResponseWriter, r *http.Request) {
	if err := knownParams(r.URL.Query()); err != nil {
		writeError(w, err)
		return
	}
	tools, err := a.p.ListTools(r.Context(), callerOf(r))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"tools": tools})
}

// listDeadLetters is GET /v1/dead-letters.
func (a *api) listDeadLetters(w http.ResponseWriter, r *http.Request) {
	q, limit, ok := pageQuery(w, r, "tool")
	if !ok {
		return
	}
	page, err := a.p.ListDeadLetters(r.Context(), callerOf(r), planner.DeadLetterFilter{Tool: q.Get("tool"), Limit: limit, Cursor: q.Get("cursor")})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, page)
}

// pageQuery reads the query of a paged list that takes the filters named: limit and
// cursor beside them, nothing else. ok is false once a 400 naming the parameter at fault
// is written.
func pageQuery(w http.ResponseWriter, r *http.Request, filters ...string) (q url.Values, limit int, ok bool) {
	q = r.URL.Query()
	if err := knownParams(q, append(filters, "limit", "cursor")...); err != nil {
		writeError(w, err)
		return nil, 0, false
	}
	limit, err := intParam(q, "limit")
	if err != nil {
		writeError(w, err)
		return nil, 0, false
	}
	return q, limit, true
}
