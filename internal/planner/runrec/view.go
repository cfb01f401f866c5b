package runrec

import (
	"time"

	"github.com/toolfleet/toolfleet/internal/provider"
)

// RunView is a run as the API shows it: its outcome and metadata, every tool call with its
// timeline, without the internal bookkeeping.
type RunView struct {
	ID       string `json:"id"`
	ParentID string `json:"parentId,omitempty"`
	Depth    int    `json:"depth"`
	// Status is the run's, or awaiting_approval while it waits on a person only
	// (Waiting.Shown), until ApprovalDeadline.
	Status           Status      `json:"status"`
	ApprovalDeadline *time.Time  `json:"approvalDeadline,omitempty"`
	Termination      Termination `json:"termination,omitempty"`
	Detail           string      `json:"detail,omitempty"`
	Answer           string      `json:"answer,omitempty"`
	Model            string      `json:"model"`
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
	// DurationMS is how long it ran (until now while it runs), its pauses left out.
	DurationMS int64 `json:"durationMs"`
	// Outcome, once it is done, says how its calls went (OutcomeOf), from ToolErrors
	// and Denials.
	Outcome    Outcome `json:"outcome,omitempty"`
	ToolErrors int     `json:"toolErrors"`
	Denials    int     `json:"denials"`
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
	// Pause: when the run pauses by itself, since when and why it is paused, and a pause
	// asked for its next step boundary (pause.go).
	PauseOn        *PauseOptions `json:"pauseOn,omitempty"`
	Paused         *RunPause     `json:"paused,omitempty"`
	PauseRequested *PauseRequest `json:"pauseRequested,omitempty"`
	PauseFace

	// ForkedFrom names the run and step a fork was forked from (the planner's fork.go).
	ForkedFrom *ForkPoint `json:"forkedFrom,omitempty"`
}

// View is the run as the API shows it now.
func (r *Run) View() RunView { return r.ViewAt(time.Now()) }

// ViewAt is the run as the API shows it at now (its duration while it runs), its
// nested runs left out of its status.
func (r *Run) ViewAt(now time.Time) RunView { return r.ViewWith(now, nil) }

// ViewWith is ViewAt with the waits of the run's nested runs as nested says: a run
// whose calls in flight wait on nested runs that wait on a person is shown awaiting
// approval.
func (r *Run) ViewWith(now time.Time, nested NestedWait) RunView {
	v := RunView{ID: r.ID, ParentID: r.ParentID, Depth: r.Depth, Status: r.Status, Termination: r.Termination,
		Detail: r.Detail, Answer: r.Answer, Model: r.Model, Steps: r.StepsTaken(), Calls: r.Calls,
		Tokens: r.Usage.Total(), Usage: r.Usage, Warnings: r.Warnings, Metadata: r.Metadata, Tenant: r.Tenant, Role: r.Role,
		CreatedAt: r.CreatedAt, FinishedAt: r.FinishedAt, Offered: r.Offered, Cost: r.Cost, CostBudget: r.Limits.CostBudget,
		Canceled: r.Canceled, Tools: r.Tools, Disabled: r.Disabled, Turn: r.Turn,
		PauseOn: r.PauseOn, Paused: r.Paused, ToolErrors: r.ToolErrors, Denials: r.Denials,
		Outcome: OutcomeOf(r.Status, r.ToolErrors, r.Denials)}
	w := r.WaitingOn(nested)
	v.Status, v.ApprovalDeadline = w.Shown(r.Status, r.Deadline)
	if r.Status == StatusPaused {
		v.PauseFace = r.Paused.Face()
	}
	v.DurationMS = DurationMS(r.CreatedAt, r.FinishedAt, v.PausedAt, r.PausedMS, now)
	if r.Status == StatusRunning {
		v.PauseRequested = r.PauseRequested
	}
	v.ForkedFrom = r.ForkedFrom
	tree := r.Tree()
	v.TreeSteps, v.TreeTokens, v.TreeUsage, v.TreeCost = tree.Steps, tree.Usage.Total(), tree.Usage, tree.Cost
	if v.Calls == nil {
		v.Calls = []*CallRecord{}
	}
	return v
}
