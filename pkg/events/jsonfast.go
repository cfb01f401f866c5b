package events

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// The hot path's JSON. Every call's data is decoded and every result's encoded once per
// call; through encoding/json's reflection they cost a fifth of an executor's CPU. So
// the shapes that matter — a result, a call — are written with append-style code and a
// call's data is read in one pass, each producing exactly what encoding/json (through
// [tools.MarshalJSON], without HTML escaping) produces. Anything they do not cover is
// handed to encoding/json: the fast paths only ever answer the plain case, and the
// tests compare both over many hostile inputs.

// marshalResult is tools.MarshalJSON(r), byte for byte.
func marshalResult(r *Result) ([]byte, error) {
	b, err := appendResult(make([]byte, 0, 512+len(r.Output)), r)
	if err != nil { // the reflection path says why, in its own words
		return tools.MarshalJSON(*r) // a copy: r itself would escape on every call
	}
	return b, nil
}

func appendResult(b []byte, r *Result) ([]byte, error) {
	var err error
	b = append(b, `{"status":`...)
	b = appendString(b, string(r.Status))
	if len(r.Output) > 0 {
		b = append(b, `,"output":`...)
		if b, err = appendCompact(b, r.Output); err != nil {
			return nil, err
		}
	}
	if r.OutputRef != nil {
		b = append(b, `,"output_ref":`...)
		b = appendPayloadRef(b, r.OutputRef)
	}
	if r.Error != nil {
		b = append(b, `,"error":`...)
		if b, err = appendError(b, r.Error); err != nil {
			return nil, err
		}
	}
	b = append(b, `,"duration_ms":`...)
	b = strconv.AppendInt(b, r.DurationMS, 10)
	b = append(b, `,"attempts":`...)
	b = strconv.AppendInt(b, int64(r.Attempts), 10)
	b = append(b, `,"executor":`...)
	b = appendString(b, r.Executor)
	b = append(b, `,"validated":`...)
	b = strconv.AppendBool(b, r.Validated)
	if r.NoSchemaMode != "" {
		b = append(b, `,"no_schema_mode":`...)
		b = appendString(b, string(r.NoSchemaMode))
	}
	if r.OutputUTF8Repaired {
		b = append(b, `,"output_utf8_repaired":true`...)
	}
	b = append(b, `,"tool":`...)
	b = appendString(b, r.Tool)
	b = append(b, `,"call_id":`...)
	b = appendString(b, r.CallID)
	b = append(b, `,"run_id":`...)
	b = appendString(b, r.RunID)
	if !r.Caller.IsZero() {
		b = append(b, `,"caller":{"tenant":`...)
		b = appendString(b, r.Caller.Tenant)
		b = append(b, `,"role":`...)
		b = appendString(b, r.Caller.Role)
		b = append(b, '}')
	}
	if !r.StartedAt.IsZero() {
		b = append(b, `,"started_at":`...)
		if b, err = appendTime(b, r.StartedAt); err != nil {
			return nil, err
		}
	}
	if !r.FinishedAt.IsZero() {
		b = append(b, `,"finished_at":`...)
		if b, err = appendTime(b, r.FinishedAt); err != nil {
			return nil, err
		}
	}
	if r.LimitWaitMS != 0 {
		b = append(b, `,"limit_wait_ms":`...)
		b = strconv.AppendInt(b, r.LimitWaitMS, 10)
	}
	if len(r.AttemptSpans) > 0 { // rare: only retried calls have them
		b = append(b, `,"attempt_spans":`...)
		if b, err = appendMarshaled(b, r.AttemptSpans); err != nil {
			return nil, err
		}
	}
	if r.Approval != nil { // rare: the reflection path writes it
		b = append(b, `,"approval":`...)
		if b, err = appendMarshaled(b, r.Approval); err != nil {
			return nil, err
		}
	}
	if r.Policy != nil { // rare too
		b = append(b, `,"policy":`...)
		if b, err = appendMarshaled(b, r.Policy); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// appendError writes a *tools.Error as encoding/json does (it has no MarshalJSON).
func appendError(b []byte, e *tools.Error) ([]byte, error) {
	b = append(b, `{"code":`...)
	b = appendString(b, string(e.Code))
	b = append(b, `,"message":`...)
	b = appendString(b, e.Message)
	if len(e.Violations) > 0 {
		b = append(b, `,"violations":`...)
		var err error
		if b, err = appendMarshaled(b, e.Violations); err != nil {
			return nil, err
		}
	}
	if e.RetryAfterMS != 0 {
		b = append(b, `,"retry_after_ms":`...)
		b = strconv.AppendInt(b, e.RetryAfterMS, 10)
	}
	return append(b, '}'), nil
}

func appendPayloadRef(b []byte, p *PayloadRef) []byte {
	b = append(b, `{"id":`...)
	b = appendString(b, p.ID)
	if p.Tenant != "" {
		b = append(b, `,"tenant":`...)
		b = appendString(b, p.Tenant)
	}
	b = append(b, `,"size":`...)
	b = strconv.AppendInt(b, p.Size, 10)
	b = append(b, `,"chunks":`...)
	b = strconv.AppendInt(b, int64(p.Chunks), 10)
	b = append(b, `,"sha256":`...)
	b = appendString(b, p.SHA256)
	return append(b, '}')
}

// marshalCall is tools.MarshalJSON(c), byte for byte.
func marshalCall(c *Call) ([]byte, error) {
	b, err := appendCall(make([]byte, 0, 64+len(c.Arguments)), c)
	if err != nil {
		return tools.MarshalJSON(*c)
	}
	return b, nil
}

func appendCall(b []byte, c *Call) ([]byte, error) {
	var err error
	b = append(b, `{"tool":`...)
	b = appendString(b, c.Tool)
	if len(c.Arguments) > 0 {
		b = append(b, `,"arguments":`...)
		if b, err = appendCompact(b, c.Arguments); err != nil {
			return nil, err
		}
	}
	if c.ArgumentsRef != nil {
		b = append(b, `,"arguments_ref":`...)
		b = appendPayloadRef(b, c.ArgumentsRef)
	}
	if len(c.Metadata) > 0 { // encoding/json sorts the keys
		b = append(b, `,"metadata":`...)
		if b, err = appendMarshaled(b, c.Metadata); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// marshalRunEvent is tools.MarshalJSON(r), byte for byte: a run sends about ten of
// these a step.
func marshalRunEvent(r *RunEvent) ([]byte, error) {
	b, err := appendRunEvent(make([]byte, 0, 160+len(r.Detail)), r)
	if err != nil {
		return tools.MarshalJSON(*r)
	}
	return b, nil
}

func appendRunEvent(b []byte, r *RunEvent) ([]byte, error) {
	var err error
	b = append(b, `{"run_id":`...)
	b = appendString(b, r.RunID)
	if r.Tenant != "" {
		b = append(b, `,"tenant":`...)
		b = appendString(b, r.Tenant)
	}
	b = append(b, `,"step":`...)
	b = strconv.AppendInt(b, int64(r.Step), 10)
	if r.Tool != "" {
		b = append(b, `,"tool":`...)
		b = appendString(b, r.Tool)
	}
	if r.CallID != "" {
		b = append(b, `,"call_id":`...)
		b = appendString(b, r.CallID)
	}
	if !r.At.IsZero() {
		b = append(b, `,"at":`...)
		if b, err = appendTime(b, r.At); err != nil {
			return nil, err
		}
	}
	if len(r.Detail) > 0 {
		b = append(b, `,"detail":`...)
		if b, err = appendCompact(b, r.Detail); err != nil {
			return nil, err
		}
	}
	if r.Executor != "" {
		b = append(b, `,"executor":`...)
		b = appendString(b, r.Executor)
	}
	if r.Attempt != 0 {
		b = append(b, `,"attempt":`...)
		b = strconv.AppendInt(b, int64(r.Attempt), 10)
	}
	if r.Seq != 0 {
		b = append(b, `,"seq":`...)
		b = strconv.AppendInt(b, int64(r.Seq), 10)
	}
	return append(b, '}'), nil
}

// appendMarshaled appends tools.MarshalJSON(v): a value is written the same alone as
// inside another.
func appendMarshaled(b []byte, v any) ([]byte, error) {
	m, err := tools.MarshalJSON(v)
	if err != nil {
		return nil, err
	}
	return append(b, m...), nil
}

// appendCompact appends a json.RawMessage as encoding/json writes it: checked and
// compacted. Most are compact already (what tools.MarshalJSON wrote) and are only
// checked; others go through json.Compact, which is that (without HTML escaping).
func appendCompact(b []byte, raw []byte) ([]byte, error) {
	if s := (jsonScan{b: raw}); s.value(0) && s.i == len(raw) && !s.spaced {
		return append(b, raw...), nil
	}
	buf := bytes.NewBuffer(b)
	if err := json.Compact(buf, raw); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// maxScanDepth bounds the nesting jsonScan reads; deeper values are left to
// encoding/json (whose own limit is 10,000).
const maxScanDepth = 1000

// jsonScan checks JSON text from b[i:] one value at a time, as strictly as encoding/json
// or more: it may refuse what encoding/json accepts (nesting beyond maxScanDepth), never
// the other way round. spaced records whitespace seen between tokens.
type jsonScan struct {
	b      []byte
	i      int
	spaced bool
}

func (s *jsonScan) space() {
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

// value reads one value starting at s.i (no whitespace before it).
func (s *jsonScan) value(depth int) bool {
	if s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; c {
	case '{':
		return depth < maxScanDepth && s.object(depth+1)
	case '[':
		return depth < maxScanDepth && s.array(depth+1)
	case '"':
		return s.str()
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	default:
		return s.number()
	}
}

func (s *jsonScan) object(depth int) bool {
	s.i++
	s.space()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return true
	}
	for {
		if s.i >= len(s.b) || s.b[s.i] != '"' || !s.str() || !s.colon() {
			return false
		}
		if !s.value(depth) {
			return false
		}
		if !s.next('}') {
			return false
		}
		if s.b[s.i-1] == '}' {
			return true
		}
	}
}

func (s *jsonScan) array(depth int) bool {
	s.i++
	s.space()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		return true
	}
	for {
		if !s.value(depth) || !s.next(']') {
			return false
		}
		if s.b[s.i-1] == ']' {
			return true
		}
	}
}

// next reads what follows a member or element: a comma (and the space after it) or
// the closing byte.
func (s *jsonScan) next(closing byte) bool {
	s.space()
	if s.i >= len(s.b) {
		return false
	}
	switch s.b[s.i] {
	case ',':
		s.i++
		s.space()
		return true
	case closing:
		s.i++
		return true
	}
	return false
}

// str reads a string; bytes that are not UTF-8 pass, as they do in encoding/json's
// scanner.
func (s *jsonScan) str() bool {
	s.i++
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return true
		case c < 0x20:
			return false
		case c == '\\':
			if s.i+1 >= len(s.b) {
				return false
			}
			switch s.b[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				if s.i+6 > len(s.b) {
					return false
				}
				for _, h := range s.b[s.i+2 : s.i+6] {
					if !isHex(h) {
						return false
					}
				}
				s.i += 6
			default:
				return false
			}
		default:
			s.i++
		}
	}
	return false
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

func (s *jsonScan) literal(word string) bool {
	if !bytes.HasPrefix(s.b[s.i:], []byte(word)) {
		return false
	}
	s.i += len(word)
	return true
}

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *jsonScan) number() bool {
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i >= len(s.b):
		return false
	case s.b[s.i] == '0':
		s.i++
	case '1' <= s.b[s.i] && s.b[s.i] <= '9':
		s.digits()
	default:
		return false
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if s.digits() == 0 {
			return false
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if s.digits() == 0 {
			return false
		}
	}
	return true
}

func (s *jsonScan) digits() int {
	start := s.i
	for s.i < len(s.b) && '0' <= s.b[s.i] && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i - start
}

// appendTime appends t as time.Time's MarshalJSON writes it.
func appendTime(b []byte, t time.Time) ([]byte, error) {
	b = append(b, '"')
	b, err := t.AppendText(b)
	if err != nil {
		return nil, err
	}
	return append(b, '"'), nil
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string the way encoding/json does without HTML
// escaping: '"', '\\' and control characters escaped (\b \f \n \r \t by name), invalid
// UTF-8 replaced by \ufffd, U+2028 and U+2029 escaped.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// decodeCallData reads a call's data into c as json.Unmarshal does, when the data is
// the plain case: an object whose members are each of tool (a string), arguments (any
// value), arguments_ref (null) and metadata (null or an object of strings) at most
// once, every key and string free of escapes. It reports false, leaving c as it was,
// for anything else — valid or not —, which encoding/json then decodes (or refuses)
// in its own words.
func decodeCallData(data []byte, c *Call) bool {
	d := *c
	s := jsonScan{b: data}
	s.space()
	if s.i >= len(data) || data[s.i] != '{' {
		return false
	}
	s.i++
	s.space()
	if s.i < len(data) && data[s.i] == '}' {
		s.i++
	} else if !s.callMembers(&d) {
		return false
	}
	s.space()
	if s.i != len(data) {
		return false
	}
	*c = d
	return true
}

// callMembers reads the members of a call object up to its closing brace.
func (s *jsonScan) callMembers(c *Call) bool {
	var seen uint8
	for {
		key, ok := s.plainString()
		if !ok || !s.colon() {
			return false
		}
		var member uint8
		switch string(key) {
		case "tool":
			member = 1
			v, ok := s.plainString()
			if !ok {
				return false
			}
			if string(v) != c.Tool { // c.Tool is the subject's tool, which a valid call repeats
				c.Tool = string(v)
			}
		case "arguments":
			member = 2
			start := s.i
			if !s.value(0) {
				return false
			}
			c.Arguments = bytes.Clone(s.b[start:s.i]) // a copy, as json.RawMessage keeps
		case "arguments_ref":
			member = 4
			if !s.literal("null") {
				return false
			}
			c.ArgumentsRef = nil
		case "metadata":
			member = 8
			if !s.metadata(c) {
				return false
			}
		default:
			return false
		}
		if seen&member != 0 { // a repeated member: encoding/json's merging rules apply
			return false
		}
		seen |= member
		if !s.next('}') {
			return false
		}
		if s.b[s.i-1] == '}' {
			return true
		}
	}
}

// metadata reads null (no metadata) or an object of plain strings (a new map, empty
// for {}; a repeated key keeps its last value).
func (s *jsonScan) metadata(c *Call) bool {
	if s.i < len(s.b) && s.b[s.i] == 'n' {
		c.Metadata = nil
		return s.literal("null")
	}
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return false
	}
	s.i++
	s.space()
	c.Metadata = map[string]string{}
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return true
	}
	for {
		k, ok := s.plainString()
		if !ok || !s.colon() {
			return false
		}
		v, ok := s.plainString()
		if !ok {
			return false
		}
		c.Metadata[string(k)] = string(v)
		if !s.next('}') {
			return false
		}
		if s.b[s.i-1] == '}' {
			return true
		}
	}
}

// colon reads the colon after a key and the space around it.
func (s *jsonScan) colon() bool {
	s.space()
	if s.i >= len(s.b) || s.b[s.i] != ':' {
		return false
	}
	s.i++
	s.space()
	return true
}

// plainString reads a string that decodes to its own bytes (no escape, valid UTF-8)
// and returns them.
func (s *jsonScan) plainString() ([]byte, bool) {
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
