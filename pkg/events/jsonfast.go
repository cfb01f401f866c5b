package events

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/toolfleet/toolfleet/internal/jsonscan"
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
	if c.Context != nil { // rare (a tool that asked for its run): no fast path
		b = append(b, `,"context":`...)
		if b, err = appendMarshaled(b, c.Context); err != nil {
			return nil, err
		}
	}
	if c.ContextRef != nil {
		b = append(b, `,"context_ref":`...)
		b = appendPayloadRef(b, c.ContextRef)
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
	s := jsonscan.NewScanner(raw)
	if _, err := s.Skip(); err == nil && s.Pos() == len(raw) && !s.Spaced() {
		return append(b, raw...), nil
	}
	buf := bytes.NewBuffer(b)
	if err := json.Compact(buf, raw); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
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
	s := jsonscan.NewScanner(data)
	s.SkipSpace()
	if !s.Accept('{') {
		return false
	}
	s.SkipSpace()
	if !s.Accept('}') && !callMembers(&s, &d) {
		return false
	}
	s.SkipSpace()
	if s.Pos() != len(data) {
		return false
	}
	*c = d
	return true
}

// callMembers reads the members of a call object up to its closing brace.
func callMembers(s *jsonscan.Scanner, c *Call) bool {
	var seen uint8
	for {
		key, ok := s.PlainString()
		if !ok || s.Colon() != nil {
			return false
		}
		var member uint8
		switch string(key) {
		case "tool":
			member = 1
			v, ok := s.PlainString()
			if !ok {
				return false
			}
			if string(v) != c.Tool { // c.Tool is the subject's tool, which a valid call repeats
				c.Tool = string(v)
			}
		case "arguments":
			member = 2
			v, err := s.Skip()
			if err != nil {
				return false
			}
			c.Arguments = bytes.Clone(v) // a copy, as json.RawMessage keeps
		case "arguments_ref":
			member = 4
			if s.Literal("null") != nil {
				return false
			}
			c.ArgumentsRef = nil
		case "metadata":
			member = 8
			if !metadata(s, c) {
				return false
			}
		default:
			return false
		}
		if seen&member != 0 { // a repeated member: encoding/json's merging rules apply
			return false
		}
		seen |= member
		if closed, err := s.Next('}'); err != nil || closed {
			return err == nil
		}
	}
}

// metadata reads null (no metadata) or an object of plain strings (a new map, empty
// for {}; a repeated key keeps its last value).
func metadata(s *jsonscan.Scanner, c *Call) bool {
	if s.Peek() == 'n' {
		c.Metadata = nil
		return s.Literal("null") == nil
	}
	if !s.Accept('{') {
		return false
	}
	s.SkipSpace()
	c.Metadata = map[string]string{}
	if s.Accept('}') {
		return true
	}
	for {
		k, ok := s.PlainString()
		if !ok || s.Colon() != nil {
			return false
		}
		v, ok := s.PlainString()
		if !ok {
			return false
		}
		c.Metadata[string(k)] = string(v)
		if closed, err := s.Next('}'); err != nil || closed {
			return err == nil
		}
	}
}
