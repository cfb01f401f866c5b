package runrec

import (
	"time"

	"github.com/toolfleet/toolfleet/internal/provider"
)

// What a run and its tree of nested runs used. Each run keeps its own usage (Usage,
// Cost, its steps) and Nested, what its nested runs used as charged to it; its tree
// totals are the sum, which package budget checks its limits against and charges to
// its parent.

// Totals is what a run used: its model's tokens, its cost (model and tool calls, see
// budget.PriceTable), and the model's steps.
type Totals struct {
	Usage provider.Usage `json:"usage"`
	Cost  float64        `json:"cost,omitempty"`
	Steps int            `json:"steps,omitempty"`
}

// Plus returns t and o summed.
func (t Totals) Plus(o Totals) Totals {
	return Totals{Usage: t.Usage.Add(o.Usage), Cost: t.Cost + o.Cost, Steps: t.Steps + o.Steps}
}

// Minus returns t less o.
func (t Totals) Minus(o Totals) Totals {
	return Totals{Usage: provider.Usage{InputTokens: t.Usage.InputTokens - o.Usage.InputTokens,
		OutputTokens: t.Usage.OutputTokens - o.Usage.OutputTokens}, Cost: t.Cost - o.Cost, Steps: t.Steps - o.Steps}
}

// NestedCharge is a nested run's tree totals as charged to its parent; Seq is the
// nested run's TreeSeq when they were, so that the parent keeps the latest.
type NestedCharge struct {
	Seq int `json:"seq"`
	Totals
}

// NestedTurn is the steps of a run's Nested when its turn Turn began (MaxSteps counts
// per turn).
type NestedTurn struct {
	Turn  int `json:"turn,omitempty"`
	Steps int `json:"steps,omitempty"`
}

// Own returns what the run itself used.
func (r *Run) Own() Totals { return Totals{Usage: r.Usage, Cost: r.Cost, Steps: r.StepsTaken()} }

// Tree returns what the run and its nested runs used: its own totals plus Nested. For a
// run without nested runs it is its own.
func (r *Run) Tree() Totals { return r.Own().Plus(r.Nested) }

// TreeTokens is the tokens of Tree, which the token budget is checked against.
func (r *Run) TreeTokens() int { return r.Usage.Total() + r.Nested.Usage.Total() }

// TreeCost is the cost of Tree, which the cost budget is checked against.
func (r *Run) TreeCost() float64 { return r.Cost + r.Nested.Cost }

// NestedSteps is how many steps the run's nested runs took in its current turn.
func (r *Run) NestedSteps() int { return r.Nested.Steps - r.nestedTurnBase() }

// HasNested reports whether nested runs charged anything to the run.
func (r *Run) HasNested() bool { return r.Nested != Totals{} }

func (r *Run) nestedTurnBase() int {
	if r.NestedTurn.Turn == r.Turn {
		return r.NestedTurn.Steps
	}
	return r.Nested.Steps // charged in an earlier turn: none in this one yet
}

// StepsUsed is how many model steps the run's tree took in its current turn: its own
// (the current one included once the model answered it) and its nested runs'.
func (r *Run) StepsUsed() int {
	n := r.Step - r.TurnStart
	if r.Status == StatusRunning && len(r.StepCalls()) > 0 {
		n++
	}
	return n + r.NestedSteps()
}

// Reservation is a model answer under way in a run's tree, held from the run's budgets
// until the answer is charged (Run.Reserved; package budget): the most it can cost.
type Reservation struct {
	Run    string    `json:"run"`
	Step   int       `json:"step"`
	Cost   float64   `json:"cost,omitempty"`
	Tokens int       `json:"tokens,omitempty"`
	Until  time.Time `json:"until"`
}
