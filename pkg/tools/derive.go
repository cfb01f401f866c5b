package tools

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// SchemaFor derives a JSON Schema (draft 2020-12) for the arguments struct T, for typed
// tools whose Definition leaves Parameters empty. Each exported field is a property named
// by its json tag; a field is required unless its json tag says omitempty or omitzero, or
// it is a pointer; the jsonschema tag adds, comma-separated:
//
//   - required: the field is required even with omitempty;
//   - optional: the field is not required;
//   - enum=a|b|c: the allowed values (strings, or numbers for numeric fields);
//   - description=text: the description; it must come last, as it may contain commas.
//
// Strings, booleans, integers, floats, slices, string-keyed maps, pointers, nested structs
// and any are supported. Every derived object has additionalProperties:false, so unknown
// arguments are refused. Types SchemaFor cannot describe are an error: give the definition
// explicit Parameters instead.
func SchemaFor[T any]() (json.RawMessage, error) {
	s, err := deriveSchema(reflect.TypeFor[T](), map[reflect.Type]bool{})
	if err != nil {
		return nil, err
	}
	if s["type"] != "object" {
		return nil, fmt.Errorf("%s is not a struct", reflect.TypeFor[T]())
	}
	return json.Marshal(s)
}

func deriveSchema(t reflect.Type, visiting map[reflect.Type]bool) (map[string]any, error) {
	switch t.Kind() {
	case reflect.Pointer:
		return deriveSchema(t.Elem(), visiting)
	case reflect.String:
		return map[string]any{"type": "string"}, nil
	case reflect.Bool:
		return map[string]any{"type": "boolean"}, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}, nil
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}, nil
	case reflect.Interface:
		return map[string]any{}, nil
	case reflect.Slice, reflect.Array:
		items, err := deriveSchema(t.Elem(), visiting)
		if err != nil {
			return nil, err
		}
		return map[string]any{"type": "array", "items": items}, nil
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return nil, fmt.Errorf("map key type %s: only string keys can be described", t.Key())
		}
		vals, err := deriveSchema(t.Elem(), visiting)
		if err != nil {
			return nil, err
		}
		return map[string]any{"type": "object", "additionalProperties": vals}, nil
	case reflect.Struct:
		if visiting[t] {
			return nil, fmt.Errorf("%s is recursive; give the tool explicit Parameters", t)
		}
		visiting[t] = true
		defer delete(visiting, t)
		return deriveStruct(t, visiting)
	default:
		return nil, fmt.Errorf("field type %s cannot be described as JSON Schema", t)
	}
}

func deriveStruct(t reflect.Type, visiting map[reflect.Type]bool) (map[string]any, error) {
	props := map[string]any{}
	required := []any{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		if f.Anonymous {
			return nil, fmt.Errorf("%s: embedded field %s cannot be described; give the tool explicit Parameters", t, f.Name)
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		s, err := deriveSchema(f.Type, visiting)
		if err != nil {
			return nil, fmt.Errorf("%s.%s: %w", t, f.Name, err)
		}
		req := !strings.Contains(","+opts+",", ",omitempty,") && !strings.Contains(","+opts+",", ",omitzero,") &&
			f.Type.Kind() != reflect.Pointer
		rest := f.Tag.Get("jsonschema")
		for rest != "" {
			var item string
			if strings.HasPrefix(rest, "description=") {
				item, rest = rest, ""
			} else {
				item, rest, _ = strings.Cut(rest, ",")
			}
			key, val, _ := strings.Cut(item, "=")
			switch key {
			case "required":
				req = true
			case "optional":
				req = false
			case "description":
				s["description"] = val
			case "enum":
				var enum []any
				for _, e := range strings.Split(val, "|") {
					if s["type"] == "integer" || s["type"] == "number" {
						enum = append(enum, json.Number(e))
					} else {
						enum = append(enum, e)
					}
				}
				s["enum"] = enum
			default:
				return nil, fmt.Errorf("%s.%s: unknown jsonschema tag option %q", t, f.Name, key)
			}
		}
		props[name] = s
		if req {
			required = append(required, name)
		}
	}
	return map[string]any{"type": "object", "properties": props, "required": required, "additionalProperties": false}, nil
}
