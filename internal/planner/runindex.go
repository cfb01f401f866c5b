package planner

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/planner/runrec"
	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// The run index: each replica keeps, in memory, a small summary of every run of the
// runs bucket, per tenant and in creation order, fed by the watch of the bucket that the
// replica runs anyway (watchRuns) and so rebuilt from the bucket's current values when
// the replica starts. Lists (GET /v1/runs, /v1/approvals) are answered from it without
// reading any run; it keeps the tools' recent calls too, which the results streams
// feed (resultcount.go). See the package doc for what
// it costs.

const (
	// maxAnsweredApprovals bounds the answered approvals remembered per tenant.
	maxAnsweredApprovals = 1000
)

// RunSummary is a run as lists show it (GET /v1/runs): small, kept in memory by every
// replica for every stored run.
type RunSummary struct {
	ID string `json:"id"`
	// Status and ApprovalDeadline are the run view's (runrec.Waiting.Shown):
	// awaiting_approval while the run waits on a person only, until the deadline.
	Status           Status      `json:"status"`
	ApprovalDeadline *time.Time  `json:"approvalDeadline,omitempty"`
	Termination      Termination `json:"termination,omitempty"`
	Detail           string      `json:"detail,omitempty"`
	Model            string      `json:"model"`
	Tenant           string      `json:"tenant,omitempty"`
	Role             string      `json:"role,omitempty"`
	ParentID         string      `json:"parentId,omitempty"`
	Depth            int         `json:"depth"`
	CreatedAt        time.Time   `json:"createdAt"`
	FinishedAt       *time.Time  `json:"finishedAt,omitempty"`
	// Steps is how many times the model answered; Calls how many calls it made; Tools
	// the tools they called (distinct).
	Steps int      `json:"steps"`
	Calls int      `json:"calls"`
	Tools []string `json:"tools"`
	// Input is the first 200 characters of the run's input text.
	Input  string  `json:"input"`
	Tokens int     `json:"tokens"`
	Cost   float64 `json:"cost"`
	// PendingApprovals counts the run's calls waiting for an approval.
	PendingApprovals int `json:"pendingApprovals"`
	// DurationMS, Outcome, ToolErrors and Denials are the run view's: how long it ran
	// (until now while it runs, pauses left out), and how its calls went.
	DurationMS int64          `json:"durationMs"`
	Outcome    runrec.Outcome `json:"outcome,omitempty"`
	ToolErrors int            `json:"toolErrors"`
	Denials    int            `json:"denials"`
	// Metadata is the run's, as its start gave it.
	Metadata map[string]string `json:"metadata,omitempty"`
	// ForkedFrom names the run and step a fork was forked from (fork.go).
	ForkedFrom *runrec.ForkPoint `json:"forkedFrom,omitempty"`
	runrec.PauseFace

	// pausedMS is the run's time paused before its current pause (runrec.DurationMS).
	pausedMS int64
}

// at returns s as a list shows it at now: a run that has not ended has run until now.
func (s RunSummary) at(now time.Time) RunSummary {
	if s.FinishedAt == nil {
		s.DurationMS = runrec.DurationMS(s.CreatedAt, nil, s.PausedAt, s.pausedMS, now)
	}
	return s
}

// watchedRun is what a replica reads of each value of the runs bucket: the run's
// summary, and what the sweeper needs (deadline, lease).
type watchedRun struct {
	ID           string            `json:"id"`
	ParentID     string            `json:"parentId"`
	Depth        int               `json:"depth"`
	Status       Status            `json:"status"`
	Termination  Termination       `json:"termination"`
	Detail       string            `json:"detail"`
	Model        string            `json:"model"`
	Tenant       string            `json:"tenant"`
	Role         string            `json:"role"`
	Step         int               `json:"step"`
	Recorded     int               `json:"recorded"`
	Calls        []watchedCall     `json:"calls"`
	Usage        provider.Usage    `json:"usage"`
	Cost         float64           `json:"cost"`
	CreatedAt    time.Time         `json:"createdAt"`
	FinishedAt   *time.Time        `json:"finishedAt"`
	Deadline     time.Time         `json:"deadline"`
	Lease        *runrec.StepLease `json:"lease"`
	Turn         int               `json:"turn"`
	InputPreview string            `json:"inputPreview"`
	CallCount    int               `json:"callCount"`
	Called       []string          `json:"called"`
	ToolErrors   int               `json:"toolErrors"`
	Denials      int               `json:"denials"`
	Settled      []watchedCall     `json:"settled"`
	PausedMS     int64             `json:"pausedMs"`
	Paused       *runrec.RunPause  `json:"paused"`
	Metadata     map[string]string `json:"metadata"`
	Canceled     *runrec.RunCancel `json:"canceled"`
	ForkedFrom   *runrec.ForkPoint `json:"forkedFrom"`
}

// watchedCall is what the index reads of a call of the control state.
type watchedCall struct {
	ID         string           `json:"id"`
	Name       string           `json:"name"`
	Status     string           `json:"status"`
	Approval   *events.Approval `json:"approval"`
	CalledAt   time.Time        `json:"calledAt"`
	FinishedAt *time.Time       `json:"finishedAt"`
	// ApprovalExpiresAt is when its approval request is denied unanswered.
	ApprovalExpiresAt *time.Time `json:"approvalExpiresAt"`
	// Subs are a composite call's sub-calls, which wait for approvals like calls.
	Subs []watchedCall `json:"subs"`
}

// approvable calls fn with each call of w that may wait for an approval: its calls and
// their sub-calls (with their composite call's id and time), then the settled calls
// of the step before (runrec.Run.Settled), which the calls replaced.
func (w *watchedRun) approvable(fn func(c *watchedCall, parent string)) {
	for _, calls := range [][]watchedCall{w.Calls, w.Settled} {
		for i := range calls {
			c := &calls[i]
			fn(c, "")
			for k := range c.Subs {
				s := c.Subs[k]
				s.CalledAt = c.CalledAt
				fn(&s, c.ID)
			}
		}
	}
}

// waiting is what w's current calls wait on (runrec.Run.WaitingOn, from the watched
// value): the calls of the control state are its last step's, and only the current
// step's can be pending. nested (nil: none) says which of them wait on a nested run
// that waits on a person.
func (w *watchedRun) waiting(nested runrec.NestedWait) runrec.Waiting {
	var wt runrec.Waiting
	for i := range w.Calls {
		c := &w.Calls[i]
		wt.Call(c.Status, c.ApprovalExpiresAt)
		for k := range c.Subs {
			wt.Sub(c.Subs[k].Status, c.Subs[k].ApprovalExpiresAt)
		}
		wt.Nested(c.ID, c.Status, nested)
	}
	return wt
}

// callsAgent reports whether w is running with a run_agent call in flight: its shown
// status depends on its nested run's.
func (w *watchedRun) callsAgent() bool {
	if w.Status != StatusRunning {
		return false
	}
	for i := range w.Calls {
		if c := &w.Calls[i]; c.Name == AgentToolName && c.Status == string(runrec.CallPending) {
			return true
		}
	}
	return false
}

// summary is w as lists show it; nested (nil: none) says which of its calls in flight
// wait on a nested run that waits on a person.
func (w *watchedRun) summary(nested runrec.NestedWait) RunSummary {
	steps := (&Run{Status: w.Status, Termination: w.Termination, Step: w.Step, Recorded: w.Recorded}).StepsTaken()
	s := RunSummary{ID: w.ID, Status: w.Status, Termination: w.Termination, Detail: w.Detail, Model: w.Model,
		Tenant: w.Tenant, Role: w.Role, ParentID: w.ParentID, Depth: w.Depth, CreatedAt: w.CreatedAt,
		FinishedAt: w.FinishedAt, Steps: steps, Calls: w.CallCount, Tools: w.Called, Input: w.InputPreview,
		Tokens: w.Usage.Total(), Cost: w.Cost, ToolErrors: w.ToolErrors, Denials: w.Denials,
		Outcome: runrec.OutcomeOf(w.Status, w.ToolErrors, w.Denials), Metadata: w.Metadata, pausedMS: w.PausedMS, ForkedFrom: w.ForkedFrom}
	if s.Tools == nil {
		s.Tools = []string{}
	}
	wt := w.waiting(nested)
	s.PendingApprovals = wt.Parked()
	s.Status, s.ApprovalDeadline = wt.Shown(w.Status, w.Deadline)
	if w.Status == StatusPaused {
		s.PauseFace = w.Paused.Face()
	}
	if w.FinishedAt != nil {
		s.DurationMS = runrec.DurationMS(w.CreatedAt, w.FinishedAt, nil, w.PausedMS, *w.FinishedAt)
	}
	return s
}

// indexedRun is one run of the index.
type indexedRun struct {
	rev uint64
	sum RunSummary
	// lower is the input in lower case for q, when it differs from the input.
	lower string
	// pending lists the run's calls waiting for an approval.
	pending []string
	// agent is the run's value while it has run_agent calls in flight (else nil): it is
	// summarized again from it when a nested run changes (showParents).
	agent *watchedRun
}

func (r *indexedRun) before(o *indexedRun) bool {
	return keyBefore(r.sum.CreatedAt, r.sum.ID, o.sum.CreatedAt, o.sum.ID)
}

// keyBefore orders runs by creation time, then id: the index's order (lists show it
// reversed, newest first).
func keyBefore(at time.Time, id string, oat time.Time, oid string) bool {
	if !at.Equal(oat) {
		return at.Before(oat)
	}
	return id < oid
}

// tenantRuns is the index of one tenant's runs.
type tenantRuns struct {
	// runs are the tenant's runs, oldest first.
	runs []*indexedRun
	// running are its running runs; children its nested runs by parent id.
	running  map[string]*indexedRun
	children map[string][]*indexedRun
	// pending are the calls waiting for an approval, by call id; answered the approvals
	// answered lately, oldest first, and answeredIDs their call ids.
	pending     map[string]*ApprovalItem
	answered    []*ApprovalItem
	answeredIDs map[string]bool
}

func newTenantRuns() *tenantRuns {
	return &tenantRuns{running: map[string]*indexedRun{}, children: map[string][]*indexedRun{},
		pending: map[string]*ApprovalItem{}, answeredIDs: map[string]bool{}}
}

// runIndex is the run index of a replica.
type runIndex struct {
	mu      sync.RWMutex
	byID    map[string]*indexedRun
	tenants map[string]*tenantRuns
	// building is set while the watch delivers the bucket's values at start: runs are
	// appended unsorted and sorted once at the end.
	building bool
	ready    chan struct{}
	once     sync.Once
	stats    *toolStats
}

func newRunIndex() *runIndex {
	return &runIndex{byID: map[string]*indexedRun{}, tenants: map[string]*tenantRuns{}, building: true,
		ready: make(chan struct{}), stats: newToolStats()}
}

func (x *runIndex) tenant(t string) *tenantRuns {
	tr := x.tenants[t]
	if tr == nil {
		tr = newTenantRuns()
		x.tenants[t] = tr
	}
	return tr
}

// loaded marks the end of the bucket's values as they were when the watch started:
// from now on the index answers.
func (x *runIndex) loaded() {
	x.mu.Lock()
	if x.building {
		x.building = false
		for _, tr := range x.tenants {
			slices.SortFunc(tr.runs, cmpRuns)
			for p, kids := range tr.children {
				slices.SortFunc(kids, cmpRuns)
				tr.children[p] = kids
			}
			slices.SortFunc(tr.answered, cmpAnswered)
			tr.trimAnswered()
		}
	}
	x.mu.Unlock()
	x.once.Do(func() { close(x.ready) })
}

func cmpRuns(a, b *indexedRun) int {
	switch {
	case a.before(b):
		return -1
	case b.before(a):
		return 1
	}
	return 0
}

// put applies the value of a run at revision rev, as the watch delivered it.
func (x *runIndex) put(rev uint64, w *watchedRun) {
	if w.ID == "" {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	ir := x.byID[w.ID]
	if ir != nil && ir.rev >= rev {
		return
	}
	tr := x.tenant(w.Tenant)
	if ir == nil {
		ir = &indexedRun{}
		x.byID[w.ID] = ir
		x.summarize(ir, w)
		x.insert(tr, ir)
	} else {
		x.summarize(ir, w)
	}
	ir.rev = rev
	x.showParents(ir)
	if w.Status == StatusRunning { // shown running or awaiting_approval
		tr.running[w.ID] = ir
	} else {
		delete(tr.running, w.ID)
	}
	if lower := strings.ToLower(ir.sum.Input); lower != ir.sum.Input {
		ir.lower = lower
	} else {
		ir.lower = ""
	}
	x.trackApprovals(tr, ir, w)
}

// summarize sets ir's summary from w, its run's value. A run with run_agent calls in
// flight is shown by its nested runs' waits too, and keeps w for when they change
// (showParents); the others skip the look-ups. x.mu is held.
func (x *runIndex) summarize(ir *indexedRun, w *watchedRun) {
	ir.agent = nil
	var nested runrec.NestedWait
	if w.callsAgent() {
		ir.agent, nested = w, x.nestedWait(w.Tenant)
	}
	ir.sum = w.summary(nested)
}

// showParents shows ir's parent, and theirs, again after ir changed. x.mu is held.
func (x *runIndex) showParents(ir *indexedRun) {
	for depth := 0; ir.sum.ParentID != "" && depth <= maxNestingShown; depth++ {
		parent := x.byID[ir.sum.ParentID]
		if parent == nil || parent.agent == nil {
			return
		}
		status, deadline := parent.sum.Status, parent.sum.ApprovalDeadline
		x.summarize(parent, parent.agent)
		if parent.sum.Status == status && equalTime(parent.sum.ApprovalDeadline, deadline) {
			return // the grandparents show the same
		}
		ir = parent
	}
}

// maxNestingShown bounds showParents' walk up a tree (a loop in parent ids, which no
// planner writes, would otherwise never end).
const maxNestingShown = 64

// nestedWait reports, from the index, whether the nested run a call of tenant's run
// started is shown awaiting approval, and until when. x.mu is held.
func (x *runIndex) nestedWait(tenant string) runrec.NestedWait {
	return func(callID string) (bool, *time.Time) {
		child := x.byID[childID(callID)]
		if child == nil || child.sum.Tenant != tenant || child.sum.Status != StatusAwaitingApproval {
			return false, nil
		}
		return true, child.sum.ApprovalDeadline
	}
}

// nestedWaitNow is nestedWait for a caller that does not hold x.mu.
func (x *runIndex) nestedWaitNow(tenant string) runrec.NestedWait {
	locked := x.nestedWait(tenant)
	return func(callID string) (bool, *time.Time) {
		x.mu.RLock()
		defer x.mu.RUnlock()
		return locked(callID)
	}
}

func equalTime(a, b *time.Time) bool {
	return a == nil && b == nil || a != nil && b != nil && a.Equal(*b)
}

// insert places a new run in its tenant's order (appended while building).
func (x *runIndex) insert(tr *tenantRuns, ir *indexedRun) {
	tr.runs = insertSorted(tr.runs, ir, x.building)
	if p := ir.sum.ParentID; p != "" {
		tr.children[p] = insertSorted(tr.children[p], ir, x.building)
	}
}

func insertSorted(runs []*indexedRun, ir *indexedRun, unsorted bool) []*indexedRun {
	if unsorted || len(runs) == 0 || runs[len(runs)-1].before(ir) {
		return append(runs, ir) // the usual case: the newest run
	}
	i, _ := slices.BinarySearchFunc(runs, ir, cmpRuns)
	return slices.Insert(runs, i, ir)
}

// remove forgets a run that the bucket no longer holds (deleted, expired).
func (x *runIndex) remove(id string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	ir := x.byID[id]
	if ir == nil {
		return
	}
	delete(x.byID, id)
	defer x.showParents(ir)
	tr := x.tenant(ir.sum.Tenant)
	tr.runs = removeRun(tr.runs, ir)
	if p := ir.sum.ParentID; p != "" {
		if tr.children[p] = removeRun(tr.children[p], ir); len(tr.children[p]) == 0 {
			delete(tr.children, p)
		}
	}
	delete(tr.running, id)
	for _, c := range ir.pending {
		delete(tr.pending, c)
	}
}

func removeRun(runs []*indexedRun, ir *indexedRun) []*indexedRun {
	i := slices.Index(runs, ir)
	if i < 0 {
		return runs
	}
	return slices.Delete(runs, i, i+1)
}

// trackApprovals keeps the tenant's pending and answered approvals up to date with the
// run's calls.
func (x *runIndex) trackApprovals(tr *tenantRuns, ir *indexedRun, w *watchedRun) {
	was := ir.pending
	ir.pending = nil
	w.approvable(func(c *watchedCall, parent string) {
		switch {
		case c.Status == string(CallAwaitingApproval):
			ir.pending = append(ir.pending, c.ID)
			if tr.pending[c.ID] == nil {
				tr.pending[c.ID] = &ApprovalItem{CallID: c.ID, RunID: w.ID, Tool: c.Name, ParentCallID: parent, RequestedAt: c.CalledAt,
					Caller: events.Identity{Tenant: w.Tenant, Role: w.Role}, Status: ApprovalPending}
			}
		case c.Approval != nil || slices.Contains(was, c.ID):
			x.answer(tr, w, c, parent)
		}
	})
	for _, id := range was {
		if !slices.Contains(ir.pending, id) {
			delete(tr.pending, id)
		}
	}
}

// answer records an answered approval (once).
func (x *runIndex) answer(tr *tenantRuns, w *watchedRun, c *watchedCall, parent string) {
	if tr.answeredIDs[c.ID] {
		return
	}
	item := tr.pending[c.ID]
	if item == nil {
		item = &ApprovalItem{CallID: c.ID, RunID: w.ID, Tool: c.Name, ParentCallID: parent, RequestedAt: c.CalledAt,
			Caller: events.Identity{Tenant: w.Tenant, Role: w.Role}}
	} else {
		copied := *item
		item = &copied
	}
	delete(tr.pending, c.ID)
	item.Approval = c.Approval
	item.Status = approvalStatus(c)
	item.AnsweredAt = answeredAt(c)
	switch {
	case c.Approval != nil:
		item.By, item.ClaimedBy = c.Approval.By, c.Approval.ClaimedBy
	case item.Status == ApprovalCanceled && w.Canceled != nil:
		item.By = w.Canceled.By
	}
	tr.answeredIDs[c.ID] = true
	if x.building {
		tr.answered = append(tr.answered, item)
	} else {
		i, _ := slices.BinarySearchFunc(tr.answered, item, cmpAnswered)
		tr.answered = slices.Insert(tr.answered, i, item)
	}
	if !x.building {
		tr.trimAnswered()
	}
}

// trimAnswered keeps the last maxAnsweredApprovals answered approvals.
func (tr *tenantRuns) trimAnswered() {
	if len(tr.answered) <= maxAnsweredApprovals {
		return
	}
	for _, old := range tr.answered[:len(tr.answered)-maxAnsweredApprovals] {
		delete(tr.answeredIDs, old.CallID)
	}
	tr.answered = slices.Delete(tr.answered, 0, len(tr.answered)-maxAnsweredApprovals)
}

func answeredAt(c *watchedCall) time.Time {
	switch {
	case c.Approval != nil:
		return c.Approval.At
	case c.FinishedAt != nil:
		return *c.FinishedAt
	}
	return c.CalledAt
}

func approvalStatus(c *watchedCall) ApprovalStatus {
	if c.Approval != nil {
		switch c.Approval.Decision {
		case events.DecisionApprove:
			return ApprovalApproved
		case events.DecisionExpired:
			return ApprovalExpired
		}
		return ApprovalDenied
	}
	switch c.Status {
	case string(events.StatusCanceled):
		return ApprovalCanceled
	case string(events.StatusDenied):
		return ApprovalDenied
	}
	return ApprovalApproved
}

func cmpAnswered(a, b *ApprovalItem) int {
	if c := a.AnsweredAt.Compare(b.AnsweredAt); c != 0 {
		return c
	}
	return strings.Compare(a.CallID, b.CallID)
}

// waitLoaded waits until the index holds the bucket's values, or ctx ends.
func (x *runIndex) waitLoaded(done <-chan struct{}) bool {
	select {
	case <-x.ready:
		return true
	case <-done:
		return false
	}
}

// size is how many runs the index holds.
func (x *runIndex) size() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.byID)
}

// observe applies a change of the runs bucket (an entry of its watch) and returns the
// run as stored, or nil when the run is gone (or its value unreadable).
func (x *runIndex) observe(e jetstream.KeyValueEntry) *watchedRun {
	if e.Operation() != jetstream.KeyValuePut || e.Value() == nil {
		x.remove(e.Key())
		return nil
	}
	r, err := decodeWatched(e.Value())
	if err != nil {
		return nil
	}
	x.put(e.Revision(), r)
	return r
}
