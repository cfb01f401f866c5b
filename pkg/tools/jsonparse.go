package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDepth bounds the nesting of arguments and outputs (the arguments object itself is
// level 1). It is one tenth of encoding/json's own limit on purpose: what toolfleet
// accepts is wrapped again — arguments in a call event, an output in a result, both in a
// run's conversation — and whatever it accepts must still be answered and decoded by
// every reader. A deeper value is refused with a message saying it is nested too deeply.
const MaxDepth = 1000

// JSONDepth returns how deeply b nests objects and arrays (a flat object is 1, a scalar
// 0), without checking the rest of its syntax. It costs one pass over b and no
// allocation.
func JSONDepth(b []byte) int {
	depth, deepest, inString := 0, 0, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
			deepest = max(deepest, depth)
		case '}', ']':
			depth--
		}
	}
	return deepest
}

// parseJSON reads exactly one JSON value from b into the generic form the schema validator
// walks: map[string]any, []any, string, json.Number, bool or nil. It is the single parse of
// a call's arguments; its result is validated and then instantiated without reading the
// bytes again. It accepts what encoding/json accepts and builds the same values (invalid
// UTF-8 in strings becomes U+FFFD, duplicate keys keep the last value); it exists because
// decoding into interface values through reflection costs about twice as much.
func parseJSON(b []byte) (any, error) {
	p := parser{b: b}
	p.skipSpace()
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.i < len(p.b) {
		return nil, p.errorf("unexpected %s after the top-level value", p.describe())
	}
	return v, nil
}

// syntaxError is a parse failure with the byte offset where it happened.
type syntaxError struct {
	msg    string
	offset int
	line   int
	column int
}

func (e *syntaxError) Error() string {
	return fmt.Sprintf("%s at offset %d (line %d, column %d)", e.msg, e.offset, e.line, e.column)
}

type parser struct {
	b []byte
	i int
}

func (p *parser) errorf(format string, args ...any) error {
	line, col := 1, 1
	for _, c := range p.b[:min(p.i, len(p.b))] {
		if c == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return &syntaxError{msg: fmt.Sprintf(format, args...), offset: p.i, line: line, column: col}
}

// describe names the byte at the cursor for an error message.
func (p *parser) describe() string {
	if p.i >= len(p.b) {
		return "end of input"
	}
	c := p.b[p.i]
	if c < 0x20 || c >= 0x7f {
		return fmt.Sprintf("byte 0x%02x", c)
	}
	return strconv.QuoteRune(rune(c))
}

func (p *parser) skipSpace() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) value(depth int) (any, error) {
	if p.i >= len(p.b) {
		return nil, p.errorf("unexpected end of input, want a value")
	}
	switch c := p.b[p.i]; {
	case c == '{':
		return p.object(depth + 1)
	case c == '[':
		return p.array(depth + 1)
	case c == '"':
		return p.str()
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case c == 't':
		return true, p.literal("true")
	case c == 'f':
		return false, p.literal("false")
	case c == 'n':
		return nil, p.literal("null")
	default:
		return nil, p.errorf("unexpected %s, want a value", p.describe())
	}
}

func (p *parser) literal(word string) error {
	if len(p.b)-p.i >= len(word) && string(p.b[p.i:p.i+len(word)]) == word {
		p.i += len(word)
		return nil
	}
	// Point at the first byte that differs.
	for k := 0; k < len(word); k++ {
		if p.i >= len(p.b) || p.b[p.i] != word[k] {
			return p.errorf("unexpected %s in literal %s", p.describe(), word)
		}
		p.i++
	}
	return nil
}

func (p *parser) object(depth int) (any, error) {
	if depth > MaxDepth {
		return nil, p.errorf("nested too deeply: more than %d levels", MaxDepth)
	}
	p.i++ // {
	m := make(map[string]any)
	p.skipSpace()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return m, nil
	}
	for {
		p.skipSpace()
		if p.i >= len(p.b) || p.b[p.i] != '"' {
			return nil, p.errorf("unexpected %s, want a string key", p.describe())
		}
		k, err := p.str()
		if err != nil {
			return nil, err
		}
		p.skipSpace()
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return nil, p.errorf("unexpected %s after object key, want ':'", p.describe())
		}
		p.i++
		p.skipSpace()
		v, err := p.value(depth)
		if err != nil {
			return nil, err
		}
		m[k] = v
		p.skipSpace()
		if p.i >= len(p.b) {
			return nil, p.errorf("unexpected end of input in object, want ',' or '}'")
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case '}':
			p.i++
			return m, nil
		default:
			return nil, p.errorf("unexpected %s in object, want ',' or '}'", p.describe())
		}
	}
}

func (p *parser) array(depth int) (any, error) {
	if depth > MaxDepth {
		return nil, p.errorf("nested too deeply: more than %d levels", MaxDepth)
	}
	p.i++ // [
	a := make([]any, 0, 4)
	p.skipSpace()
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		return a, nil
	}
	for {
		p.skipSpace()
		v, err := p.value(depth)
		if err != nil {
			return nil, err
		}
		a = append(a, v)
		p.skipSpace()
		if p.i >= len(p.b) {
			return nil, p.errorf("unexpected end of input in array, want ',' or ']'")
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case ']':
			p.i++
			return a, nil
		default:
			return nil, p.errorf("unexpected %s in array, want ',' or ']'", p.describe())
		}
	}
}

// str reads a string whose opening quote is at the cursor. The common case, no escapes and
// valid UTF-8, costs one scan and one allocation.
func (p *parser) str() (string, error) {
	p.i++ // "
	start := p.i
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			s := string(p.b[start:p.i])
			p.i++
			return s, nil
		case c == '\\' || c >= utf8.RuneSelf:
			return p.slowStr(start)
		case c < 0x20:
			return "", p.errorf("control character %s in string", p.describe())
		}
		p.i++
	}
	return "", p.errorf("unexpected end of input in string")
}

// slowStr finishes a string with escapes or non-ASCII bytes, decoding as encoding/json does.
func (p *parser) slowStr(start int) (string, error) {
	out := make([]byte, p.i-start, p.i-start+16)
	copy(out, p.b[start:p.i])
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return string(out), nil
		case c < 0x20:
			return "", p.errorf("control character %s in string", p.describe())
		case c == '\\':
			if p.i+1 >= len(p.b) {
				p.i++
				return "", p.errorf("unexpected end of input in string escape")
			}
			e := p.b[p.i+1]
			switch e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r, ok := p.hex4(p.i + 2)
				if !ok {
					p.i += 2
					return "", p.errorf("invalid \\u escape in string")
				}
				p.i += 6
				if utf16.IsSurrogate(r) {
					r2, ok2 := rune(-1), false
					if p.i+1 < len(p.b) && p.b[p.i] == '\\' && p.b[p.i+1] == 'u' {
						r2, ok2 = p.hex4(p.i + 2)
					}
					if dec := utf16.DecodeRune(r, r2); ok2 && dec != utf8.RuneError {
						p.i += 6
						r = dec
					} else {
						r = utf8.RuneError
					}
				}
				out = utf8.AppendRune(out, r)
				continue
			default:
				p.i++
				return "", p.errorf("invalid escape %s in string", p.describe())
			}
			p.i += 2
		case c < utf8.RuneSelf:
			out = append(out, c)
			p.i++
		default:
			r, size := utf8.DecodeRune(p.b[p.i:])
			if r == utf8.RuneError && size == 1 {
				out = utf8.AppendRune(out, utf8.RuneError)
			} else {
				out = append(out, p.b[p.i:p.i+size]...)
			}
			p.i += size
		}
	}
	return "", p.errorf("unexpected end of input in string")
}

func (p *parser) hex4(at int) (rune, bool) {
	if at+4 > len(p.b) {
		return 0, false
	}
	var r rune
	for _, c := range p.b[at : at+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// number reads a number by the JSON grammar and keeps its text as a json.Number, so that
// no precision is lost before the schema sees it.
func (p *parser) number() (any, error) {
	start := p.i
	if p.b[p.i] == '-' {
		p.i++
	}
	switch {
	case p.i < len(p.b) && p.b[p.i] == '0':
		p.i++
	case p.i < len(p.b) && p.b[p.i] >= '1' && p.b[p.i] <= '9':
		p.digits()
	default:
		return nil, p.errorf("unexpected %s in number, want a digit", p.describe())
	}
	if p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		if p.digits() == 0 {
			return nil, p.errorf("unexpected %s after decimal point, want a digit", p.describe())
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		if p.digits() == 0 {
			return nil, p.errorf("unexpected %s in exponent, want a digit", p.describe())
		}
	}
	return json.Number(p.b[start:p.i]), nil
}

func (p *parser) digits() int {
	n := 0
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
		n++
	}
	return n
}

// MarshalJSON is json.Marshal without HTML escaping: '<', '>' and '&' stay themselves
// instead of becoming six-byte \u escapes, so an output's size is what the tool wrote
// (json.Marshal would turn 200,000 '<' into 1.2 MB). Every output and event body toolfleet
// writes goes through it.
func MarshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
