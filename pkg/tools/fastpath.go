package tools

import (
	"encoding/json"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/toolfleet/toolfleet/internal/jsonscan"
)

// fastSchema is an accelerator for the valid case. Most tool schemas use a handful of
// keywords (type, properties, required, additionalProperties, items, enum, bounds,
// lengths, pattern); for those, a direct walk decides "valid" several times faster than
// the general validator, which builds scopes and turns every number into a big.Rat.
//
// It never has the last word on a failure: when it answers false ("invalid, or not sure")
// the compiled jsonschema validator runs and decides, and produces every violation
// message. So the fast path may only ever say true when the validator would: it covers
// just the keywords listed in compileFast, answers "not sure" on any number it cannot
// compare exactly, and is checked against the validator by the tests (BFCL calls and
// their mutations, and a fuzz test).
type fastSchema struct {
	types      uint8 // bit set of fastType*; 0 means any
	props      map[string]*fastSchema
	required   []string
	addlFalse  bool
	addl       *fastSchema
	items      *fastSchema
	enum       []any
	hasConst   bool
	constVal   any
	min, max   *float64
	xmin, xmax *float64
	minLen     int
	maxLen     int // -1: none
	minItems   int
	maxItems   int // -1: none
	pattern    *regexp.Regexp
}

const (
	fastNull uint8 = 1 << iota
	fastBool
	fastInteger
	fastNumber
	fastString
	fastArray
	fastObject
)

var fastTypeNames = map[string]uint8{"null": fastNull, "boolean": fastBool, "integer": fastInteger,
	"number": fastNumber, "string": fastString, "array": fastArray, "object": fastObject}

// Keywords that only annotate, under drafts 2019-09 and 2020-12 (format is an annotation
// there unless format assertion is switched on, which it is not).
var fastAnnotations = map[string]bool{"description": true, "title": true, "default": true,
	"examples": true, "$comment": true, "deprecated": true, "readOnly": true, "writeOnly": true,
	"format": true, "$schema": true}

// compileFast builds the fast path for a schema document, or returns nil when the schema
// uses anything it does not cover (then every call goes to the general validator).
func compileFast(doc []byte) *fastSchema {
	v, err := jsonscan.Parse(doc)
	if err != nil {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	if s, ok := m["$schema"].(string); ok {
		s = strings.TrimSuffix(s, "#")
		if s != "https://json-schema.org/draft/2020-12/schema" && s != "https://json-schema.org/draft/2019-09/schema" {
			return nil // older drafts assert format and differ in details: leave them to the validator
		}
	}
	return fastNode(m)
}

func fastNode(v any) *fastSchema {
	m, ok := v.(map[string]any)
	if !ok {
		return nil // boolean schemas are rare; not worth covering
	}
	s := &fastSchema{maxLen: -1, maxItems: -1}
	for k, x := range m {
		switch k {
		case "type":
			switch t := x.(type) {
			case string:
				bit, ok := fastTypeNames[t]
				if !ok {
					return nil
				}
				s.types |= bit
			case []any:
				for _, e := range t {
					name, _ := e.(string)
					bit, ok := fastTypeNames[name]
					if !ok {
						return nil
					}
					s.types |= bit
				}
			default:
				return nil
			}
		case "properties":
			props, ok := x.(map[string]any)
			if !ok {
				return nil
			}
			s.props = make(map[string]*fastSchema, len(props))
			for name, p := range props {
				if s.props[name] = fastNode(p); s.props[name] == nil {
					return nil
				}
			}
		case "required":
			req, ok := x.([]any)
			if !ok {
				return nil
			}
			for _, r := range req {
				name, ok := r.(string)
				if !ok {
					return nil
				}
				s.required = append(s.required, name)
			}
		case "additionalProperties":
			switch a := x.(type) {
			case bool:
				s.addlFalse = !a
			default:
				if s.addl = fastNode(a); s.addl == nil {
					return nil
				}
			}
		case "items":
			if s.items = fastNode(x); s.items == nil {
				return nil
			}
		case "enum":
			vals, ok := x.([]any)
			if !ok {
				return nil
			}
			for _, e := range vals {
				switch e.(type) {
				case string, bool, nil, json.Number:
				default:
					return nil
				}
			}
			s.enum = vals
		case "const":
			switch x.(type) {
			case string, bool, nil, json.Number:
			default:
				return nil
			}
			s.hasConst, s.constVal = true, x
		case "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum":
			n, ok := x.(json.Number)
			if !ok {
				return nil
			}
			f, err := strconv.ParseFloat(string(n), 64)
			if err != nil || math.IsInf(f, 0) {
				return nil
			}
			switch k {
			case "minimum":
				s.min = &f
			case "maximum":
				s.max = &f
			case "exclusiveMinimum":
				s.xmin = &f
			default:
				s.xmax = &f
			}
		case "minLength", "maxLength", "minItems", "maxItems":
			n, ok := x.(json.Number)
			if !ok {
				return nil
			}
			i, err := strconv.Atoi(string(n))
			if err != nil || i < 0 {
				return nil
			}
			switch k {
			case "minLength":
				s.minLen = i
			case "maxLength":
				s.maxLen = i
			case "minItems":
				s.minItems = i
			default:
				s.maxItems = i
			}
		case "pattern":
			p, ok := x.(string)
			if !ok {
				return nil
			}
			re, err := regexp.Compile(p) // the validator's default engine, so the same answers
			if err != nil {
				return nil
			}
			s.pattern = re
		default:
			if !fastAnnotations[k] {
				return nil
			}
		}
	}
	return s
}

// valid reports true only if v certainly satisfies s.
func (s *fastSchema) valid(v any) bool {
	switch x := v.(type) {
	case nil:
		if !s.typeOK(fastNull) {
			return false
		}
	case bool:
		if !s.typeOK(fastBool) {
			return false
		}
	case string:
		if !s.typeOK(fastString) {
			return false
		}
		if s.minLen > 0 || s.maxLen >= 0 {
			n := utf8.RuneCountInString(x)
			if n < s.minLen || (s.maxLen >= 0 && n > s.maxLen) {
				return false
			}
		}
		if s.pattern != nil && !s.pattern.MatchString(x) {
			return false
		}
	case json.Number:
		if !s.numberOK(x) {
			return false
		}
	case []any:
		if !s.typeOK(fastArray) || len(x) < s.minItems || (s.maxItems >= 0 && len(x) > s.maxItems) {
			return false
		}
		if s.items != nil {
			for _, e := range x {
				if !s.items.valid(e) {
					return false
				}
			}
		}
	case map[string]any:
		if !s.typeOK(fastObject) {
			return false
		}
		for _, r := range s.required {
			if _, ok := x[r]; !ok {
				return false
			}
		}
		for k, e := range x {
			if p, ok := s.props[k]; ok {
				if !p.valid(e) {
					return false
				}
				continue
			}
			if s.addlFalse || (s.addl != nil && !s.addl.valid(e)) {
				return false
			}
		}
	default:
		return false
	}
	if s.hasConst && !scalarEqual(v, s.constVal) {
		return false
	}
	if s.enum != nil {
		for _, e := range s.enum {
			if scalarEqual(v, e) {
				return true
			}
		}
		return false
	}
	return true
}

func (s *fastSchema) typeOK(bit uint8) bool { return s.types == 0 || s.types&bit != 0 }

// numberOK checks a number's type and bounds, answering false when not sure: a literal
// with a fraction or exponent against "integer" (1.0 is an integer to JSON Schema), or a
// value whose float equals a bound (exact comparison is the validator's job).
func (s *fastSchema) numberOK(n json.Number) bool {
	integral := !strings.ContainsAny(string(n), ".eE")
	if s.types != 0 && s.types&fastNumber == 0 && !(integral && s.types&fastInteger != 0) {
		return false
	}
	if s.min == nil && s.max == nil && s.xmin == nil && s.xmax == nil {
		return true
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || math.IsInf(f, 0) {
		return false
	}
	return (s.min == nil || f > *s.min) && (s.max == nil || f < *s.max) &&
		(s.xmin == nil || f > *s.xmin) && (s.xmax == nil || f < *s.xmax)
}

// scalarEqual compares scalars as JSON Schema does, but numbers only by their literal
// (1 and 1.0 are equal to JSON Schema; here they are "not sure", and the validator decides).
func scalarEqual(a, b any) bool {
	switch x := a.(type) {
	case string:
		y, ok := b.(string)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case nil:
		return b == nil
	case json.Number:
		y, ok := b.(json.Number)
		return ok && x == y
	}
	return false
}
