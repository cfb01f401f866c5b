package planner

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/toolfleet/toolfleet/internal/planner/runrec"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// Page sizes of the lists (GET /v1/runs, /v1/approvals, /v1/dead-letters).
const (
	DefaultPageSize = 50
	MaxPageSize     = 500
)

// indexWait bounds how long a list waits for a replica's index to be loaded at start.
const indexWait = 10 * time.Second

// RunFilter selects runs for [Planner.ListRuns]; zero fields select all.
type RunFilter struct {
	Status      Status
	Termination Termination
	// Tool selects runs that called it; Parent the nested runs of a run; Q runs whose
	// input preview contains it (case-insensitive).
	Tool, Parent, Q string
	// Outcome selects finished runs by how their calls went (clean, tool_errors,
	// denied); Metadata runs whose metadata has every key with its value.
	Outcome  Outcome
	Metadata map[string]string
	// ForkedFrom selects the forks of a run.
	ForkedFrom string
	// Since and Until bound the runs' creation time (Since inclusive, Until exclusive).
	Since, Until time.Time
	// Limit is the page size (0: DefaultPageSize); Cursor the previous page's Next.
	Limit  int
	Cursor string
}

// RunPage is a page of runs, newest first; Next, when set, is the cursor of the next.
type RunPage struct {
	Runs []RunSummary `json:"runs"`
	Next string       `json:"next,omitempty"`
}

// Terminations lists every termination, for checking a filter.
var Terminations = []Termination{TerminationCompleted, TerminationFinalTool, TerminationMaxSteps, TerminationTimeout,
	TerminationTokenBudget, TerminationCostBudget, TerminationErrorThreshold, TerminationLoopDetected,
	TerminationModelError, TerminationCanceled, TerminationToolRequired, TerminationStorageError,
	TerminationStopCondition, TerminationStopHook}

// filterErrorf is a 400 naming the filter that is wrong.
func filterErrorf(filter, format string, args ...any) error {
	return &APIError{Status: http.StatusBadRequest, Message: "bad filter " + filter + ": " + fmt.Sprintf(format, args...)}
}

// CheckLimit checks a page size (0: the default).
func CheckLimit(limit int) (int, error) {
	if limit == 0 {
		return DefaultPageSize, nil
	}
	if limit < 1 || limit > MaxPageSize {
		return 0, filterErrorf("limit", "must be 1 to %d, got %d", MaxPageSize, limit)
	}
	return limit, nil
}

func (f *RunFilter) check() error {
	if f.Status != "" && f.Status != StatusRunning && f.Status != StatusDone && f.Status != StatusPaused && f.Status != StatusAwaitingApproval {
		return filterErrorf("status", "must be running, awaiting_approval, paused or done, got %q", f.Status)
	}
	if f.Outcome != "" && !slices.Contains(runrec.Outcomes, f.Outcome) {
		return filterErrorf("outcome", "must be clean, tool_errors or denied, got %q", f.Outcome)
	}
	for k := range f.Metadata {
		if k == "" {
			return filterErrorf("metadata", "a key is empty (metadata.KEY=VALUE)")
		}
	}
	if f.Termination != "" && !slices.Contains(Terminations, f.Termination) {
		return filterErrorf("termination", "must be one of %s, got %q", joinTerminations(), f.Termination)
	}
	if f.Tool != "" && events.ValidateTool(f.Tool) != nil {
		return filterErrorf("tool", "%q is not a tool name (letters, digits, _ and -, at most 64)", f.Tool)
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
		return filterErrorf("until", "must be after since")
	}
	var err error
	f.Limit, err = CheckLimit(f.Limit)
	return err
}

func joinTerminations() string {
	s := make([]string, len(Terminations))
	for i, t := range Terminations {
		s[i] = string(t)
	}
	return strings.Join(s, ", ")
}

// runCursor is the position after a run in the index's order: a page continues with
// the runs created before it.
type runCursor struct {
	at time.Time
	id string
}

func (c runCursor) encode() string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.at.UnixNano(), 10) + "." + c.id))
}

func decodeRunCursor(s string) (runCursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		at, id, ok := strings.Cut(string(b), ".")
		if n, perr := strconv.ParseInt(at, 10, 64); ok && perr == nil && id != "" {
			return runCursor{at: time.Unix(0, n).UTC(), id: id}, nil
		}
	}
	return runCursor{}, filterErrorf("cursor", "%q is not a cursor of this list (give the next of the previous page)", s)
}

// ListRuns lists caller's tenant's runs that f selects, newest first (creation time,
// then id, both descending), one page at a time. It answers from the replica's run
// index (runindex.go): a page costs a binary search and the runs it looks at, which
// for a page without filters is the page itself.
func (p *Planner) ListRuns(ctx context.Context, caller events.Identity, f RunFilter) (RunPage, error) {
	if err := f.check(); err != nil {
		return RunPage{}, err
	}
	var after *runCursor
	if f.Cursor != "" {
		c, err := decodeRunCursor(f.Cursor)
		if err != nil {
			return RunPage{}, err
		}
		after = &c
	}
	if err := p.awaitIndex(ctx); err != nil {
		return RunPage{}, err
	}
	return p.index.listRuns(caller.Tenant, f, after, p.cfg.Now()), nil
}

// awaitIndex waits until the replica's run index is loaded (at start).
func (p *Planner) awaitIndex(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, indexWait)
	defer cancel()
	if !p.index.waitLoaded(ctx.Done()) {
		return &APIError{Status: http.StatusServiceUnavailable, Message: "the planner is still loading its index of runs; try again"}
	}
	return nil
}

func (x *runIndex) listRuns(tenant string, f RunFilter, after *runCursor, now time.Time) RunPage {
	x.mu.RLock()
	defer x.mu.RUnlock()
	page := RunPage{Runs: []RunSummary{}}
	tr := x.tenants[tenant]
	if tr == nil {
		return page
	}
	// Where to look: a run's nested runs, the running runs, or all of them; oldest first.
	candidates := tr.runs
	switch {
	case f.Parent != "":
		candidates = tr.children[f.Parent]
	case f.Status == StatusRunning || f.Status == StatusAwaitingApproval: // both stored running
		candidates = make([]*indexedRun, 0, len(tr.running))
		for _, ir := range tr.running {
			candidates = append(candidates, ir)
		}
		slices.SortFunc(candidates, cmpRuns)
	}
	// The range of creation times the page may hold: [since, min(until, cursor)).
	end := len(candidates)
	if after != nil {
		end, _ = slices.BinarySearchFunc(candidates, *after, func(ir *indexedRun, c runCursor) int {
			if keyBefore(ir.sum.CreatedAt, ir.sum.ID, c.at, c.id) {
				return -1
			}
			if ir.sum.CreatedAt.Equal(c.at) && ir.sum.ID == c.id {
				return 0
			}
			return 1
		})
	}
	if !f.Until.IsZero() {
		u, _ := slices.BinarySearchFunc(candidates[:end], f.Until, func(ir *indexedRun, t time.Time) int {
			return ir.sum.CreatedAt.Compare(t)
		})
		end = u
	}
	start := 0
	if !f.Since.IsZero() {
		start, _ = slices.BinarySearchFunc(candidates[:end], f.Since, func(ir *indexedRun, t time.Time) int {
			return ir.sum.CreatedAt.Compare(t)
		})
	}
	q := strings.ToLower(f.Q)
	for i := end - 1; i >= start; i-- {
		ir := candidates[i]
		if !ir.matches(&f, q) {
			continue
		}
		if len(page.Runs) == f.Limit {
			last := page.Runs[len(page.Runs)-1]
			page.Next = runCursor{at: last.CreatedAt, id: last.ID}.encode()
			break
		}
		page.Runs = append(page.Runs, ir.sum.at(now))
	}
	return page
}

func (ir *indexedRun) matches(f *RunFilter, q string) bool {
	s := &ir.sum
	if f.Status != "" && s.Status != f.Status || f.Termination != "" && s.Termination != f.Termination {
		return false
	}
	if f.Parent != "" && s.ParentID != f.Parent || f.Tool != "" && !slices.Contains(s.Tools, f.Tool) {
		return false
	}
	if f.Outcome != "" && s.Outcome != f.Outcome {
		return false
	}
	for k, v := range f.Metadata {
		if got, ok := s.Metadata[k]; !ok || got != v {
			return false
		}
	}
	if f.ForkedFrom != "" && (s.ForkedFrom == nil || s.ForkedFrom.Run != f.ForkedFrom) {
		return false
	}
	if q != "" {
		text := ir.lower
		if text == "" {
			text = s.Input
		}
		return strings.Contains(text, q)
	}
	return true
}
