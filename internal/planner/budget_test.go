package planner

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/internal/planner/budget"
	"github.com/toolfleet/toolfleet/internal/planner/runrec"
	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// treeScripts: the root starts two sub-agents at once; each calls add and starts a
// sub-agent of its own, which calls add. Every run answers whatever its calls got.
var treeScripts = map[string]string{
	"main": `
steps:
  - calls:
      - {name: run_agent, arguments: {task: "first half", model: child, tools: [add, run_agent]}}
      - {name: run_agent, arguments: {task: "second half", model: child, tools: [add, run_agent]}}
  - text: root done
`,
	"child": `
steps:
  - calls:
      - {name: add, arguments: {a: 1, b: 2}}
      - {name: run_agent, arguments: {task: "the details", model: grand, tools: [add]}}
  - text: child done
`,
	"grand": `
steps:
  - calls: [{name: add, arguments: {a: 3, b: 4}}]
  - text: grand done
`,
}

// treePlanner serves scripts with prices: the models' tokens at modelPrice per million
// input tokens, add at addPrice a call.
func treePlanner(t *testing.T, scripts map[string]string, modelPrice, addPrice float64) *testBundle {
	t.Helper()
	b := setup(t, nil)
	models := map[string]provider.Model{}
	prices := PriceTable{Models: map[string]ModelPrice{}, Tools: map[string]float64{"add": addPrice}}
	for name, s := range scripts {
		models[name] = scriptedModel(t, s)
		prices.Models[name] = ModelPrice{InputPerMTok: modelPrice}
	}
	b.swapPlanner(t, Config{Models: models, DefaultModel: "main", Prices: prices})
	return b
}

// tree returns the run and every run nested in it, each as Get assembles it, root first.
func (b *testBundle) tree(t *testing.T, root *Run) []*Run {
	t.Helper()
	out := []*Run{root}
	for i := 0; i < len(out); i++ {
		for _, c := range out[i].Calls {
			if c.Name != AgentToolName || c.Local {
				continue
			}
			child, err := b.p.Get(b.ctx, childID(c.ID))
			if err != nil {
				t.Fatalf("nested run of call %s: %v", c.ID, err)
			}
			if child.Status != StatusDone {
				child = b.wait(t, child.ID)
			}
			out = append(out, child)
		}
	}
	return out
}

// sumOwn adds up what each run used itself.
func sumOwn(runs []*Run) runrec.Totals {
	var sum runrec.Totals
	for _, r := range runs {
		sum = sum.Plus(r.Own())
	}
	return sum
}

func terminations(runs []*Run) []Termination {
	var out []Termination
	for _, r := range runs {
		out = append(out, r.Termination)
	}
	return out
}

// A cost budget holds for a run, its sub-agents and theirs together: the root's budget
// of 0.035 takes three of the tree's four calls of add (0.01 each), whichever sub-agents
// get there first; the grandchild whose call would exceed it sends none and ends with
// cost_budget. Before, each nested run had the root's whole budget to itself and the
// tree spent 0.04.
func TestCostBudgetHoldsForTheTree(t *testing.T) {
	b := treePlanner(t, treeScripts, 0, 0.01)
	root := b.run(t, StartRequest{Input: "split the work", Tools: []string{"add", "run_agent"}, Limits: Limits{CostBudget: 0.035}})
	runs := b.tree(t, root)
	if len(runs) != 5 {
		t.Fatalf("%d runs in the tree, want the root, two children and two grandchildren: %v", len(runs), terminations(runs))
	}
	total := sumOwn(runs)
	if total.Cost > 0.035+budget.Epsilon {
		t.Fatalf("the tree spent %g of the root's budget of 0.035 (%v)", total.Cost, terminations(runs))
	}
	if !near(total.Cost, 0.03) || !near(root.Tree().Cost, total.Cost) || !near(root.View().TreeCost, total.Cost) {
		t.Fatalf("the tree spent %g, the root counts %g (view %g), want 0.03", total.Cost, root.Tree().Cost, root.View().TreeCost)
	}
	var stopped []*Run
	for _, r := range runs {
		if r.Termination == TerminationCostBudget {
			stopped = append(stopped, r)
		}
	}
	if len(stopped) != 1 || stopped[0].Depth != 2 || stopped[0].Cost != 0 {
		t.Fatalf("runs ended %v; want one grandchild ended by the budget, having spent nothing", terminations(runs))
	}
	c := stopped[0].Calls[0]
	if !c.Local || c.Error == nil || c.Error.Code != budget.CodeCostBudget || c.Executor != "" {
		t.Fatalf("the call over the budget: %+v", c)
	}
	if root.Termination != TerminationCompleted {
		t.Fatalf("the root ended %s (%s)", root.Termination, root.Detail)
	}
	// Each child started with what the root had left then (all of it), not more.
	for _, r := range runs[1:3] {
		if r.Limits.CostBudget > 0.035+budget.Epsilon {
			t.Fatalf("a child's budget is %g", r.Limits.CostBudget)
		}
	}
}

// A token budget holds for the tree too. Each answer is 10,000 tokens: the root's, the
// child's and the two grandchildren's at once (20,000) use the root's 40,000; the child
// is not asked again, and neither is the root. Before, the tree used 60,000. (Each
// answer is reserved at its input's bound, a few thousand tokens here, and charged
// what the script says.)
func TestTokenBudgetHoldsForTheTree(t *testing.T) {
	b := setup(t, map[string]string{
		"main": `
steps:
  - calls: [{name: run_agent, arguments: {task: "do it", model: child}}]
    usage: {input: 10000, output: 0}
  - text: root done
    usage: {input: 10000, output: 0}
`,
		"child": `
steps:
  - calls:
      - {name: run_agent, arguments: {task: "left", model: grand}}
      - {name: run_agent, arguments: {task: "right", model: grand}}
    usage: {input: 10000, output: 0}
  - text: child done
    usage: {input: 10000, output: 0}
`,
		"grand": `
steps:
  - text: leaf
    usage: {input: 6000, output: 4000}
`,
	})
	root := b.run(t, StartRequest{Input: "go", Tools: []string{"run_agent"}, Limits: Limits{TokenBudget: 40000}})
	runs := b.tree(t, root)
	if len(runs) != 4 {
		t.Fatalf("%d runs in the tree: %v", len(runs), terminations(runs))
	}
	total := sumOwn(runs)
	if total.Usage.Total() > 40000 {
		t.Fatalf("the tree used %d tokens of the root's budget of 40000 (%v)", total.Usage.Total(), terminations(runs))
	}
	if total.Usage.Total() != 40000 || root.Tree().Usage != total.Usage || root.Tree().Steps != total.Steps || total.Steps != 4 {
		t.Fatalf("the tree used %+v, the root counts %+v", total, root.Tree())
	}
	child := runs[1]
	if child.Termination != TerminationTokenBudget || child.Limits.TokenBudget != 30000 {
		t.Fatalf("the child ended %s (%s) with a budget of %d; want token_budget, 30000 (what the root had left)",
			child.Termination, child.Detail, child.Limits.TokenBudget)
	}
	if root.Termination != TerminationTokenBudget {
		t.Fatalf("the root ended %s (%s)", root.Termination, root.Detail)
	}
	for _, g := range runs[2:] {
		if g.Termination != TerminationCompleted || g.Answer != "leaf" || g.Depth != 2 {
			t.Fatalf("grandchild ended %s: %q", g.Termination, g.Answer)
		}
	}
}

// MaxSteps counts the tree's model steps too: with 3, the root's first step and the
// child's two use them, and neither is asked again.
func TestMaxStepsHoldForTheTree(t *testing.T) {
	b := setup(t, map[string]string{
		"main": `
steps:
  - calls: [{name: run_agent, arguments: {task: "count", model: child, tools: [add]}}]
  - text: root done
`,
		"child": `
steps:
  - calls: [{name: add, arguments: {a: 1, b: 1}}]
  - calls: [{name: add, arguments: {a: 2, b: 2}}]
  - text: child done
`,
	})
	root := b.run(t, StartRequest{Input: "go", Tools: []string{"add", "run_agent"}, Limits: Limits{MaxSteps: 3}})
	runs := b.tree(t, root)
	child := runs[1]
	if child.Limits.MaxSteps != 2 || child.Termination != TerminationMaxSteps || child.StepsTaken() != 2 {
		t.Fatalf("the child (maxSteps %d) ended %s after %d steps", child.Limits.MaxSteps, child.Termination, child.StepsTaken())
	}
	if root.Termination != TerminationMaxSteps || root.Tree().Steps != 3 || root.View().TreeSteps != 3 || root.View().Steps != 1 {
		t.Fatalf("the root ended %s (%s) with %d steps in its tree", root.Termination, root.Detail, root.Tree().Steps)
	}
}

// A nested run ends by its parent's time: its deadline is the parent's, not its own
// start plus the parent's timeout.
func TestNestedRunDeadlineIsTheParents(t *testing.T) {
	b := setup(t, map[string]string{
		"main": `
steps:
  - calls: [{name: run_agent, arguments: {task: "wait", model: child, tools: [slow]}}]
  - text: root done
`,
		"child": `
steps:
  - calls: [{name: slow, arguments: {}}]
  - text: child done
`,
	})
	root := b.run(t, StartRequest{Input: "go", Tools: []string{"slow", "run_agent"}, Limits: Limits{Timeout: tools.Duration(2 * time.Second)}})
	child := b.tree(t, root)[1]
	if !child.Deadline.Equal(root.Deadline) || child.Limits.Timeout.D() >= 2*time.Second {
		t.Fatalf("child deadline %s (timeout %s), the root's %s", child.Deadline, child.Limits.Timeout.D(), root.Deadline)
	}
	if child.Termination != TerminationTimeout || root.Termination != TerminationTimeout {
		t.Fatalf("the child ended %s, the root %s", child.Termination, root.Termination)
	}
}

// A run's view (what GET /v1/runs/{id} answers) shows each run's own totals and its
// tree's: the root's tree totals are the sum of every run's own, a leaf's are its own.
func TestRunViewShowsTreeTotals(t *testing.T) {
	b := treePlanner(t, treeScripts, 1, 0.01) // 1 per million tokens: every answer costs
	root := b.run(t, StartRequest{Input: "split the work", Tools: []string{"add", "run_agent"}})
	runs := b.tree(t, root)
	// What a user reads of GET /v1/runs/{id}: the run's view, as JSON.
	type totals struct {
		Steps      int            `json:"steps"`
		Tokens     int            `json:"tokens"`
		Usage      provider.Usage `json:"usage"`
		Cost       float64        `json:"cost"`
		TreeSteps  int            `json:"treeSteps"`
		TreeTokens int            `json:"treeTokens"`
		TreeUsage  provider.Usage `json:"treeUsage"`
		TreeCost   float64        `json:"treeCost"`
	}
	get := func(id string) totals {
		run, err := b.p.Get(b.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		body, err := json.Marshal(run.View())
		var v totals
		if err != nil || json.Unmarshal(body, &v) != nil {
			t.Fatalf("the view of run %s: %v: %s", id, err, body)
		}
		return v
	}
	var sum totals
	for _, r := range runs {
		v := get(r.ID)
		sum.Steps += v.Steps
		sum.Tokens += v.Tokens
		sum.Usage = sum.Usage.Add(v.Usage)
		sum.Cost += v.Cost
	}
	rv := get(root.ID)
	if rv.TreeSteps != sum.Steps || rv.TreeTokens != sum.Tokens || rv.TreeUsage != sum.Usage || !near(rv.TreeCost, sum.Cost) {
		t.Fatalf("the root's view %+v; the runs' own add up to %+v", rv, sum)
	}
	// Five runs of two steps each; the cost: ten answers and four calls.
	if rv.Steps != 2 || rv.TreeSteps != 10 || rv.TreeCost <= 0.04 || rv.Cost >= rv.TreeCost {
		t.Fatalf("the root's view %+v", rv)
	}
	leaf := get(runs[len(runs)-1].ID)
	if leaf.TreeSteps != leaf.Steps || leaf.TreeTokens != leaf.Tokens || !near(leaf.TreeCost, leaf.Cost) {
		t.Fatalf("a leaf's tree totals are not its own: %+v", leaf)
	}
}
