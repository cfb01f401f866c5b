package builtin

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// maxNesting bounds parentheses, function calls and unary signs nested in one another,
// so that a hostile expression cannot exhaust the stack of the recursive parser.
const maxNesting = 64

// Evaluate computes an arithmetic expression. The grammar, loosest binding first:
//
//	expr    = term { ("+" | "-") term }
//	term    = unary { ("*" | "/" | "%") unary }
//	unary   = ("-" | "+") unary | power
//	power   = primary [ "^" unary ]          (right-associative: 2^3^2 = 2^9; -2^2 = -4)
//	primary = number | constant | name "(" expr { "," expr } ")" | "(" expr ")"
//
// Numbers are decimals with an optional exponent (1.5, .5, 2e-3). Errors are *tools.Error:
// invalid_tool_input for what does not parse, tool_error_permanent for what does not
// compute (division by zero, overflow, a result that is not a number).
func Evaluate(expression string) (float64, error) {
	if len(expression) > MaxExpressionLength {
		return 0, syntaxError(fmt.Sprintf("expression is %d bytes long; the limit is %d", len(expression), MaxExpressionLength))
	}
	if strings.TrimSpace(expression) == "" {
		return 0, syntaxError("expression is empty")
	}
	p := &parser{src: expression}
	p.next()
	v, err := p.expr()
	if err != nil {
		return 0, err
	}
	if p.tok.kind != tokEOF {
		return 0, p.unexpected()
	}
	return v, nil
}

type tokKind int

const (
	tokEOF tokKind = iota
	tokNum
	tokName
	tokOp  // one of + - * / % ^ ( ) ,
	tokErr // a lexing error, held in parser.err
)

type token struct {
	kind tokKind
	text string
	num  float64
	pos  int // byte offset, for messages
}

type parser struct {
	src   string
	pos   int
	tok   token
	depth int
	err   error // a lexing error, reported when the token is consumed
}

// next advances to the following token.
func (p *parser) next() {
	for p.pos < len(p.src) && (p.src[p.pos] == ' ' || p.src[p.pos] == '\t' || p.src[p.pos] == '\n' || p.src[p.pos] == '\r') {
		p.pos++
	}
	start := p.pos
	if p.pos >= len(p.src) {
		p.tok = token{kind: tokEOF, pos: start}
		return
	}
	c := p.src[p.pos]
	switch {
	case isDigit(c) || c == '.':
		p.scanNumber()
	case isLetter(c):
		for p.pos < len(p.src) && (isLetter(p.src[p.pos]) || isDigit(p.src[p.pos])) {
			p.pos++
		}
		p.tok = token{kind: tokName, text: strings.ToLower(p.src[start:p.pos]), pos: start}
	case strings.IndexByte("+-*/%^(),", c) >= 0:
		p.pos++
		p.tok = token{kind: tokOp, text: string(c), pos: start}
	default:
		r := []rune(p.src[start:])[0]
		p.err = syntaxError(fmt.Sprintf("unexpected character %q at position %d", r, start+1))
		p.tok = token{kind: tokErr, pos: start}
	}
}

func (p *parser) scanNumber() {
	start := p.pos
	digits := 0
	for p.pos < len(p.src) && isDigit(p.src[p.pos]) {
		p.pos++
		digits++
	}
	if p.pos < len(p.src) && p.src[p.pos] == '.' {
		p.pos++
		for p.pos < len(p.src) && isDigit(p.src[p.pos]) {
			p.pos++
			digits++
		}
	}
	if digits > 0 && p.pos < len(p.src) && (p.src[p.pos] == 'e' || p.src[p.pos] == 'E') {
		q := p.pos + 1
		if q < len(p.src) && (p.src[q] == '+' || p.src[q] == '-') {
			q++
		}
		if q < len(p.src) && isDigit(p.src[q]) {
			for q < len(p.src) && isDigit(p.src[q]) {
				q++
			}
			p.pos = q
		}
	}
	text := p.src[start:p.pos]
	if digits == 0 {
		p.err = syntaxError(fmt.Sprintf("malformed number %q at position %d", text, start+1))
		p.tok = token{kind: tokErr, pos: start}
		return
	}
	v, err := strconv.ParseFloat(text, 64)
	if err != nil {
		// Only a range error is possible here: the lexeme is well formed.
		p.err = evalError(fmt.Sprintf("number %s at position %d is too large", text, start+1))
		p.tok = token{kind: tokErr, pos: start}
		return
	}
	p.tok = token{kind: tokNum, text: text, num: v, pos: start}
}

func isDigit(c byte) bool  { return c >= '0' && c <= '9' }
func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' }

func (p *parser) is(op string) bool { return p.tok.kind == tokOp && p.tok.text == op }

// unexpected reports the current token as out of place.
func (p *parser) unexpected() error {
	if p.err != nil {
		return p.err
	}
	if p.tok.kind == tokEOF {
		return syntaxError("expression ends too early")
	}
	return syntaxError(fmt.Sprintf("unexpected %q at position %d", p.tok.text, p.tok.pos+1))
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > maxNesting {
		return syntaxError(fmt.Sprintf("expression nests deeper than %d levels", maxNesting))
	}
	return nil
}

func (p *parser) expr() (float64, error) {
	v, err := p.term()
	if err != nil {
		return 0, err
	}
	for p.is("+") || p.is("-") {
		op := p.tok.text
		p.next()
		r, err := p.term()
		if err != nil {
			return 0, err
		}
		if op == "+" {
			v += r
		} else {
			v -= r
		}
		if err := checkFinite(v, op); err != nil {
			return 0, err
		}
	}
	return v, nil
}

func (p *parser) term() (float64, error) {
	v, err := p.unary()
	if err != nil {
		return 0, err
	}
	for p.is("*") || p.is("/") || p.is("%") {
		op := p.tok.text
		p.next()
		r, err := p.unary()
		if err != nil {
			return 0, err
		}
		switch op {
		case "*":
			v *= r
		case "/":
			if r == 0 {
				return 0, evalError("division by zero")
			}
			v /= r
		case "%":
			if r == 0 {
				return 0, evalError("modulo by zero")
			}
			v = math.Mod(v, r)
		}
		if err := checkFinite(v, op); err != nil {
			return 0, err
		}
	}
	return v, nil
}

func (p *parser) unary() (float64, error) {
	if p.is("-") || p.is("+") {
		neg := p.is("-")
		if err := p.enter(); err != nil {
			return 0, err
		}
		p.next()
		v, err := p.unary()
		p.depth--
		if err != nil {
			return 0, err
		}
		if neg {
			return -v, nil
		}
		return v, nil
	}
	return p.power()
}

func (p *parser) power() (float64, error) {
	base, err := p.primary()
	if err != nil {
		return 0, err
	}
	if !p.is("^") {
		return base, nil
	}
	if err := p.enter(); err != nil {
		return 0, err
	}
	p.next()
	exp, err := p.unary()
	p.depth--
	if err != nil {
		return 0, err
	}
	if base == 0 && exp < 0 {
		return 0, evalError("division by zero (0 raised to a negative power)")
	}
	v := math.Pow(base, exp)
	if err := checkFinite(v, "^"); err != nil {
		return 0, err
	}
	return v, nil
}

func (p *parser) primary() (float64, error) {
	switch p.tok.kind {
	case tokNum:
		v := p.tok.num
		p.next()
		return v, nil
	case tokName:
		return p.name()
	case tokOp:
		if p.is("(") {
			if err := p.enter(); err != nil {
				return 0, err
			}
			p.next()
			v, err := p.expr()
			if err != nil {
				return 0, err
			}
			if !p.is(")") {
				return 0, p.missing(")")
			}
			p.next()
			p.depth--
			return v, nil
		}
	}
	return 0, p.unexpected()
}

func (p *parser) missing(what string) error {
	if p.err != nil {
		return p.err
	}
	if p.tok.kind == tokEOF {
		return syntaxError(fmt.Sprintf("missing %q at the end", what))
	}
	return syntaxError(fmt.Sprintf("expected %q at position %d, found %q", what, p.tok.pos+1, p.tok.text))
}

// name parses a constant or a function call.
func (p *parser) name() (float64, error) {
	name, pos := p.tok.text, p.tok.pos
	p.next()
	if !p.is("(") {
		switch name {
		case "pi":
			return math.Pi, nil
		case "e":
			return math.E, nil
		}
		if _, ok := functions[name]; ok {
			return 0, syntaxError(fmt.Sprintf("function %s at position %d needs arguments in parentheses", name, pos+1))
		}
		return 0, syntaxError(fmt.Sprintf("unknown name %q at position %d; constants are pi and e", name, pos+1))
	}
	fn, ok := functions[name]
	if !ok {
		return 0, syntaxError(fmt.Sprintf("unknown function %q at position %d; functions are %s", name, pos+1, functionNames))
	}
	if err := p.enter(); err != nil {
		return 0, err
	}
	p.next()
	var args []float64
	if !p.is(")") {
		for {
			v, err := p.expr()
			if err != nil {
				return 0, err
			}
			args = append(args, v)
			if !p.is(",") {
				break
			}
			p.next()
		}
	}
	if !p.is(")") {
		return 0, p.missing(")")
	}
	p.next()
	p.depth--
	if len(args) < fn.minArgs || (fn.maxArgs >= 0 && len(args) > fn.maxArgs) {
		return 0, syntaxError(fmt.Sprintf("%s takes %s, got %d", name, fn.arity(), len(args)))
	}
	v, err := fn.call(args)
	if err != nil {
		return 0, err
	}
	if err := checkFinite(v, name); err != nil {
		return 0, err
	}
	return v, nil
}

// checkFinite turns an infinite or NaN intermediate result into a clear error, so that the
// tool never answers "+Inf" (which JSON cannot carry anyway).
func checkFinite(v float64, op string) error {
	if math.IsInf(v, 0) {
		return evalError(fmt.Sprintf("overflow: the result of %s is beyond ±1.8e308", op))
	}
	if math.IsNaN(v) {
		return evalError(fmt.Sprintf("the result of %s is not a number", op))
	}
	return nil
}

func syntaxError(msg string) *tools.Error {
	return &tools.Error{Code: tools.CodeInvalidInput, Message: "expression: " + msg,
		Violations: []tools.Violation{{Pointer: "/expression", Message: msg}}}
}

func evalError(msg string) *tools.Error {
	return tools.Errorf(tools.CodeToolFailedPermanent, "expression: %s", msg)
}
