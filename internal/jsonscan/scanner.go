package jsonscan

import (
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// Parse reads exactly one JSON value from b, with optional whitespace around it, into
// the generic form: map[string]any, []any, string, json.Number, bool or nil. It builds
// what encoding/json builds with UseNumber (invalid UTF-8 in strings becomes U+FFFD,
// duplicate keys keep the last value) at about half the cost of its reflection.
func Parse(b []byte) (any, error) {
	s := Scanner{b: b}
	s.SkipSpace()
	v, err := s.value(0, true)
	if err != nil {
		return nil, err
	}
	s.SkipSpace()
	if s.i < len(s.b) {
		return nil, s.errorf("unexpected %s after the top-level value", s.describe())
	}
	return v, nil
}

// SyntaxError is JSON that cannot be read, with where the reading stopped.
type SyntaxError struct {
	Msg    string
	Offset int // bytes from the start of the text
	Line   int // from 1
	Column int // from 1, in bytes
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("%s at offset %d (line %d, column %d)", e.Msg, e.Offset, e.Line, e.Column)
}

// Scanner reads JSON text from a cursor, a token or a value at a time. The zero value
// reads nothing; make one with [NewScanner].
type Scanner struct {
	b      []byte
	i      int
	spaced bool
}

// NewScanner returns a Scanner at the start of b.
func NewScanner(b []byte) Scanner { return Scanner{b: b} }

// Pos is the cursor: the offset of the next byte to read.
func (s *Scanner) Pos() int { return s.i }

// Spaced reports whether the scanner has skipped any whitespace so far: a text that
// was read whole without any is compact, as encoding/json writes it.
func (s *Scanner) Spaced() bool { return s.spaced }

// SkipSpace moves the cursor past whitespace.
func (s *Scanner) SkipSpace() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
			s.spaced = true
		default:
			return
		}
	}
}

// Accept moves past c when it is the byte at the cursor, and reports whether it was.
func (s *Scanner) Accept(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// Peek returns the byte at the cursor, or 0 at the end (which no JSON token starts with).
func (s *Scanner) Peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// Skip reads one value at the cursor (no whitespace before it) and checks it, building
// nothing and allocating nothing unless it fails. It returns the value's text, a part
// of the scanner's.
func (s *Scanner) Skip() ([]byte, error) {
	start := s.i
	if _, err := s.value(0, false); err != nil {
		return nil, err
	}
	return s.b[start:s.i], nil
}

// Colon reads the colon after an object's key, and the whitespace around it.
func (s *Scanner) Colon() error {
	s.SkipSpace()
	if s.i >= len(s.b) || s.b[s.i] != ':' {
		return s.errorf("unexpected %s after object key, want ':'", s.describe())
	}
	s.i++
	s.SkipSpace()
	return nil
}

// Next reads what follows an object's member or an array's element: a comma and the
// whitespace after it (closed is false), or closing, '}' or ']' (closed is true).
func (s *Scanner) Next(closing byte) (closed bool, err error) {
	s.SkipSpace()
	if s.i < len(s.b) {
		switch s.b[s.i] {
		case ',':
			s.i++
			s.SkipSpace()
			return false, nil
		case closing:
			s.i++
			return true, nil
		}
	}
	in := "object"
	if closing == ']' {
		in = "array"
	}
	if s.i >= len(s.b) {
		return false, s.errorf("unexpected end of input in %s, want ',' or '%c'", in, closing)
	}
	return false, s.errorf("unexpected %s in %s, want ',' or '%c'", s.describe(), in, closing)
}

// PlainString reads a string that decodes to its own bytes (no escape, valid UTF-8)
// and returns them; anything else, a string or not, is left unread and reported false.
func (s *Scanner) PlainString() ([]byte, bool) {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, false
	}
	start := s.i + 1
	ascii := true
	for i := start; i < len(s.b); i++ {
		switch c := s.b[i]; {
		case c == '"':
			v := s.b[start:i]
			if !ascii && !utf8.Valid(v) {
				return nil, false
			}
			s.i = i + 1
			return v, true
		case c < 0x20 || c == '\\':
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false
}

// Literal reads word (true, false or null).
func (s *Scanner) Literal(word string) error {
	if len(s.b)-s.i >= len(word) && string(s.b[s.i:s.i+len(word)]) == word {
		s.i += len(word)
		return nil
	}
	// Point at the first byte that differs.
	for k := 0; k < len(word); k++ {
		if s.i >= len(s.b) || s.b[s.i] != word[k] {
			return s.errorf("unexpected %s in literal %s", s.describe(), word)
		}
		s.i++
	}
	return nil
}

// value reads one value at the cursor at nesting depth, and builds it when build is
// set: the one walk of the grammar that both Parse and Skip take.
func (s *Scanner) value(depth int, build bool) (any, error) {
	if s.i >= len(s.b) {
		return nil, s.errorf("unexpected end of input, want a value")
	}
	switch c := s.b[s.i]; {
	case c == '{':
		return s.object(depth+1, build)
	case c == '[':
		return s.array(depth+1, build)
	case c == '"':
		str, err := s.str(build)
		if !build || err != nil {
			return nil, err
		}
		return str, nil
	case c == '-' || (c >= '0' && c <= '9'):
		start := s.i
		if err := s.number(); !build || err != nil {
			return nil, err
		}
		// The text, not a float64: no precision is lost before a schema sees it.
		return json.Number(s.b[start:s.i]), nil
	case c == 't':
		return true, s.Literal("true")
	case c == 'f':
		return false, s.Literal("false")
	case c == 'n':
		return nil, s.Literal("null")
	default:
		return nil, s.errorf("unexpected %s, want a value", s.describe())
	}
}

func (s *Scanner) object(depth int, build bool) (any, error) {
	if depth > MaxDepth {
		return nil, s.errorf("nested too deeply: more than %d levels", MaxDepth)
	}
	s.i++ // {
	var m map[string]any
	if build {
		m = make(map[string]any)
	}
	s.SkipSpace()
	if s.Accept('}') {
		return m, nil
	}
	for {
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return nil, s.errorf("unexpected %s, want a string key", s.describe())
		}
		k, err := s.str(build)
		if err != nil {
			return nil, err
		}
		if err := s.Colon(); err != nil {
			return nil, err
		}
		v, err := s.value(depth, build)
		if err != nil {
			return nil, err
		}
		if build {
			m[k] = v
		}
		if closed, err := s.Next('}'); err != nil || closed {
			if err != nil {
				return nil, err
			}
			return m, nil
		}
	}
}

func (s *Scanner) array(depth int, build bool) (any, error) {
	if depth > MaxDepth {
		return nil, s.errorf("nested too deeply: more than %d levels", MaxDepth)
	}
	s.i++ // [
	var a []any
	if build {
		a = make([]any, 0, 4)
	}
	s.SkipSpace()
	if s.Accept(']') {
		return a, nil
	}
	for {
		v, err := s.value(depth, build)
		if err != nil {
			return nil, err
		}
		if build {
			a = append(a, v)
		}
		if closed, err := s.Next(']'); err != nil || closed {
			if err != nil {
				return nil, err
			}
			return a, nil
		}
	}
}

// str reads a string whose opening quote is at the cursor, and decodes it when build is
// set. The common case, no escapes and valid UTF-8, costs one scan (and, built, one
// allocation).
func (s *Scanner) str(build bool) (string, error) {
	s.i++ // "
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			if !build {
				return "", nil
			}
			return string(s.b[start : s.i-1]), nil
		case c == '\\' || c >= utf8.RuneSelf:
			return s.slowStr(start, build)
		case c < 0x20:
			return "", s.errorf("control character %s in string", s.describe())
		}
		s.i++
	}
	return "", s.errorf("unexpected end of input in string")
}

// slowStr finishes a string with escapes or non-ASCII bytes, decoding as encoding/json
// does when build is set. Unbuilt, bytes that are not UTF-8 pass, as they do in
// encoding/json's scanner.
func (s *Scanner) slowStr(start int, build bool) (string, error) {
	var out []byte
	if build {
		out = make([]byte, s.i-start, s.i-start+16)
		copy(out, s.b[start:s.i])
	}
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return string(out), nil
		case c < 0x20:
			return "", s.errorf("control character %s in string", s.describe())
		case c == '\\':
			r, err := s.escape()
			if err != nil {
				return "", err
			}
			if build {
				out = utf8.AppendRune(out, r)
			}
		case c < utf8.RuneSelf || !build:
			if build {
				out = append(out, c)
			}
			s.i++
		default:
			r, size := utf8.DecodeRune(s.b[s.i:])
			if r == utf8.RuneError && size == 1 {
				out = utf8.AppendRune(out, utf8.RuneError)
			} else {
				out = append(out, s.b[s.i:s.i+size]...)
			}
			s.i += size
		}
	}
	return "", s.errorf("unexpected end of input in string")
}

// escape reads the escape sequence at the cursor (its backslash) and returns the rune
// it stands for: a UTF-16 surrogate pair written as two \u escapes is one rune, a lone
// surrogate is U+FFFD.
func (s *Scanner) escape() (rune, error) {
	if s.i+1 >= len(s.b) {
		s.i++
		return 0, s.errorf("unexpected end of input in string escape")
	}
	var r rune
	switch e := s.b[s.i+1]; e {
	case '"', '\\', '/':
		r = rune(e)
	case 'b':
		r = '\b'
	case 'f':
		r = '\f'
	case 'n':
		r = '\n'
	case 'r':
		r = '\r'
	case 't':
		r = '\t'
	case 'u':
		u, ok := s.hex4(s.i + 2)
		if !ok {
			s.i += 2
			return 0, s.errorf("invalid \\u escape in string")
		}
		s.i += 6
		if utf16.IsSurrogate(u) {
			u2, ok2 := rune(-1), false
			if s.i+1 < len(s.b) && s.b[s.i] == '\\' && s.b[s.i+1] == 'u' {
				u2, ok2 = s.hex4(s.i + 2)
			}
			if dec := utf16.DecodeRune(u, u2); ok2 && dec != utf8.RuneError {
				s.i += 6
				u = dec
			} else {
				u = utf8.RuneError
			}
		}
		return u, nil
	default:
		s.i++
		return 0, s.errorf("invalid escape %s in string", s.describe())
	}
	s.i += 2
	return r, nil
}

func (s *Scanner) hex4(at int) (rune, bool) {
	if at+4 > len(s.b) {
		return 0, false
	}
	var r rune
	for _, c := range s.b[at : at+4] {
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

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *Scanner) number() error {
	s.Accept('-')
	switch {
	case s.i < len(s.b) && s.b[s.i] == '0':
		s.i++
	case s.i < len(s.b) && s.b[s.i] >= '1' && s.b[s.i] <= '9':
		s.digits()
	default:
		return s.errorf("unexpected %s in number, want a digit", s.describe())
	}
	if s.Accept('.') && s.digits() == 0 {
		return s.errorf("unexpected %s after decimal point, want a digit", s.describe())
	}
	if s.Accept('e') || s.Accept('E') {
		if !s.Accept('+') {
			s.Accept('-')
		}
		if s.digits() == 0 {
			return s.errorf("unexpected %s in exponent, want a digit", s.describe())
		}
	}
	return nil
}

func (s *Scanner) digits() int {
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i - start
}

func (s *Scanner) errorf(format string, args ...any) error {
	line, col := 1, 1
	for _, c := range s.b[:min(s.i, len(s.b))] {
		if c == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return &SyntaxError{Msg: fmt.Sprintf(format, args...), Offset: s.i, Line: line, Column: col}
}

// describe names the byte at the cursor for an error message.
func (s *Scanner) describe() string {
	if s.i >= len(s.b) {
		return "end of input"
	}
	c := s.b[s.i]
	if c < 0x20 || c >= 0x7f {
		return fmt.Sprintf("byte 0x%02x", c)
	}
	return strconv.QuoteRune(rune(c))
}
