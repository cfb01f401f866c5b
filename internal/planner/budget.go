package planner

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

// Budgets over a tree of runs: a nested run (run_agent) draws from what its ancestors
// have left, and its usage counts against each of them as it happens.
//
// Each run keeps its own usage (Usage, Cost, its steps) and Nested, what its nested
// runs used; its tree totals are the sum. A nested run's tree totals are charged to its
// parent's control state by compare-and-set, on the parent's run_agent call that started
// it (CallRecord.Nested, with the charge's sequence number TreeSeq), and the parent's
// Nested changes by the difference; the parent's own tree totals then go to its parent
// the same way, up to the root (at most Limits.MaxDepth, ≤ 10, writes). A charge carries
// the totals, not an increment: repeating one (a step taken again after a crash) changes
// nothing, a later one replaces an earlier one whatever order they arrive in, and a
// charge that was lost is made good by the next. A run's value does not grow with its
// length: the parent keeps one charge per call of its current step, and one reservation
// per model call under way in its tree (reserve.go), which the charges settle.

// stepsStop, tokensStop and costStop say why the run's tree may not ask a model again,
// or "": its steps (this turn's), tokens or cost reached its limits.
func stepsStop(r *Run) string {
	if n := r.StepsUsed(); n >= r.Limits.MaxSteps {
		if r.NestedSteps() > 0 {
			return fmt.Sprintf("the run and its nested runs used its %d steps", r.Limits.MaxSteps)
		}
		return fmt.Sprintf("the run used its %d steps", r.Limits.MaxSteps)
	}
	return ""
}

func tokensStop(r *Run) string {
	if b := r.Limits.TokenBudget; b > 0 && r.TreeTokens() >= b {
		if r.HasNested() {
			return fmt.Sprintf("the run and its nested runs used %d tokens of its budget of %d (%d its own)", r.TreeTokens(), b, r.Usage.Total())
		}
		return fmt.Sprintf("the run used %d tokens of its budget of %d", r.Usage.Total(), b)
	}
	return ""
}

// overCostBudget says why the run may not ask the model again, or "".
func overCostBudget(r *Run) string {
	if b := r.Limits.CostBudget; b > 0 && r.TreeCost() >= b-costEpsilon {
		if r.HasNested() {
			return fmt.Sprintf("the run and its nested runs have cost %.6g of its budget of %.6g (%.6g its own)", r.TreeCost(), b, r.Cost)
		}
		return fmt.Sprintf("the run has cost %.6g of its budget of %.6g", r.Cost, b)
	}
	return ""
}

// childLimits are the limits of a nested run r starts now: r's, with each budget cut to
// what r's tree has left of it, and its time limit to r's. Nothing left of a budget is
// refused before (noBudgetForChild); the floors here only keep a limit valid should the
// tree have spent it meanwhile, and every ancestor's own check stops the run then.
func childLimits(r *Run, now time.Time) Limits {
	l := r.Limits
	l.MaxSteps = max(l.MaxSteps-r.StepsUsed(), 1)
	if l.TokenBudget > 0 {
		l.TokenBudget = max(l.TokenBudget-r.TreeTokens(), 1)
	}
	if l.CostBudget > 0 {
		l.CostBudget = max(l.CostBudget-r.TreeCost(), 2*costEpsilon)
	}
	if !r.Deadline.IsZero() {
		if left := r.Deadline.Sub(now); left < l.Timeout.D() {
			l.Timeout = tools.Duration(max(left, time.Millisecond)) // the deadline itself is capped at start
		}
	}
	return l
}

// noBudgetForChild refuses a run_agent call of r when r's tree has nothing left of a
// budget for the nested run to draw from; nil when it has.
func noBudgetForChild(r *Run) *tools.Error {
	const why = "no sub-agent was started: "
	switch {
	case r.StepsUsed() >= r.Limits.MaxSteps:
		return tools.Errorf(codeMaxSteps, why+"this run and its nested runs used its %d steps", r.Limits.MaxSteps)
	case r.Limits.TokenBudget > 0 && r.TreeTokens() >= r.Limits.TokenBudget:
		return tools.Errorf(codeTokenBudget, why+"this run and its nested runs used %d tokens of its budget of %d", r.TreeTokens(), r.Limits.TokenBudget)
	case r.Limits.CostBudget > 0 && r.TreeCost() >= r.Limits.CostBudget-costEpsilon:
		return tools.Errorf(codeCostBudget, why+"this run and its nested runs have cost %.6g of its budget of %.6g", r.TreeCost(), r.Limits.CostBudget)
	}
	return nil
}

// Error codes of a call refused for a budget of the run's tree.
const (
	codeTokenBudget tools.Code = "token_budget"
	codeMaxSteps    tools.Code = "max_steps"
)

// budgetCode reports whether code refuses a call for a budget of the run's tree.
func budgetCode(code tools.Code) bool {
	return code == codeTokenBudget || code == codeMaxSteps || code == codeCostBudget
}

// budgetEnd returns the code of t when it ends a run for a budget (steps, tokens, cost):
// a nested run starts with what its parent's tree has left of each, so when it ends
// so, its tree has nothing left of that budget either.
func budgetEnd(t Termination) (tools.Code, bool) {
	switch t {
	case TerminationMaxSteps:
		return codeMaxSteps, true
	case TerminationTokenBudget:
		return codeTokenBudget, true
	case TerminationCostBudget:
		return codeCostBudget, true
	}
	return "", false
}

// ancestorsStop checks, before a nested run asks its model, the budgets of every run it
// is nested in against their trees' totals, read fresh: the termination and why when one
// of them has none left, or "". (The run's own limits were cut to what its parent had
// left when it started, but siblings running beside it draw from the same budgets.)
func (p *Planner) ancestorsStop(ctx context.Context, r *Run) (Termination, string, error) {
	for id := r.ParentID; id != ""; {
		a, _, err := p.runs.Get(ctx, id)
		if errors.Is(err, runstore.ErrNotFound) {
			return "", "", nil
		}
		if err != nil {
			return "", "", err
		}
		if t, why := spent(a); t != "" {
			return t, fmt.Sprintf("run %s, which this run is nested in, has nothing left: %s", a.ID, why), nil
		}
		id = a.ParentID
	}
	return "", "", nil
}

// spent says which of r's budgets its tree used up (steps, tokens, cost) and how, or "".
func spent(r *Run) (Termination, string) {
	switch {
	case stepsStop(r) != "":
		return TerminationMaxSteps, stepsStop(r)
	case tokensStop(r) != "":
		return TerminationTokenBudget, tokensStop(r)
	case overCostBudget(r) != "":
		return TerminationCostBudget, overCostBudget(r)
	}
	return "", ""
}

// rollUp charges run's tree totals to its ancestors, its parent first: the parent keeps
// them on the run_agent call that started run, its Nested changes by the difference, and
// its own tree totals go on to its parent. reserve is the price of the calls run is
// about to send, included in its totals: an ancestor whose cost budget the charge would
// take over (with what it holds for other runs' answers under way) refuses it (changing
// nothing), and rollUp returns that ancestor. The charges it made below that ancestor
// stay until run's next charge (see reserveStep) replaces them; until then they count,
// so a sibling may be refused for them, never let through. Each ancestor's change also
// settles the reservations of run's answers its totals include (reserve.go), even where
// a later charge carried them already.
func (p *Planner) rollUp(ctx context.Context, run *Run, reserve float64) (refusedBy *Run, err error) {
	from, charge := run, runrec.NestedCharge{Seq: run.TreeSeq, Totals: run.Tree()}
	settled := answeredThrough(run)
	for from.ParentID != "" {
		refused := false
		parent, err := p.runs.Update(ctx, from.ParentID, func(r *Run) (bool, error) {
			refused = false
			now := p.cfg.Now()
			c := r.Call(from.ParentCallID)
			// When the parent moved on, it had the run's answer, after its last charge;
			// when a later charge is in, it carried this one.
			charged := c != nil && c.Name == AgentToolName &&
				(c.Nested == nil || c.Nested.Seq < charge.Seq || c.Nested.Seq == charge.Seq && c.Nested.Totals != charge.Totals)
			if charged {
				var old runrec.Totals
				if c.Nested != nil {
					old = c.Nested.Totals
				}
				nested := r.Nested.Plus(charge.Minus(old))
				if b := r.Limits.CostBudget; reserve > 0 && b > 0 {
					if held, _ := held(r, run.ID, now); r.Cost+nested.Cost+held > b+costEpsilon {
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
			released := release(r, run.ID, settled, now)
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

// reserveStep charges a nested run's step to its ancestors before the step is stored and
// its calls sent: rec.State has the model's answer and the price of the step's calls in
// its totals. An ancestor whose cost budget the calls would take over refuses them: none
// is sent (each is answered cost_budget, in the record too), the run ends with
// cost_budget, and its totals without them are charged instead.
func (p *Planner) reserveStep(ctx context.Context, rec *runstore.StepRecord, now time.Time) error {
	st := rec.State
	reserve := p.callsPrice(st)
	by, err := p.rollUp(ctx, st, reserve)
	if err != nil || by == nil {
		return err
	}
	budget := by.Limits.CostBudget
	refuse := func(c *CallRecord) {
		if !c.Local && !c.Done() && c.Step == st.Step {
			c.AnswerLocal(string(events.StatusError), tools.Errorf(codeCostBudget,
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
	st.Finish(TerminationCostBudget, fmt.Sprintf(
		"run %s, which this run is nested in, has cost %.6g of its budget of %.6g with its nested runs; this run's step %d (%.6g for its calls) would take it over",
		by.ID, by.TreeCost(), budget, st.Step, reserve), now)
	_, err = p.rollUp(ctx, st, 0)
	return err
}

// callsPrice is the price of the current step's calls that go to the fleet.
func (p *Planner) callsPrice(r *Run) float64 {
	var sum float64
	for _, c := range r.StepCalls() {
		if !c.Local && !c.Done() {
			sum += p.cfg.Prices.Tools[c.Name]
		}
	}
	return sum
}

// treeState is the part of a run's control state its nested runs' charges and
// reservations change.
type treeState struct {
	seq      int
	nested   runrec.Totals
	turn     runrec.NestedTurn
	reserved []runrec.Reservation
}

func treeStateOf(r *Run) treeState { return treeState{r.TreeSeq, r.Nested, r.NestedTurn, r.Reserved} }

// keepNested keeps, in a step's state built from the run as it was loaded (base: its
// TreeSeq then), the charges of nested runs that reached the stored run meanwhile
// (stored: the stored run's treeState), and the reservations the stored run holds (a
// run's own step never changes them).
func keepNested(r *Run, base int, stored treeState) {
	r.Reserved = stored.reserved
	if stored.seq == base {
		return
	}
	r.Nested, r.NestedTurn = stored.nested, stored.turn
	r.TreeSeq = max(stored.seq, r.TreeSeq) + 1
}
