package budget

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/toolfleet/toolfleet/internal/planner/runrec"
	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// ModelPrice is what a model costs, per million tokens, in the currency of the price
// table (the planner does not care which, as long as budgets use the same).
type ModelPrice struct {
	InputPerMTok  float64 `json:"inputPerMTok" yaml:"inputPerMTok"`
	OutputPerMTok float64 `json:"outputPerMTok" yaml:"outputPerMTok"`
	// MaxOutputTokens is the longest answer the model is asked for under a budget (its
	// provider's limit on max_tokens, or less): a run with a budget caps each request's
	// max_tokens to what its tree has left, and at most this (reserve.go). Default
	// provider.DefaultMaxTokens (4096).
	MaxOutputTokens int `json:"maxOutputTokens,omitempty" yaml:"maxOutputTokens,omitempty"`
}

// PriceTable prices the planner's models, by the names runs use (its Config.Models' keys),
// and tool calls, by tool name: a tool's price is charged per call sent to the fleet.
//
// Tool prices live in the planner's configuration, not in tools.Definition: what a call
// costs is the operator's business (a provider's bill, a contract, an internal charge),
// may differ between deployments sharing one catalog, and must not be set by whoever
// publishes a definition (an executor, possibly a tenant's, would price its own tool);
// definitions stay the contract the model and executors share, unchanged.
type PriceTable struct {
	Models map[string]ModelPrice `json:"models" yaml:"models"`
	Tools  map[string]float64    `json:"tools" yaml:"tools"`
}

// LoadPrices reads a price table from a YAML or JSON file:
//
//	models:
//	  main: {inputPerMTok: 2.5, outputPerMTok: 10}
//	tools:
//	  web_search: 0.01
func LoadPrices(path string) (PriceTable, error) {
	var t PriceTable
	b, err := os.ReadFile(path)
	if err != nil {
		return t, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&t); err != nil {
		return t, fmt.Errorf("price table %s: %w", path, err)
	}
	return t, t.Validate()
}

// Validate refuses prices that are not non-negative numbers, saying which.
func (t PriceTable) Validate() error {
	bad := func(v float64) bool { return v < 0 || math.IsNaN(v) || math.IsInf(v, 0) }
	for name, p := range t.Models {
		if bad(p.InputPerMTok) || bad(p.OutputPerMTok) {
			return fmt.Errorf("price of model %q must be a non-negative number", name)
		}
		if p.MaxOutputTokens < 0 {
			return fmt.Errorf("maxOutputTokens of model %q must not be negative, got %d", name, p.MaxOutputTokens)
		}
	}
	for name, v := range t.Tools {
		if bad(v) {
			return fmt.Errorf("price of tool %q must be a non-negative number", name)
		}
	}
	return nil
}

// ModelCost is what usage of model costs, 0 when the model has no price.
func (t PriceTable) ModelCost(model string, u provider.Usage) float64 {
	pr, ok := t.Models[model]
	if !ok {
		return 0
	}
	return (float64(u.InputTokens)*pr.InputPerMTok + float64(u.OutputTokens)*pr.OutputPerMTok) / 1e6
}

// MaxOutput is the most output tokens a request of model asks for under a budget.
func (t PriceTable) MaxOutput(model string) int {
	if n := t.Models[model].MaxOutputTokens; n > 0 {
		return n
	}
	return provider.DefaultMaxTokens
}

// Priced reports whether the planner can count a run's cost on model.
func (t PriceTable) Priced(model string) bool {
	_, ok := t.Models[model]
	return ok
}

// ChargeStep counts the cost of the step's calls about to go to the fleet. Under a cost
// budget that they would exceed with the run's tree's cost (its own and its nested
// runs'; the model's answer is counted already), none of them
// is sent: each is answered with cost_budget and the run ends with that termination. It
// reports whether the run ended. It runs before the step is stored, so the step's calls
// are never dispatched.
func (t PriceTable) ChargeStep(r *runrec.Run, now time.Time) bool {
	calls := t.CallsPrice(r)
	budget := r.Limits.CostBudget
	if budget <= 0 || r.TreeCost()+calls <= budget+Epsilon {
		r.Cost += calls
		return false
	}
	spent := fmt.Sprintf("the run has cost %.6g", r.Cost)
	if r.HasNested() {
		spent = fmt.Sprintf("the run and its nested runs have cost %.6g", r.TreeCost())
	}
	detail := fmt.Sprintf("%s of its budget of %.6g; its step %d (the model's answer, and %.6g for its calls) would take it over",
		spent, budget, r.Step, calls)
	for _, c := range r.StepCalls() {
		if !c.Local && !c.Done() {
			c.AnswerLocal(string(events.StatusError), tools.Errorf(CodeCostBudget,
				"%s was not run: the run's cost budget of %.6g would be exceeded", c.Name, budget), now)
		}
	}
	r.Finish(runrec.TerminationCostBudget, detail, now)
	return true
}

// Epsilon absorbs floating-point error in budget comparisons.
const Epsilon = 1e-12
