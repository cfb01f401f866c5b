package tools

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// printer renders validator messages; one shared English printer, as the validator's own.
var printer = message.NewPrinter(language.English)

// schemaBase is the location a schema is compiled under. It is an absolute URL in a scheme
// that no loader serves, so that nothing, not even a relative $ref, is resolved against
// the file system or the network.
const schemaBase = "mem:///toolfleet/"

// compileSchema compiles one JSON Schema document (what, e.g. "parameters", names it in
// errors). Draft 2020-12 is the default; an explicit $schema naming another draft the
// validator knows (draft-07, 2019-09, ...) is honoured. Every $ref must point inside the
// document: a loader that refuses every URL is installed, so http, https, file, urn and
// relative references fail here, at registration, never at call time.
func compileSchema(tool, what string, doc []byte) (*jsonschema.Schema, error) {
	parsed, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return nil, Errorf(CodeInvalidDefinition, "tool %q: %s is not valid JSON: %v", tool, what, err)
	}
	switch parsed.(type) {
	case map[string]any, bool:
	default:
		return nil, Errorf(CodeInvalidDefinition, "tool %q: %s must be a JSON Schema object, got %s", tool, what, jsonKind(parsed))
	}
	loc := schemaBase + tool + "/" + what + ".json"
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	refused := &refusingLoader{}
	c.UseLoader(refused)
	if err := c.AddResource(loc, parsed); err != nil {
		return nil, Wrap(CodeInvalidDefinition, err, fmt.Sprintf("tool %q: %s: %v", tool, what, err))
	}
	sch, err := c.Compile(loc)
	if err != nil {
		if len(refused.urls) > 0 {
			ref := originalRef(parsed, loc, refused.urls[0])
			return nil, Wrap(CodeInvalidDefinition, err, fmt.Sprintf(
				"tool %q: %s refers to %q, which is outside the schema; remote, file and relative references are refused: "+
					"put the referenced schema under $defs and refer to it as \"#/$defs/NAME\"", tool, what, ref))
		}
		return nil, Wrap(CodeInvalidDefinition, err, fmt.Sprintf("tool %q: %s does not compile: %s", tool, what, compileMessage(err)))
	}
	return sch, nil
}

// originalRef finds the $ref, as the author wrote it, that resolves to the refused url.
func originalRef(doc any, base, refused string) string {
	b, err := url.Parse(base)
	if err != nil {
		return refused
	}
	found := refused
	var walk func(v any) bool
	walk = func(v any) bool {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if s, ok := e.(string); ok && (k == "$ref" || k == "$schema" || k == "$dynamicRef") {
					if u, err := url.Parse(s); err == nil {
						r := b.ResolveReference(u)
						r.Fragment = ""
						if r.String() == refused {
							found = s
							return true
						}
					}
				}
				if walk(e) {
					return true
				}
			}
		case []any:
			for _, e := range x {
				if walk(e) {
					return true
				}
			}
		}
		return false
	}
	walk(doc)
	return strings.TrimPrefix(found, schemaBase)
}

// compileMessage shortens the compiler's error: the mem:/// location means nothing to an
// author.
func compileMessage(err error) string {
	return strings.ReplaceAll(err.Error(), schemaBase, "")
}

// refusingLoader is the only loader the compiler gets. The validator's own meta-schemas
// are embedded in it and never reach a loader; anything else is refused and remembered
// for the error message.
type refusingLoader struct{ urls []string }

func (l *refusingLoader) Load(url string) (any, error) {
	l.urls = append(l.urls, url)
	return nil, errors.New("references outside the schema are refused")
}

// violations flattens a validation error into its leaves: each is one thing wrong at one
// place, which is what a model needs to repair its call. Inner nodes (allOf, $ref, ...)
// only group their causes.
func violations(err error) []Violation {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return []Violation{{Pointer: "", Message: err.Error()}}
	}
	var out []Violation
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			out = append(out, Violation{Pointer: jsonPointer(e.InstanceLocation), Message: e.ErrorKind.LocalizedString(printer)})
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return out
}

// jsonPointer renders tokens as an RFC 6901 pointer ("" is the root).
func jsonPointer(tokens []string) string {
	if len(tokens) == 0 {
		return ""
	}
	var sb strings.Builder
	for _, t := range tokens {
		sb.WriteByte('/')
		if strings.ContainsAny(t, "~/") {
			t = strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1")
		}
		sb.WriteString(t)
	}
	return sb.String()
}

// violationSummary joins violations into one line for an error message.
func violationSummary(vs []Violation) string {
	var sb strings.Builder
	for i, v := range vs {
		if i > 0 {
			sb.WriteString("; ")
		}
		p := v.Pointer
		if p == "" {
			p = "(root)"
		}
		sb.WriteString(p)
		sb.WriteString(": ")
		sb.WriteString(v.Message)
	}
	return sb.String()
}

// jsonKind names the JSON type of a parsed value, for messages.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	default:
		return "a number"
	}
}
