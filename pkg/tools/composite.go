package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolfleet/toolfleet/internal/jsonscan"
)

// AddComposite registers a tool that runs several of the registry's tools in one call.
// Its arguments are {"calls":[{"name":"<sub-tool>","args":{...}}, ...]}; the sub-calls
// run in order, each through its own callbacks and responseSchema, and the output is
// {"results":[{"name":"<sub-tool>","result":<its output or error output>}, ...]}. A
// sub-call naming a tool outside subTools yields {"error":{"code":"no_such_tool","message":"unknown sub-tool: NAME"}} and a
// failing one its error output; the others still run, and the composite itself succeeds.
//
// The sub-tools are taken from r as registered now: replacing one later does not change
// the composite (register the composite again to pick the new one up).
//
// Parameters, shown to models, is the union of the sub-tools' argument schemas: each
// sub-tool's schema is embedded under $defs/<name> (its local "#/..." references
// rewritten to stay inside it) and items is an anyOf of {name: const, args: $ref}. A
// sub-tool whose schema only compiles under its own older draft (e.g. draft-07 tuple
// items) cannot be embedded, and AddComposite refuses it. Calls are validated without
// that union, for sharper messages: the {calls:[{name,args}]} envelope first, then each
// call naming a known sub-tool against that sub-tool's own compiled validator, with
// violations pointing into /calls/N/args. A call naming an unknown tool passes hydration
// so that it can be answered by its error entry while the rest run.
//
// The composite is safe only if every sub-tool is, and idempotent only if every sub-tool
// is; a call of it reports validated:false if one of its sub-calls was not validated.
func (r *Registry) AddComposite(name, description string, subTools []string, opts ...Option) error {
	snap := r.snap.Load()
	ci := &compositeImpl{subs: make(map[string]*entry, len(subTools))}
	defs := make([]Definition, 0, len(subTools))
	for _, s := range subTools {
		e, ok := snap.byName[s]
		if !ok && s != name {
			return Errorf(CodeInvalidDefinition, "composite %q: sub-tool %q is not registered; register it first", name, s)
		}
		if ok {
			ci.subs[s] = e
			ci.order = append(ci.order, s)
			defs = append(defs, e.def)
		} else {
			defs = append(defs, Definition{Name: s})
		}
	}
	def, err := CompositeDefinition(name, description, defs)
	if err != nil {
		return err
	}
	e, err := newEntry(def, ci, opts)
	if err != nil {
		return err
	}
	// Validate with the envelope; the union in Parameters only informs models.
	e.params, e.fast = envelopeSchema, envelopeFast
	r.put(e)
	return nil
}

// CompositeDefinition returns the definition of a composite tool over subs, the
// sub-tools' definitions in order: its Parameters is the union of the sub-tools' calls
// and its description lists them, as [Registry.AddComposite] describes; it is Safe only
// if every sub-tool is, and idempotent only if every sub-tool is. A sub-tool whose
// definition is not known (only its Name set, no Parameters) takes any object as
// arguments in the union. It refuses no sub-tools, a sub-tool listed twice, the
// composite itself among them, and a sub-tool schema that cannot be embedded.
func CompositeDefinition(name, description string, subs []Definition) (Definition, error) {
	if len(subs) == 0 {
		return Definition{}, Errorf(CodeInvalidDefinition, "composite %q: list at least one sub-tool", name)
	}
	safe, idempotent := true, true
	var doc strings.Builder
	doc.WriteString(description)
	doc.WriteString("\n\nRuns several tools in one call, in order: {\"calls\":[{\"name\":TOOL,\"args\":{...}}]}. " +
		"The result lists each call's result in order. Tools:")
	comp := &Composite{Tools: make([]string, len(subs))}
	for i, d := range subs {
		comp.Tools[i] = d.Name
	}
	if err := comp.check(name); err != nil {
		return Definition{}, err
	}
	for _, d := range subs {
		safe = safe && d.Safe
		idempotent = idempotent && d.IsIdempotent()
		fmt.Fprintf(&doc, "\n- %s: %s", d.Name, strings.ReplaceAll(d.Description, "\n", " "))
	}
	params, err := compositeSchema(subs)
	if err != nil {
		return Definition{}, Wrap(CodeInvalidDefinition, err, fmt.Sprintf("composite %q: cannot build its schema: %v", name, err))
	}
	def := Definition{Name: name, Description: doc.String(), Parameters: params, Safe: safe, Composite: comp}
	if !idempotent {
		def.Idempotent = new(false)
	}
	return def, nil
}

// envelopeDoc is the shape every composite call shares.
var envelopeDoc = []byte(`{"type":"object",
	"properties":{"calls":{"type":"array","items":{"type":"object",
		"properties":{"name":{"type":"string"},"args":{"type":"object"}},
		"required":["name","args"],"additionalProperties":false}}},
	"required":["calls"],"additionalProperties":false}`)

var (
	envelopeSchema = func() *jsonschema.Schema {
		s, err := compileSchema("composite", "envelope", envelopeDoc)
		if err != nil {
			panic(err)
		}
		return s
	}()
	envelopeFast = compileFast(envelopeDoc)
)

// compositeSchema builds the union of the sub-tools' argument schemas.
func compositeSchema(subs []Definition) (json.RawMessage, error) {
	defs := map[string]any{}
	variants := make([]any, 0, len(subs))
	for _, d := range subs {
		s := d.Name
		var sub any = map[string]any{"type": "object"}
		if p := d.Parameters; len(p) > 0 {
			v, err := jsonscan.Parse(p)
			if err != nil {
				return nil, fmt.Errorf("sub-tool %q: %w", s, err)
			}
			if m, ok := v.(map[string]any); ok {
				delete(m, "$schema")
				delete(m, "$id")
			}
			sub = rewriteRefs(v, "#/$defs/"+s)
		}
		defs[s] = sub
		variants = append(variants, map[string]any{
			"type": "object",
			"properties": map[string]any{
				"name": map[string]any{"const": s},
				"args": map[string]any{"$ref": "#/$defs/" + s},
			},
			"required":             []any{"name", "args"},
			"additionalProperties": false,
		})
	}
	doc := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"calls": map[string]any{
				"type":        "array",
				"description": "The tool calls to make, in order.",
				"items":       map[string]any{"anyOf": variants},
			},
		},
		"required":             []any{"calls"},
		"additionalProperties": false,
		"$defs":                defs,
	}
	return json.Marshal(doc)
}

// rewriteRefs moves a schema's local JSON-pointer references ("#", "#/...") under prefix,
// where the schema is embedded. Anchors ("#name") and other references are left alone.
func rewriteRefs(v any, prefix string) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if k == "$ref" {
				if s, ok := e.(string); ok && (s == "#" || strings.HasPrefix(s, "#/")) {
					x[k] = prefix + s[1:]
					continue
				}
			}
			x[k] = rewriteRefs(e, prefix)
		}
	case []any:
		for i, e := range x {
			x[i] = rewriteRefs(e, prefix)
		}
	}
	return v
}

// compositeImpl runs the sub-calls of a composite tool.
type compositeImpl struct {
	subs  map[string]*entry
	order []string
}

// sub is one sub-call of a composite; call is nil for an unknown sub-tool.
type sub struct {
	name string
	call *Call
}

func (ci *compositeImpl) prepare(c *Call, value map[string]any) error {
	calls, _ := value["calls"].([]any)
	c.subs = make([]sub, 0, len(calls))
	var vs []Violation
	var errs []string
	for i, raw := range calls {
		m, _ := raw.(map[string]any)
		name, _ := m["name"].(string)
		args, _ := m["args"].(map[string]any)
		e, ok := ci.subs[name]
		if !ok {
			c.subs = append(c.subs, sub{name: name})
			continue
		}
		b, err := json.Marshal(args)
		if err != nil {
			return err
		}
		sc, err := e.hydrate(b, args)
		if err != nil {
			var te *Error
			if !errors.As(err, &te) || len(te.Violations) == 0 {
				errs = append(errs, fmt.Sprintf("/calls/%d (%s): %v", i, name, err))
				continue
			}
			for _, v := range te.Violations {
				vs = append(vs, Violation{Pointer: fmt.Sprintf("/calls/%d/args%s", i, v.Pointer), Message: v.Message})
			}
			continue
		}
		c.validated = c.validated && sc.validated
		c.subs = append(c.subs, sub{name: name, call: sc})
	}
	if len(vs) > 0 || len(errs) > 0 {
		msg := violationSummary(vs)
		if len(errs) > 0 {
			if msg != "" {
				msg += "; "
			}
			msg += strings.Join(errs, "; ")
		}
		return &Error{Code: CodeInvalidInput, Violations: vs,
			Message: fmt.Sprintf("arguments of %q do not match its schema: %s", c.entry.def.Name, msg)}
	}
	return nil
}

type subResult struct {
	Name   string          `json:"name"`
	Result json.RawMessage `json:"result"`
}

func (ci *compositeImpl) run(ctx context.Context, c *Call) (any, error) {
	results := make([]subResult, 0, len(c.subs))
	caller, _ := CallInfoFrom(ctx)
	for _, s := range c.subs {
		if s.call == nil {
			results = append(results, subResult{Name: s.name, Result: Errorf(CodeNoSuchTool, "unknown sub-tool: %s", s.name).ForModel()})
			continue
		}
		// A composite does not widen who may call its sub-tools.
		if !s.call.entry.def.AllowsCaller(caller.Tenant, caller.Role) {
			results = append(results, subResult{Name: s.name, Result: (&Error{Code: CodeForbidden, Message: forbiddenMessage(s.call.entry.def, caller.Tenant, caller.Role)}).ForModel()})
			continue
		}
		results = append(results, subResult{Name: s.name, Result: s.call.Run(ctx).Output})
	}
	return struct {
		Results []subResult `json:"results"`
	}{results}, nil
}

func (ci *compositeImpl) hooks(*Call) Callbacks { return Callbacks{} }
