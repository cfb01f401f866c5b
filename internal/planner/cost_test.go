package planner

import (
	"math"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolfleet/toolfleet/internal/planner/budget"
	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/internal/testsupport/opstest"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// Each turn reports 1,000 input and 500 output tokens: at 1 and 2 per million, 0.002.
const costScript = `
steps:
  - calls: [{name: add, arguments: {a: 1, b: 2}}]
    usage: {input: 1000, output: 500}
  - calls: [{name: add, arguments: {a: 3, b: 4}}]
    usage: {input: 1000, output: 500}
  - text: done
    usage: {input: 1000, output: 500}
`

var costPrices = PriceTable{
	Models: map[string]ModelPrice{"main": {InputPerMTok: 1, OutputPerMTok: 2}},
	Tools:  map[string]float64{"add": 0.001},
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// A run's cost is its model's tokens at the price table's price plus its calls' prices;
// a step whose calls would take it over its cost budget is not dispatched.
func TestCostBudget(t *testing.T) {
	b := setup(t, nil)
	b.swapPlanner(t, Config{Models: map[string]provider.Model{"main": scriptedModel(t, costScript)}, Prices: costPrices})

	// No budget: three turns and two calls.
	run := b.run(t, StartRequest{Input: "add", Tools: []string{"add"}})
	if run.Termination != TerminationCompleted || !near(run.Cost, 3*0.002+2*0.001) || !near(run.View().Cost, run.Cost) {
		t.Fatalf("run ended %s, cost %g, want completed at 0.008", run.Termination, run.Cost)
	}

	// Budget 0.005: step 0 costs 0.003; step 1's answer takes it to 0.005, and its call
	// (0.001 more) would exceed the budget: it is not sent.
	run = b.run(t, StartRequest{Input: "add", Tools: []string{"add"}, Limits: Limits{CostBudget: 0.005}})
	if run.Termination != TerminationCostBudget || !near(run.Cost, 0.005) {
		t.Fatalf("run ended %s (%s), cost %g, want cost_budget at 0.005", run.Termination, run.Detail, run.Cost)
	}
	if len(run.Calls) != 2 || run.Calls[0].Status != "ok" || run.Calls[0].Executor == "" {
		t.Fatalf("calls %+v", run.Calls)
	}
	if c := run.Calls[1]; !c.Local || c.Executor != "" || c.Error == nil || c.Error.Code != budget.CodeCostBudget {
		t.Fatalf("the call over budget: %+v", c)
	}
	v := run.View()
	if !near(v.Cost, 0.005) || v.CostBudget != 0.005 {
		t.Fatalf("view shows cost %g of %g", v.Cost, v.CostBudget)
	}

	// Budget 0.003: reached exactly after step 0, so the model is not asked again.
	run = b.run(t, StartRequest{Input: "add", Tools: []string{"add"}, Limits: Limits{CostBudget: 0.003}})
	if run.Termination != TerminationCostBudget || !near(run.Cost, 0.003) || len(run.Calls) != 1 {
		t.Fatalf("run ended %s (%s), cost %g, %d calls", run.Termination, run.Detail, run.Cost, len(run.Calls))
	}

	// A budget needs a price for the model.
	b.swapPlanner(t, Config{Models: map[string]provider.Model{"main": scriptedModel(t, costScript)}})
	if _, err := b.p.Start(b.ctx, StartRequest{Input: "add", Limits: Limits{CostBudget: 1}}); err == nil {
		t.Fatal("a cost budget without a price was accepted")
	}
	if _, err := b.p.Start(b.ctx, StartRequest{Input: "add", Limits: Limits{CostBudget: -1}}); err == nil {
		t.Fatal("a negative cost budget was accepted")
	}
}

// An operator reads each tenant's spending: tokens by model, kind and tenant as the
// model calls report them, and cost by tenant as the runs record it (model and calls;
// a call refused by the budget costs nothing). Anonymous callers' runs have a tenant
// label of their own, which no tenant can take.
func TestCostAndTokensByTenant(t *testing.T) {
	b := setup(t, nil)
	reg := prometheus.NewRegistry()
	b.swapPlanner(t, Config{Models: map[string]provider.Model{"main": scriptedModel(t, costScript)}, Prices: costPrices, Metrics: reg})

	acme := b.run(t, StartRequest{Input: "add", Tools: []string{"add"}, Caller: events.Identity{Tenant: "acme", Role: "user"}})
	anon := b.run(t, StartRequest{Input: "add", Tools: []string{"add"}, Limits: Limits{CostBudget: 0.005}})
	if !near(acme.Cost, 0.008) || !near(anon.Cost, 0.005) {
		t.Fatalf("runs cost %g and %g, want 0.008 and 0.005", acme.Cost, anon.Cost)
	}
	m := opstest.Metrics(t, reg)
	for series, want := range map[string]float64{
		`toolfleet_planner_cost_total{tenant="acme"}`:                                    acme.Cost,
		`toolfleet_planner_cost_total{tenant="(anonymous)"}`:                             anon.Cost,
		`toolfleet_planner_tokens_total{kind="input",model="main",tenant="acme"}`:        3000,
		`toolfleet_planner_tokens_total{kind="output",model="main",tenant="acme"}`:       1500,
		`toolfleet_planner_tokens_total{kind="input",model="main",tenant="(anonymous)"}`: 2000,
	} {
		if got, ok := m[series]; !ok || !near(got, want) {
			t.Errorf("%s = %v (present: %v), want %v", series, got, ok, want)
		}
	}
}
