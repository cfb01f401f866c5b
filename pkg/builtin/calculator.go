package builtin

import (
	"context"
	_ "embed"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

//go:embed schemas/calculator.json
var calculatorSchema []byte

// MaxExpressionLength bounds the calculator's input, in bytes. The schema says the same,
// and the parser checks again so that the tool is safe when run without the registry.
const MaxExpressionLength = 1024

// Calculator is the tool calculator: it evaluates an arithmetic expression with a
// recursive-descent parser (never an eval). It is safe and idempotent.
type Calculator struct {
	Expression string `json:"expression"`
}

// CalculatorResult is the output of [Calculator].
type CalculatorResult struct {
	Expression string  `json:"expression"`
	Result     float64 `json:"result"`
}

// Definition describes calculator.
func (Calculator) Definition() tools.Definition {
	return tools.Definition{
		Type:        "function",
		Name:        "calculator",
		Description: "Evaluate an arithmetic expression exactly as written and return its numeric value.",
		Parameters:  calculatorSchema,
		Safe:        true,
		Tags:        []string{"math"},
	}
}

// Run evaluates the expression. A malformed expression is invalid_tool_input (the model
// can repair it); a division by zero, an overflow or a result that is not a number is
// tool_error_permanent (evaluating again gives the same answer).
func (c *Calculator) Run(ctx context.Context) (any, error) {
	v, err := Evaluate(c.Expression)
	if err != nil {
		return nil, err
	}
	return CalculatorResult{Expression: c.Expression, Result: v}, nil
}
