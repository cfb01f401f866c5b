package budget

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/toolfleet/toolfleet/internal/planner/runrec"
	"github.com/toolfleet/toolfleet/internal/planner/runstore"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Tree keeps the budgets of trees of runs on the runs bucket: it checks a nested run's
// ancestors, charges its totals to them and reserves its answers from their budgets,
// each by compare-and-set on the ancestor's entry (see the package doc). The planner
// makes one and hands it its store and settings, as it does its other parts.
type Tree struct {
	// Runs is the runs bucket the ancestors' entries are read and changed in.
	Runs *runstore.Store
	// Prices prices models and tool calls.
	Prices PriceTable
	// Now is the planner's clock.
	Now func() time.Time
	// ModelTimeout bounds a model call, and Lease a step's claim on its replica: a
	// reservation not settled expires after both.
	ModelTimeout time.Duration
	Lease        time.Duration
}

// StepsStop says why the run's tree may not ask a model again for its steps (this
// turn's), or "".
func StepsStop(r *runrec.Run) string {
	if n := r.StepsUsed(); n >= r.Limits.MaxSteps {
		if r.NestedSteps() > 0 {
			return fmt.Sprintf("the run and its nested runs used its %d steps", r.Limits.MaxSteps)
		}
		return fmt.Sprintf("the run used its %d steps", r.Limits.MaxSteps)
	}
	return ""
}

// TokensStop says why the run's tree may not ask a model again for its tokens, or "".
func TokensStop(r *runrec.Run) string {
	if b := r.Limits.TokenBudget; b > 0 && r.TreeTokens() >= b {
		if r.HasNested() {
			return fmt.Sprintf("the run and its nested runs used %d tokens of its budget of %d (%d its own)", r.TreeTokens(), b, r.Usage.Total())
		}
		return fmt.Sprintf("the run used %d tokens of its budget of %d", r.Usage.Total(), b)
	}
	return ""
}

// CostStop says why the run may not ask the model again, or "".
func CostStop(r *runrec.Run) string {
	if b := r.Limits.CostBudget; b > 0 && r.TreeCost() >= b-Epsilon {
		if r.HasNested() {
			return fmt.Sprintf("the run and its nested runs have cost %.6g of its budget of %.6g (%.6g its own)", r.TreeCost(), b, r.Cost)
		}
		return fmt.Sprintf("the run has cost %.6g of its budget of %.6g", r.Cost, b)
	}
	return ""
}

// ChildLimits are the limits of a nested run r starts now: r's, with each budget cut to
// what r's tree has left of it, and its time limit to r's. Nothing left of a budget is
// refused before (NoBudgetForChild); the floors here only keep a limit valid should the
// tree have spent it meanwhile, and every ancestor's own check stops the run then.
func ChildLimits(r *runrec.Run, now time.Time) runrec.Limits {
	l := r.Limits
	l.MaxSteps = max(l.MaxSteps-r.StepsUsed(), 1)
	if l.TokenBudget > 0 {
		l.TokenBudget = max(l.TokenBudget-r.TreeTokens(), 1)
	}
	if l.CostBudget > 0 {
		l.CostBudget = max(l.CostBudget-r.TreeCost(), 2*Epsilon)
	}
	if !r.Deadline.IsZero() {
		if left := r.Deadline.Sub(now); left < l.Timeout.D() {
			l.Timeout = tools.Duration(max(left, time.Millisecond)) // the deadline itself is capped at start
		}
	}
	return l
}

// NoBudgetForChild refuses a run_agent call of r when r's tree has nothing left of a
// budget for the nested run to draw from; nil when it has.
func NoBudgetForChild(r *runrec.Run) *tools.Error {
	const why = "no sub-agent was started: "
	switch {
	case r.StepsUsed() >= r.Limits.MaxSteps:
		return tools.Errorf(CodeMaxSteps, why+"this run and its nested runs used its %d steps", r.Limits.MaxSteps)
	case r.Limits.TokenBudget > 0 && r.TreeTokens() >= r.Limits.TokenBudget:
		return tools.Errorf(CodeTokenBudget, why+"this run and its nested runs used %d tokens of its budget of %d", r.TreeTokens(), r.Limits.TokenBudget)
	case r.Limits.CostBudget > 0 && r.TreeCost() >= r.Limits.CostBudget-Epsilon:
		return tools.Errorf(CodeCostBudget, why+"this run and its nested runs have cost %.6g of its budget of %.6g", r.TreeCost(), r.Limits.CostBudget)
	}
	return nil
}

// Error codes of a call refused for a budget of the run's tree.
const (
	CodeTokenBudget tools.Code = "token_budget"
	CodeMaxSteps    tools.Code = "max_steps"
	// CodeCostBudget is also the code of a call not run because it would take the
	// run's cost over its budget (ChargeStep, Tree.ReserveStep).
	CodeCostBudget tools.Code = "cost_budget"
)

// IsCode reports whether code refuses a call for a budget of the run's tree.
func IsCode(code tools.Code) bool {
	return code == CodeTokenBudget || code == CodeMaxSteps || code == CodeCostBudget
}

// End returns the code of t when it ends a run for a budget (steps, tokens, cost):
// a nested run starts with what its parent's tree has left of each, so when it ends
// so, its tree has nothing left of that budget either.
func End(t runrec.Termination) (tools.Code, bool) {
	switch t {
	case runrec.TerminationMaxSteps:
		return CodeMaxSteps, true
	case runrec.TerminationTokenBudget:
		return CodeTokenBudget, true
	case runrec.TerminationCostBudget:
		return CodeCostBudget, true
	}
	return "", false
}

// AncestorsStop checks, before a nested run asks its model, the budgets of every run it
// is nested in against their trees' totals, read fresh: the termination and why when one
// of them has none left, or "". (The run's own limits were cut to what its parent had
// left when it started, but siblings running beside it draw from the same budgets.)
func (tr *Tree) AncestorsStop(ctx context.Context, r *runrec.Run) (runrec.Termination, string, error) {
	for id := r.ParentID; id != ""; {
		a, _, err := tr.Runs.Get(ctx, id)
		if errors.Is(err, runstore.ErrNotFound) {
			return "", "", nil
		}
		if err != nil {
			return "", "", err
		}
		if t, why := Spent(a); t != "" {
			return t, fmt.Sprintf("run %s, which this run is nested in, has nothing left: %s", a.ID, why), nil
		}
		id = a.ParentID
	}
	return "", "", nil
}

// Spent says which of r's budgets its tree used up (steps, tokens, cost) and how, or "".
func Spent(r *runrec.Run) (runrec.Termination, string) {
	switch {
	case StepsStop(r) != "":
		return runrec.TerminationMaxSteps, StepsStop(r)
	case TokensStop(r) != "":
		return runrec.TerminationTokenBudget, TokensStop(r)
	case CostStop(r) != "":
		return runrec.TerminationCostBudget, CostStop(r)
	}
	return "", ""
}

// RollUp charges run's tree totals to its ancestors, its parent first: the parent keeps
// them on the run_agent call that started run, its Nested changes by the difference, and
// its own tree totals go on to its parent. reserve is the price of the calls run is
// about to send, included in its totals: an ancestor whose cost budget the charge would
// take over (with what it holds for other runs' answers under way) refuses it (changing
// nothing), and RollUp returns that ancestor. The charges it made below that ancestor
// stay until run's next charge (see ReserveStep) replaces them; until then they count,
// so a sibling may be refused for them, never let through. Each ancestor's change also
// settles the reservations of run's answers its totals include (reserve.go), even where
// a later charge carried them already.
func (tr *Tree) RollUp(ctx context.Context, run *runrec.Run, reserve float64) (refusedBy *runrec.Run, err error) {
	from, charge := run, runrec.NestedCharge{Seq: run.TreeSeq, Totals: run.Tree()}
	settled := AnsweredThrough(run)
	for from.ParentID != "" {
		refused := false
		parent, err := tr.Runs.Update(ctx, from.ParentID, func(r *runrec.Run) (bool, error) {
			refused = false
			now := tr.Now()
			c := r.Call(from.ParentCallID)
			// When the parent moved on, it had the run's answer, after its last charge;
			// when a later charge is in, it carried this one.
			charged := c != nil && c.Name == runrec.AgentToolName &&
				(c.Nested == nil || c.Nested.Seq < charge.Seq || c.Nested.Seq == charge.Seq && c.Nested.Totals != charge.Totals)
			if charged {
				var old runrec.Totals
				if c.Nested != nil {
					old = c.Nested.Totals
				}
				nested := r.Nested.Plus(charge.Minus(old))
				if b := r.Limits.CostBudget; reserve > 0 && b > 0 {
					if held, _ := Held(r, run.ID, now); r.Cost+nested.Cost+held > b+Epsilon {
						refused = true
						return false, nil
					}
				}
				if r.NestedTurn.Turn != r.Turn {
					r.NestedTurn = runrec.NestedTurn{Turn: r.Turn, Steps: r.Nested.Steps}
				}
				r.Nested = nested
				c.Nested = &runrec.NestedCharge{Seq: charge.Seq, Totals: charge.Totals}
				r.TreeSeq++
			}
			released := Release(r, run.ID, settled, now)
			return charged || released, nil
		})
		if errors.Is(err, runstore.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("charge run %s to run %s: %w", run.ID, from.ParentID, err)
		}
		if refused {
			return parent, nil
		}
		from, charge = parent, runrec.NestedCharge{Seq: parent.TreeSeq, Totals: parent.Tree()}
	}
	return nil, nil
}

// ReserveStep charges a nested run's step to its ancestors before the step is stored and
// its calls sent: rec.State has the model's answer and the price of the step's calls in
// its totals. An ancestor whose cost budget the calls would take over refuses them: none
// is sent (each is answered cost_budget, in the record too), the run ends with
// cost_budget, and its totals without them are charged instead.
func (tr *Tree) ReserveStep(ctx context.Context, rec *runstore.StepRecord, now time.Time) error {
	st := rec.State
	reserve := tr.Prices.CallsPrice(st)
	by, err := tr.RollUp(ctx, st, reserve)
	if err != nil || by == nil {
		return err
	}
	budget := by.Limits.CostBudget
	refuse := func(c *runrec.CallRecord) {
		if !c.Local && !c.Done() && c.Step == st.Step {
			c.AnswerLocal(string(events.StatusError), tools.Errorf(CodeCostBudget,
				"%s was not run: the cost budget of %.6g of run %s, which this run is nested in, would be exceeded", c.Name, budget, by.ID), now)
		}
	}
	for _, c := range rec.Calls {
		refuse(c)
	}
	for _, c := range st.Calls {
		refuse(c)
	}
	st.Cost -= reserve
	st.TreeSeq++
	st.Finish(runrec.TerminationCostBudget, fmt.Sprintf(
		"run %s, which this run is nested in, has cost %.6g of its budget of %.6g with its nested runs; this run's step %d (%.6g for its calls) would take it over",
		by.ID, by.TreeCost(), budget, st.Step, reserve), now)
	_, err = tr.RollUp(ctx, st, 0)
	return err
}

// CallsPrice is the price of the current step's calls that go to the fleet.
func (t PriceTable) CallsPrice(r *runrec.Run) float64 {
	var sum float64
	for _, c := range r.StepCalls() {
		if !c.Local && !c.Done() {
			sum += t.Tools[c.Name]
		}
	}
	return sum
}

// TreeState is the part of a run's control state its nested runs' charges and
// reservations change.
type TreeState struct {
	seq      int
	nested   runrec.Totals
	turn     runrec.NestedTurn
	reserved []runrec.Reservation
}

// TreeStateOf is r's TreeState.
func TreeStateOf(r *runrec.Run) TreeState {
	return TreeState{r.TreeSeq, r.Nested, r.NestedTurn, r.Reserved}
}

// KeepNested keeps, in a step's state built from the run as it was loaded (base: its
// TreeSeq then), the charges of nested runs that reached the stored run meanwhile
// (stored: the stored run's TreeState), and the reservations the stored run holds (a
// run's own step never changes them).
func KeepNested(r *runrec.Run, base int, stored TreeState) {
	r.Reserved = stored.reserved
	if stored.seq == base {
		return
	}
	r.Nested, r.NestedTurn = stored.nested, stored.turn
	r.TreeSeq = max(stored.seq, r.TreeSeq) + 1
}
