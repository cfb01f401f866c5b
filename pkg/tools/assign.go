package tools

import (
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// decodeFunc stores a parsed JSON value (from jsonscan.Parse) into dst.
type decodeFunc func(dst reflect.Value, v any) error

// decoderFor builds, once per typed tool, a decoder that fills a value of type t straight
// from the parsed and validated arguments, so a call's bytes are read only once. It covers
// the types tool arguments are made of (strings, numbers, booleans, slices, string-keyed
// maps, pointers, nested structs, any) with encoding/json's rules: json tags, exact then
// case-insensitive key match, unknown keys ignored, null leaves the zero value. For a type
// it does not cover (a custom UnmarshalJSON or UnmarshalText, embedded structs, the
// ",string" option, arrays, []byte, ...) it returns nil and the tool is decoded from the
// bytes with encoding/json instead, so the result is always what encoding/json would give.
func decoderFor(t reflect.Type) decodeFunc {
	b := &decoderBuilder{seen: map[reflect.Type]*decodeFunc{}}
	d := b.build(t)
	if b.unsupported {
		return nil
	}
	return d
}

type decoderBuilder struct {
	seen        map[reflect.Type]*decodeFunc
	unsupported bool
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// build returns the decoder of t, one builder per kind; it sets b.unsupported (and
// returns nil) for a type encoding/json must decode instead.
func (b *decoderBuilder) build(t reflect.Type) decodeFunc {
	if p, ok := b.seen[t]; ok {
		// A recursive type: refer to the decoder being built through its slot.
		return func(dst reflect.Value, v any) error { return (*p)(dst, v) }
	}
	if t.Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(jsonUnmarshaler) ||
		t.Implements(textUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler) {
		b.unsupported = true
		return nil
	}
	slot := new(decodeFunc)
	b.seen[t] = slot
	var d decodeFunc
	switch t.Kind() {
	case reflect.String:
		d = decodeString
	case reflect.Bool:
		d = decodeBool
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		d = decodeInt
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		d = decodeUint
	case reflect.Float32, reflect.Float64:
		d = decodeFloat
	case reflect.Interface:
		if t.NumMethod() != 0 {
			b.unsupported = true
			return nil
		}
		d = decodeInterface
	case reflect.Pointer:
		d = pointerDecoder(b.build(t.Elem()))
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			b.unsupported = true // []byte travels as base64
			return nil
		}
		d = sliceDecoder(b.build(t.Elem()))
	case reflect.Map:
		if t.Key().Kind() != reflect.String || t.Key().Implements(textUnmarshaler) || reflect.PointerTo(t.Key()).Implements(textUnmarshaler) {
			b.unsupported = true
			return nil
		}
		d = mapDecoder(b.build(t.Elem()))
	case reflect.Struct:
		d = b.buildStruct(t)
	default:
		b.unsupported = true
		return nil
	}
	*slot = d
	return d
}

// The decoders of the scalar kinds. Each leaves dst as it is for null, as encoding/json
// does, and refuses a value of another JSON type.

func decodeString(dst reflect.Value, v any) error {
	switch s := v.(type) {
	case string:
		dst.SetString(s)
	case nil:
	default:
		return typeError(v, dst.Type())
	}
	return nil
}

func decodeBool(dst reflect.Value, v any) error {
	switch x := v.(type) {
	case bool:
		dst.SetBool(x)
	case nil:
	default:
		return typeError(v, dst.Type())
	}
	return nil
}

// decodeInt refuses a number that is not an integer or does not fit dst's size.
func decodeInt(dst reflect.Value, v any) error {
	switch n := v.(type) {
	case json.Number:
		i, err := strconv.ParseInt(string(n), 10, dst.Type().Bits())
		if err != nil {
			return fmt.Errorf("cannot use number %s as %s", n, dst.Type())
		}
		dst.SetInt(i)
	case nil:
	default:
		return typeError(v, dst.Type())
	}
	return nil
}

// decodeUint refuses a number that is negative, not an integer or does not fit dst's
// size.
func decodeUint(dst reflect.Value, v any) error {
	switch n := v.(type) {
	case json.Number:
		u, err := strconv.ParseUint(string(n), 10, dst.Type().Bits())
		if err != nil {
			return fmt.Errorf("cannot use number %s as %s", n, dst.Type())
		}
		dst.SetUint(u)
	case nil:
	default:
		return typeError(v, dst.Type())
	}
	return nil
}

// decodeFloat refuses a number out of dst's range.
func decodeFloat(dst reflect.Value, v any) error {
	switch n := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(n), dst.Type().Bits())
		if err != nil {
			return fmt.Errorf("cannot use number %s as %s", n, dst.Type())
		}
		dst.SetFloat(f)
	case nil:
	default:
		return typeError(v, dst.Type())
	}
	return nil
}

// decodeInterface stores what encoding/json gives an empty interface ([plainValue]).
func decodeInterface(dst reflect.Value, v any) error {
	if v != nil {
		p, err := plainValue(v)
		if err != nil {
			return err
		}
		dst.Set(reflect.ValueOf(p))
	}
	return nil
}

// The decoders of the composite kinds, around the decoder of their element. null makes
// a pointer, slice or map nil.

func pointerDecoder(elem decodeFunc) decodeFunc {
	return func(dst reflect.Value, v any) error {
		if v == nil {
			dst.SetZero()
			return nil
		}
		p := reflect.New(dst.Type().Elem())
		if err := elem(p.Elem(), v); err != nil {
			return err
		}
		dst.Set(p)
		return nil
	}
}

func sliceDecoder(elem decodeFunc) decodeFunc {
	return func(dst reflect.Value, v any) error {
		switch a := v.(type) {
		case []any:
			s := reflect.MakeSlice(dst.Type(), len(a), len(a))
			for i, x := range a {
				if err := elem(s.Index(i), x); err != nil {
					return fmt.Errorf("[%d]: %w", i, err)
				}
			}
			dst.Set(s)
		case nil:
			dst.SetZero()
		default:
			return typeError(v, dst.Type())
		}
		return nil
	}
}

// mapDecoder decodes into a map whose key is a string kind.
func mapDecoder(elem decodeFunc) decodeFunc {
	return func(dst reflect.Value, v any) error {
		switch m := v.(type) {
		case map[string]any:
			mv := reflect.MakeMapWithSize(dst.Type(), len(m))
			et, kt := dst.Type().Elem(), dst.Type().Key()
			for k, x := range m {
				ev := reflect.New(et).Elem()
				if err := elem(ev, x); err != nil {
					return fmt.Errorf("%q: %w", k, err)
				}
				mv.SetMapIndex(reflect.ValueOf(k).Convert(kt), ev)
			}
			dst.Set(mv)
		case nil:
			dst.SetZero()
		default:
			return typeError(v, dst.Type())
		}
		return nil
	}
}

type fieldDecoder struct {
	name   string
	index  int
	decode decodeFunc
}

func (b *decoderBuilder) buildStruct(t reflect.Type) decodeFunc {
	exact := map[string]*fieldDecoder{}
	var fields []*fieldDecoder
	for i := range t.NumField() {
		sf := t.Field(i)
		if sf.Anonymous {
			b.unsupported = true // embedded structs promote fields by rules not worth copying
			return nil
		}
		if !sf.IsExported() {
			continue
		}
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if strings.Contains(","+opts+",", ",string,") {
			b.unsupported = true
			return nil
		}
		if name == "" {
			name = sf.Name
		}
		f := &fieldDecoder{name: name, index: i, decode: b.build(sf.Type)}
		if _, dup := exact[name]; dup {
			b.unsupported = true // encoding/json drops both; not worth copying
			return nil
		}
		exact[name] = f
		fields = append(fields, f)
	}
	return func(dst reflect.Value, v any) error {
		switch m := v.(type) {
		case map[string]any:
			for k, x := range m {
				f := exact[k]
				if f == nil {
					for _, g := range fields {
						if strings.EqualFold(g.name, k) {
							f = g
							break
						}
					}
					if f == nil {
						continue // unknown keys are ignored, as by encoding/json
					}
					if ambiguous(m, f.name, k) {
						return errNeedsBytes
					}
				}
				if err := f.decode(dst.Field(f.index), x); err != nil {
					return fmt.Errorf("field %s: %w", f.name, err)
				}
			}
		case nil:
		default:
			return typeError(v, dst.Type())
		}
		return nil
	}
}

// errNeedsBytes says the parsed value cannot tell what encoding/json would do, and the
// bytes must be decoded instead: two keys differing only in case name one field, and
// encoding/json keeps the one that comes last in the document, an order a map forgets.
var errNeedsBytes = errors.New("decode from the bytes")

// ambiguous reports whether a key other than k also matches the field name.
func ambiguous(m map[string]any, name, k string) bool {
	for other := range m {
		if other != k && strings.EqualFold(other, name) {
			return true
		}
	}
	return false
}

// plainValue turns a parsed value into what encoding/json gives an `any`: numbers become
// float64, and one out of float64's range is an error, as there.
func plainValue(v any) (any, error) {
	switch x := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return nil, fmt.Errorf("cannot use number %s as float64", x)
		}
		return f, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			p, err := plainValue(e)
			if err != nil {
				return nil, err
			}
			out[i] = p
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			p, err := plainValue(e)
			if err != nil {
				return nil, err
			}
			out[k] = p
		}
		return out, nil
	default:
		return v, nil
	}
}

func typeError(v any, t reflect.Type) error {
	return fmt.Errorf("cannot use %s as %s", jsonKind(v), t)
}
