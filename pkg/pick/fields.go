package pick

import (
	"encoding/json"
	"sort"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Field is one part of a tool definition that is indexed on its own, with its own
// weight and length normalisation.
type Field uint8

// The indexed fields of a definition.
const (
	// FieldName is the tool name, split at `_`, `-`, `.` and camelCase.
	FieldName Field = iota
	// FieldDescription is the tool description.
	FieldDescription
	// FieldTags holds the tags.
	FieldTags
	// FieldParamNames holds the property names found anywhere in the parameters schema.
	FieldParamNames
	// FieldParamText holds the descriptions, titles and string enum values of the
	// parameters schema and its properties.
	FieldParamText
	// FieldReturns holds the property names and descriptions of the response schema:
	// what the tool gives back is often what the request asks for.
	FieldReturns

	numFields = iota
)

var fieldNames = [numFields]string{"name", "description", "tags", "param_names", "param_text", "returns"}

// String returns the field's name as it appears in provenance.
func (f Field) String() string {
	if int(f) < len(fieldNames) {
		return fieldNames[f]
	}
	return "unknown"
}

// fieldTexts extracts the text of each field of d.
func fieldTexts(d tools.Definition) [numFields][]string {
	var t [numFields][]string
	t[FieldName] = []string{d.Name}
	if d.Description != "" {
		t[FieldDescription] = []string{d.Description}
	}
	t[FieldTags] = d.Tags
	if len(d.Parameters) > 0 {
		walkSchema(d.Parameters, &t[FieldParamNames], &t[FieldParamText])
	}
	if len(d.ResponseSchema) > 0 {
		walkSchema(d.ResponseSchema, &t[FieldReturns], &t[FieldReturns])
	}
	return t
}

// maxSchemaDepth bounds the walk of nested schemas, so that a pathological schema costs
// bounded time at indexing.
const maxSchemaDepth = 16

// walkSchema collects property names into names and descriptive text into text from a
// JSON Schema: the schema's own description and title, string enum values, and the same
// recursively for properties, items, additionalProperties, $defs, allOf/anyOf/oneOf.
// The schema is decoded once; one that is not valid JSON contributes nothing (the
// registry validates schemas, the index only reads them).
func walkSchema(raw json.RawMessage, names, text *[]string) {
	var v any
	if json.Unmarshal(raw, &v) == nil {
		walkNode(v, names, text, 0)
	}
}

func walkNode(v any, names, text *[]string, depth int) {
	s, ok := v.(map[string]any)
	if !ok || depth > maxSchemaDepth {
		return
	}
	for _, k := range []string{"description", "title"} {
		if v, ok := s[k].(string); ok && v != "" {
			*text = append(*text, v)
		}
	}
	if enum, ok := s["enum"].([]any); ok {
		for _, e := range enum {
			if v, ok := e.(string); ok {
				*text = append(*text, v)
			}
		}
	}
	for _, k := range []string{"properties", "$defs", "definitions", "patternProperties"} {
		props, ok := s[k].(map[string]any)
		if !ok {
			continue
		}
		keys := make([]string, 0, len(props))
		for name := range props {
			keys = append(keys, name)
		}
		sort.Strings(keys) // deterministic order, for reproducible indexes
		for _, name := range keys {
			if k == "properties" {
				*names = append(*names, name)
			}
			walkNode(props[name], names, text, depth+1)
		}
	}
	for _, k := range []string{"items", "additionalProperties", "not"} {
		walkNode(s[k], names, text, depth+1)
	}
	for _, k := range []string{"allOf", "anyOf", "oneOf", "prefixItems"} {
		if list, ok := s[k].([]any); ok {
			for _, v := range list {
				walkNode(v, names, text, depth+1)
			}
		}
	}
}

// phraseFields are the fields whose adjacent word pairs are indexed as phrases: the
// ones written as running text, where two words in a row say more than the two apart
// ("dance photography" against a tool that photographs a dance class).
var phraseFields = [numFields]bool{FieldName: true, FieldDescription: true}

// phrase is the index term of two adjacent terms. The space cannot occur in a word term,
// so phrases and words never collide.
func phrase(a, b string) string { return a + " " + b }

// pairKey is the key of two adjacent terms, by id, in Snapshot.phrases.
func pairKey(a, b uint32) uint64 { return uint64(a)<<32 | uint64(b) }

// noTerm stands in Snapshot.words for a stop word: a word with no term.
const noTerm = ^uint32(0)
