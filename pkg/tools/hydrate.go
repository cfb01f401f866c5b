package tools

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/toolfleet/toolfleet/internal/jsonscan"
)

// Call is a hydrated tool call: its arguments were parsed, validated against the tool's
// schema and instantiated, and it is ready to [Call.Run]. A Call is used once.
type Call struct {
	entry     *entry
	args      json.RawMessage
	validated bool
	tool      Tool  // the fresh value of a typed tool
	subs      []sub // the sub-calls of a composite tool
}

// Definition returns the definition of the called tool.
func (c *Call) Definition() Definition { return c.entry.def }

// Arguments returns the arguments as a JSON object (unwrapped if they arrived as a JSON
// string). The bytes may alias the ones given to Hydrate: treat them as read-only.
func (c *Call) Arguments() json.RawMessage { return c.args }

// Validated reports whether the arguments were checked against a schema; false for tools
// registered with AllowNoSchema (and for composites calling such a tool).
func (c *Call) Validated() bool { return c.validated }

// Hydrate turns a model's raw arguments for the tool called name into a [Call]: parse,
// validate, instantiate, in that order, and nothing runs.
//
// raw is a JSON object, or a JSON string holding one (OpenAI sends arguments as a string;
// it is unwrapped once); empty or blank raw, or an empty string, means {}. raw is not
// copied: do not change it while the Call is in use.
//
// Failures are an [*Error]:
//   - [CodeInputTooLarge] when raw exceeds the registry's limit, checked before parsing;
//   - [CodeNoSuchTool] when no tool is called name;
//   - [CodeInvalidInput] when raw is not JSON (the message says where), not an object,
//     or breaks the schema: then Violations holds every violation, each with the JSON
//     Pointer of the offending value in the arguments, ready to hand back to a model.
func (r *Registry) Hydrate(name string, raw []byte) (*Call, error) {
	return r.HydrateUpTo(name, raw, r.maxArgBytes)
}

// HydrateUpTo is [Registry.Hydrate] with maxBytes in place of the registry's size limit:
// arguments that came by reference (stored as a payload, not carried in a message) are
// bounded by the payload limit instead. maxBytes <= 0 keeps the registry's limit.
func (r *Registry) HydrateUpTo(name string, raw []byte, maxBytes int) (*Call, error) {
	if maxBytes <= 0 {
		maxBytes = r.maxArgBytes
	}
	if len(raw) > maxBytes {
		return nil, Errorf(CodeInputTooLarge, "arguments of %q are %d bytes; the limit is %d bytes", name, len(raw), maxBytes)
	}
	e, ok := r.snap.Load().byName[name]
	if !ok {
		return nil, Errorf(CodeNoSuchTool, "no tool is called %q", name)
	}
	args, value, err := parseArguments(raw)
	if err != nil {
		err.Message = fmt.Sprintf("arguments of %q: %s", name, err.Message)
		return nil, err
	}
	return e.hydrate(args, value)
}

// hydrate validates and instantiates parsed arguments (also used for a composite's
// sub-calls, whose arguments arrive already parsed).
func (e *entry) hydrate(args json.RawMessage, value map[string]any) (*Call, error) {
	c := &Call{entry: e, args: args, validated: e.params != nil}
	if e.params != nil && (e.fast == nil || !e.fast.valid(value)) {
		if err := e.params.Validate(value); err != nil {
			vs := violations(err)
			return nil, &Error{Code: CodeInvalidInput, Violations: vs, Err: err,
				Message: fmt.Sprintf("arguments of %q do not match its schema: %s", e.def.Name, violationSummary(vs))}
		}
	}
	if err := e.impl.prepare(c, value); err != nil {
		var te *Error
		if errors.As(err, &te) {
			return nil, te
		}
		return nil, Wrap(CodeInvalidInput, err, fmt.Sprintf("arguments of %q cannot be decoded: %v", e.def.Name, err))
	}
	return c, nil
}

// parseArguments normalises raw arguments to a JSON object: blank means {}, a JSON string
// is unwrapped once. It returns the object's bytes and its parsed value.
func parseArguments(raw []byte) (json.RawMessage, map[string]any, *Error) {
	b := trimSpace(raw)
	if len(b) == 0 {
		return json.RawMessage("{}"), map[string]any{}, nil
	}
	v, err := jsonscan.Parse(b)
	if err != nil {
		return nil, nil, Wrap(CodeInvalidInput, err, fmt.Sprintf("not valid JSON: %v", err))
	}
	if s, ok := v.(string); ok {
		b = trimSpace([]byte(s))
		if len(b) == 0 {
			return json.RawMessage("{}"), map[string]any{}, nil
		}
		if v, err = jsonscan.Parse(b); err != nil {
			return nil, nil, Wrap(CodeInvalidInput, err, fmt.Sprintf("a JSON string whose content is not valid JSON: %v", err))
		}
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, nil, Errorf(CodeInvalidInput, "must be a JSON object, got %s", jsonKind(v))
	}
	return b, obj, nil
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
