package builtin

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

func TestCalculatorEvaluates(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		expr string
		want float64
	}{
		{"integer", "42", 42},
		{"precedence", "2 + 3 * 4", 14},
		{"parentheses", "(2 + 3) * 4", 20},
		{"left associative minus", "10 - 4 - 3", 3},
		{"left associative division", "100 / 10 / 5", 2},
		{"modulo", "17 % 5", 2},
		{"negative modulo keeps the dividend's sign", "-7 % 3", -1},
		{"power is right associative", "2 ^ 3 ^ 2", 512},
		{"unary minus binds looser than power", "-2 ^ 2", -4},
		{"negative exponent", "2 ^ -1", 0.5},
		{"double negation", "--3", 3},
		{"unary plus", "+3 - -3", 6},
		{"decimals", "0.1 + .2", 0.30000000000000004},
		{"exponent notation", "1.5e3 + 2E-1", 1500.2},
		{"sqrt", "sqrt(16)", 4},
		{"abs", "abs(-3.5)", 3.5},
		{"min of many", "min(4, -2, 7)", -2},
		{"max of one", "max(9)", 9},
		{"round half away from zero", "round(2.5) + round(-2.5)", 0},
		{"round to decimals", "round(3.14159, 2)", 3.14},
		{"floor and ceil", "floor(-1.5) * ceil(1.2)", -4},
		{"ln of e", "ln(e)", 1},
		{"log10", "log10(1000)", 3},
		{"sin of pi/2", "sin(pi / 2)", 1},
		{"cos of 0", "cos(0)", 1},
		{"names are case-insensitive", "SQRT(PI * PI)", math.Pi},
		{"nested functions", "max(abs(-3), sqrt(min(16, 25)))", 4},
		{"whitespace everywhere", " \t( 1 +\n2 ) ", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := &Calculator{Expression: tt.expr}
			out, err := c.Run(context.Background())
			if err != nil {
				t.Fatalf("Run(%q): %v", tt.expr, err)
			}
			got := out.(CalculatorResult)
			if math.Abs(got.Result-tt.want) > 1e-12 || got.Expression != tt.expr {
				t.Fatalf("Run(%q) = %+v, want result %v", tt.expr, got, tt.want)
			}
		})
	}
}

func TestCalculatorRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		expr    string
		code    tools.Code
		message string // a fragment the user must see
	}{
		{"empty", "   ", tools.CodeInvalidInput, "empty"},
		{"dangling operator", "1 +", tools.CodeInvalidInput, "ends too early"},
		{"unbalanced open", "(1 + 2", tools.CodeInvalidInput, `missing ")"`},
		{"unbalanced close", "1 + 2)", tools.CodeInvalidInput, `unexpected ")" at position 6`},
		{"two numbers", "1 2", tools.CodeInvalidInput, `unexpected "2" at position 3`},
		{"bad character", "2 & 3", tools.CodeInvalidInput, `unexpected character '&' at position 3`},
		{"no eval of code", "os.Exit(1)", tools.CodeInvalidInput, `unknown name "os"`},
		{"lone dot", "1 + .", tools.CodeInvalidInput, "malformed number"},
		{"unknown name", "x + 1", tools.CodeInvalidInput, `unknown name "x"`},
		{"unknown function", "exp(1)", tools.CodeInvalidInput, `unknown function "exp"`},
		{"function without parentheses", "sqrt 4", tools.CodeInvalidInput, "needs arguments"},
		{"wrong arity", "sqrt(1, 2)", tools.CodeInvalidInput, "sqrt takes 1 argument, got 2"},
		{"no arguments", "min()", tools.CodeInvalidInput, "min takes at least 1 argument(s), got 0"},
		{"too long", strings.Repeat("1+", MaxExpressionLength/2) + "1", tools.CodeInvalidInput, "the limit is 1024"},
		{"too deep", strings.Repeat("(", 100) + "1" + strings.Repeat(")", 100), tools.CodeInvalidInput, "nests deeper"},
		{"too many signs", strings.Repeat("-", 200) + "1", tools.CodeInvalidInput, "nests deeper"},
		{"division by zero", "1 / (2 - 2)", tools.CodeToolFailedPermanent, "division by zero"},
		{"modulo by zero", "5 % 0", tools.CodeToolFailedPermanent, "modulo by zero"},
		{"zero to a negative power", "0 ^ -1", tools.CodeToolFailedPermanent, "division by zero"},
		{"overflow by power", "10 ^ 400", tools.CodeToolFailedPermanent, "overflow"},
		{"overflow by product", "1e200 * 1e200", tools.CodeToolFailedPermanent, "overflow"},
		{"literal too large", "1e999", tools.CodeToolFailedPermanent, "too large"},
		{"sqrt of negative", "sqrt(-1)", tools.CodeToolFailedPermanent, "sqrt is defined only for numbers ≥ 0"},
		{"ln of zero", "ln(0)", tools.CodeToolFailedPermanent, "ln is defined only for numbers > 0"},
		{"not a number", "(-8) ^ 0.5", tools.CodeToolFailedPermanent, "not a number"},
		{"round with bad decimals", "round(1, 1.5)", tools.CodeToolFailedPermanent, "whole number of decimals"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, err := (&Calculator{Expression: tt.expr}).Run(context.Background())
			if err == nil {
				t.Fatalf("Run(%q) = %v, want an error", tt.expr, out)
			}
			var te *tools.Error
			if !errors.As(err, &te) || te.Code != tt.code {
				t.Fatalf("Run(%q) error = %v, want code %s", tt.expr, err, tt.code)
			}
			if !strings.Contains(te.Message, tt.message) {
				t.Fatalf("Run(%q) message = %q, want it to mention %q", tt.expr, te.Message, tt.message)
			}
			if tt.code == tools.CodeInvalidInput && (len(te.Violations) != 1 || te.Violations[0].Pointer != "/expression") {
				t.Fatalf("Run(%q) violations = %+v, want one at /expression", tt.expr, te.Violations)
			}
		})
	}
}

// FuzzEvaluate asserts that any input yields a finite number or an *tools.Error, never a
// panic or a non-finite value.
func FuzzEvaluate(f *testing.F) {
	for _, s := range []string{"1+2", "((", "2^3^4^5", "-(-(-1))", "sqrt(", "1e", "1e+", ".e1", "max(,)", "é", "1/0", "round(1e308, 15)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := Evaluate(s)
		if err != nil {
			var te *tools.Error
			if !errors.As(err, &te) {
				t.Fatalf("Evaluate(%q) error %v is not a *tools.Error", s, err)
			}
			return
		}
		if math.IsInf(v, 0) || math.IsNaN(v) {
			t.Fatalf("Evaluate(%q) = %v, want a finite number", s, v)
		}
	})
}
