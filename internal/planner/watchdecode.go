package planner

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/toolfleet/toolfleet/internal/jsonscan"
	"github.com/toolfleet/toolfleet/internal/provider"
)

// decodeWatched reads what the watch of the runs bucket needs of a run's value: every
// replica decodes every change of every run (watchRuns), so this is the planner's one
// decode whose cost grows with its replicas. It walks the value once, skipping the
// members it does not need (limits, tool sets, the loop window) without building them,
// and reads the ones it does by hand: encoding/json's reflection took about 10% of a
// 4-replica fleet's CPU here (BenchmarkConcurrentRuns, pprof), and this takes a third
// of its time (BenchmarkDecodeWatched: 3.0-3.2 µs against 9.2-9.6 µs for a finished
// run's value of 1 KB). It is written by hand on internal/jsonscan's scanner, which
// the MCP edge already trusts with hostile input, rather than with a faster JSON
// library: the watch reads about 30 fields, and a second decoder of the whole Run would be
// one more dependency to keep in step with its encoding. What it builds is what
// json.Unmarshal builds (TestDecodeWatchedAgreesWithEncodingJSON); a value it cannot
// read that way (an escaped key, a value of an unexpected type) is left to
// json.Unmarshal, which says what is wrong with it.
func decodeWatched(b []byte) (*watchedRun, error) {
	var w watchedRun
	if !w.scan(b) {
		w = watchedRun{}
		if err := json.Unmarshal(b, &w); err != nil {
			return nil, err
		}
	}
	return &w, nil
}

// scan fills w from the JSON object b; false when b is not read exactly.
func (w *watchedRun) scan(b []byte) bool {
	return scanObject(b, func(key, v []byte) bool {
		switch string(key) {
		case "id":
			return scanString(v, &w.ID)
		case "parentId":
			return scanString(v, &w.ParentID)
		case "depth":
			return scanInt(v, &w.Depth)
		case "status":
			return scanString(v, (*string)(&w.Status))
		case "termination":
			return scanString(v, (*string)(&w.Termination))
		case "detail":
			return scanString(v, &w.Detail)
		case "model":
			return scanString(v, &w.Model)
		case "tenant":
			return scanString(v, &w.Tenant)
		case "role":
			return scanString(v, &w.Role)
		case "step":
			return scanInt(v, &w.Step)
		case "recorded":
			return scanInt(v, &w.Recorded)
		case "calls":
			return scanCalls(v, &w.Calls)
		case "usage":
			return string(v) == "null" || scanObject(v, func(key, v []byte) bool {
				switch string(key) {
				case "inputTokens":
					return scanInt(v, &w.Usage.InputTokens)
				case "outputTokens":
					return scanInt(v, &w.Usage.OutputTokens)
				}
				return !foldsTo(key, usageKeys)
			})
		case "cost":
			return scanFloat(v, &w.Cost)
		case "createdAt":
			return scanTime(v, &w.CreatedAt)
		case "finishedAt":
			return scanTimePtr(v, &w.FinishedAt)
		case "deadline":
			return scanTime(v, &w.Deadline)
		case "lease":
			return json.Unmarshal(v, &w.Lease) == nil
		case "turn":
			return scanInt(v, &w.Turn)
		case "inputPreview":
			return scanString(v, &w.InputPreview)
		case "callCount":
			return scanInt(v, &w.CallCount)
		case "called":
			return scanStrings(v, &w.Called)
		case "toolErrors":
			return scanInt(v, &w.ToolErrors)
		case "denials":
			return scanInt(v, &w.Denials)
		case "settled":
			return scanCalls(v, &w.Settled)
		case "pausedMs":
			return scanInt64(v, &w.PausedMS)
		case "paused":
			return json.Unmarshal(v, &w.Paused) == nil
		case "canceled":
			return json.Unmarshal(v, &w.Canceled) == nil
		case "metadata":
			return json.Unmarshal(v, &w.Metadata) == nil
		case "forkedFrom": // forks only
			return json.Unmarshal(v, &w.ForkedFrom) == nil
		}
		return !foldsTo(key, watchedRunKeys)
	})
}

// The keys the decoders read, in lower case, taken from the json tags of the types they
// fill (the tags json.Unmarshal, the fallback, reads by): encoding/json matches a key to
// a field whatever its case, which the decoders leave to it (foldsTo).
var (
	watchedRunKeys  = foldedKeys[watchedRun]()
	watchedCallKeys = foldedKeys[watchedCall]()
	usageKeys       = foldedKeys[provider.Usage]()
)

func foldedKeys[T any]() map[string]bool {
	m := map[string]bool{}
	t := reflect.TypeFor[T]()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		m[strings.ToLower(name)] = true
	}
	return m
}

// foldsTo reports whether key, not one of the decoder's exact keys, may be one of keys
// to encoding/json: the same letters in another case, or any key beyond ASCII (whose
// folding is encoding/json's to judge).
func foldsTo(key []byte, keys map[string]bool) bool {
	var buf [32]byte
	if len(key) > len(buf) {
		return false // longer than any spelling of a key read (at most 17 bytes)
	}
	lower := buf[:len(key)]
	for i, c := range key {
		switch {
		case c >= utf8.RuneSelf:
			return true
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		}
		lower[i] = c
	}
	return keys[string(lower)]
}

func scanCalls(v []byte, calls *[]watchedCall) bool {
	return scanArray(v, calls, func(elem []byte) (c watchedCall, ok bool) { return c, c.scan(elem) })
}

func scanStrings(v []byte, strs *[]string) bool {
	return scanArray(v, strs, func(elem []byte) (s string, ok bool) { return s, scanString(elem, &s) })
}

// scanArray reads the JSON array v (or null, which makes dst nil, as encoding/json
// does) into dst, an element at a time with elem; false when v is not read exactly.
func scanArray[T any](v []byte, dst *[]T, elem func([]byte) (T, bool)) bool {
	if string(v) == "null" {
		*dst = nil
		return true
	}
	if len(v) == 0 || v[0] != '[' {
		return false
	}
	s := jsonscan.NewScanner(v[1:])
	s.SkipSpace()
	out := []T{}
	if s.Accept(']') {
		*dst = out
		return true
	}
	for {
		text, err := s.Skip()
		if err != nil {
			return false
		}
		e, ok := elem(text)
		if !ok {
			return false
		}
		out = append(out, e)
		closed, err := s.Next(']')
		if err != nil {
			return false
		}
		if closed {
			*dst = out
			return true
		}
	}
}

func (c *watchedCall) scan(b []byte) bool {
	return scanObject(b, func(key, v []byte) bool {
		switch string(key) {
		case "id":
			return scanString(v, &c.ID)
		case "name":
			return scanString(v, &c.Name)
		case "status":
			return scanString(v, &c.Status)
		case "approval":
			return json.Unmarshal(v, &c.Approval) == nil
		case "calledAt":
			return scanTime(v, &c.CalledAt)
		case "finishedAt":
			return scanTimePtr(v, &c.FinishedAt)
		case "subs":
			return scanCalls(v, &c.Subs)
		case "approvalExpiresAt":
			return scanTimePtr(v, &c.ApprovalExpiresAt)
		}
		return !foldsTo(key, watchedCallKeys)
	})
}

// scanObject calls member with each key and value of the JSON object b, in order; false
// when b is not an object, a key is escaped, or member returns false.
func scanObject(b []byte, member func(key, value []byte) bool) bool {
	s := jsonscan.NewScanner(b)
	s.SkipSpace()
	if !s.Accept('{') {
		return false
	}
	s.SkipSpace()
	if s.Accept('}') {
		s.SkipSpace()
		return s.Pos() == len(b)
	}
	for {
		key, ok := s.PlainString()
		if !ok || s.Colon() != nil {
			return false
		}
		v, err := s.Skip()
		if err != nil || !member(key, v) {
			return false
		}
		closed, err := s.Next('}')
		if err != nil {
			return false
		}
		if closed {
			s.SkipSpace()
			return s.Pos() == len(b)
		}
	}
}

// scanString reads a string without escapes (or null, which leaves dst alone as
// encoding/json does); anything else is left to json.Unmarshal.
func scanString(v []byte, dst *string) bool {
	if string(v) == "null" {
		return true
	}
	if len(v) < 2 || v[0] != '"' || bytes.IndexByte(v, '\\') >= 0 || !utf8.Valid(v) {
		return json.Unmarshal(v, dst) == nil
	}
	*dst = string(v[1 : len(v)-1])
	return true
}

func scanInt(v []byte, dst *int) bool {
	if string(v) == "null" {
		return true
	}
	n, err := strconv.Atoi(string(v))
	if err != nil {
		return json.Unmarshal(v, dst) == nil
	}
	*dst = n
	return true
}

func scanInt64(v []byte, dst *int64) bool {
	if string(v) == "null" {
		return true
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return json.Unmarshal(v, dst) == nil
	}
	*dst = n
	return true
}

func scanFloat(v []byte, dst *float64) bool {
	if string(v) == "null" {
		return true
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil {
		return false
	}
	*dst = f
	return true
}

func scanTime(v []byte, dst *time.Time) bool {
	return dst.UnmarshalJSON(v) == nil
}

func scanTimePtr(v []byte, dst **time.Time) bool {
	if string(v) == "null" {
		*dst = nil
		return true
	}
	t := new(time.Time)
	if t.UnmarshalJSON(v) != nil {
		return false
	}
	*dst = t
	return true
}
