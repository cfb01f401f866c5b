package builtin

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// function is one of the calculator's functions; maxArgs < 0 means any number.
type function struct {
	minArgs, maxArgs int
	call             func(args []float64) (float64, error)
}

func (f function) arity() string {
	switch {
	case f.minArgs == f.maxArgs && f.minArgs == 1:
		return "1 argument"
	case f.minArgs == f.maxArgs:
		return fmt.Sprintf("%d arguments", f.minArgs)
	case f.maxArgs < 0:
		return fmt.Sprintf("at least %d argument(s)", f.minArgs)
	default:
		return fmt.Sprintf("%d to %d arguments", f.minArgs, f.maxArgs)
	}
}

func unary(f func(float64) float64) function {
	return function{minArgs: 1, maxArgs: 1, call: func(a []float64) (float64, error) { return f(a[0]), nil }}
}

// domain wraps a one-argument function defined only where ok holds.
func domain(name, rule string, ok func(float64) bool, f func(float64) float64) function {
	return function{minArgs: 1, maxArgs: 1, call: func(a []float64) (float64, error) {
		if !ok(a[0]) {
			return 0, evalError(fmt.Sprintf("%s is defined only for %s, got %g", name, rule, a[0]))
		}
		return f(a[0]), nil
	}}
}

var functions = map[string]function{
	"sqrt":  domain("sqrt", "numbers ≥ 0", func(x float64) bool { return x >= 0 }, math.Sqrt),
	"ln":    domain("ln", "numbers > 0", func(x float64) bool { return x > 0 }, math.Log),
	"log10": domain("log10", "numbers > 0", func(x float64) bool { return x > 0 }, math.Log10),
	"abs":   unary(math.Abs),
	"floor": unary(math.Floor),
	"ceil":  unary(math.Ceil),
	"sin":   unary(math.Sin),
	"cos":   unary(math.Cos),
	"round": {minArgs: 1, maxArgs: 2, call: round},
	"min": {minArgs: 1, maxArgs: -1, call: func(a []float64) (float64, error) {
		m := a[0]
		for _, v := range a[1:] {
			m = math.Min(m, v)
		}
		return m, nil
	}},
	"max": {minArgs: 1, maxArgs: -1, call: func(a []float64) (float64, error) {
		m := a[0]
		for _, v := range a[1:] {
			m = math.Max(m, v)
		}
		return m, nil
	}},
}

// round(x) rounds half away from zero; round(x, n) keeps n decimals (0 ≤ n ≤ 15).
func round(a []float64) (float64, error) {
	if len(a) == 1 {
		return math.Round(a[0]), nil
	}
	n := a[1]
	if n != math.Trunc(n) || n < 0 || n > 15 {
		return 0, evalError(fmt.Sprintf("round's second argument is a whole number of decimals from 0 to 15, got %g", n))
	}
	p := math.Pow(10, n)
	return math.Round(a[0]*p) / p, nil
}

var functionNames = func() string {
	names := make([]string, 0, len(functions))
	for n := range functions {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}()
