package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// entry is one registered tool: its definition, compiled validators and implementation.
// Entries are immutable once registered, so snapshots and views share them freely.
type entry struct {
	def       Definition
	params    *jsonschema.Schema // nil for a tool registered with AllowNoSchema
	fast      *fastSchema        // nil when the parameters schema is beyond the fast path
	response  *jsonschema.Schema // nil without a ResponseSchema
	fastResp  *fastSchema
	callbacks Callbacks // from WithCallbacks; typed hooks are consulted per call
	// confinement is how the runner keeps a read-only tool to reads (WithConfinement);
	// nil for a Go tool, whose declaration is its author's promise.
	confinement *Confinement
	impl        impl
}

// impl is what kind of tool an entry is: a typed struct, a function or a composite.
type impl interface {
	// prepare instantiates the call from its validated arguments; an error is reported
	// as invalid_tool_input and nothing runs.
	prepare(c *Call, value map[string]any) error
	// run executes the prepared call.
	run(ctx context.Context, c *Call) (any, error)
	// hooks returns the callbacks a prepared call's own value implements, if any.
	hooks(c *Call) Callbacks
}

// newEntry checks a definition and compiles its schemas. Every way a definition can be
// wrong is an *Error with CodeInvalidDefinition whose message says what to change.
func newEntry(def Definition, im impl, opts []Option) (*entry, error) {
	if err := checkDefinition(def); err != nil {
		return nil, err
	}
	def.Type = "function"
	if isNull(def.Parameters) {
		def.Parameters = nil
	}
	// Keep our own copy of the bytes: the registry must not change if the author's
	// slice does. The copy is byte for byte.
	def.Parameters = bytes.Clone(def.Parameters)
	def.ResponseSchema = bytes.Clone(def.ResponseSchema)
	o := collectOptions(opts)
	if def.Composite != nil {
		// Whoever reads the catalog takes a composite's calls for the envelope: it must be one.
		if _, ok := im.(*compositeImpl); !ok && !o.envelope {
			return nil, Errorf(CodeInvalidDefinition,
				"tool %q names sub-tools (composite) but is not registered as a composite: use AddComposite, or WithCompositeEnvelope", def.Name)
		}
		def.Composite = &Composite{Tools: slices.Clone(def.Composite.Tools)}
	}
	e := &entry{def: def, impl: im, callbacks: o.callbacks, confinement: o.confinement}
	if len(def.Parameters) > 0 {
		sch, err := compileSchema(def.Name, "parameters", def.Parameters)
		if err != nil {
			return nil, err
		}
		e.params = sch
		e.fast = compileFast(def.Parameters)
	}
	if o.envelope {
		e.params, e.fast = envelopeSchema, envelopeFast
	}
	if len(def.ResponseSchema) > 0 && !isNull(def.ResponseSchema) {
		sch, err := compileSchema(def.Name, "responseSchema", def.ResponseSchema)
		if err != nil {
			return nil, err
		}
		e.response = sch
		e.fastResp = compileFast(def.ResponseSchema)
	}
	return e, nil
}

func checkDefinition(def Definition) error {
	if def.Type != "" && def.Type != "function" {
		return Errorf(CodeInvalidDefinition, "tool %q: type must be \"function\" (or empty), got %q", def.Name, def.Type)
	}
	if !NamePattern.MatchString(def.Name) {
		return Errorf(CodeInvalidDefinition,
			"tool name %q is invalid: it must match %s (1 to 64 letters, digits, '_' or '-'; no dots or spaces)",
			def.Name, NamePattern.String())
	}
	for _, list := range []struct {
		what  string
		names []string
	}{{"roles", def.Roles}, {"tenants", def.Tenants}} {
		for _, n := range list.names {
			// A caller's role and tenant are subject tokens: a name that is not one could
			// never match, and the tool would be closed to everyone by a typo.
			if !NamePattern.MatchString(n) {
				return Errorf(CodeInvalidDefinition,
					"tool %q: %s entry %q is invalid: use 1 to 64 letters, digits, '_' or '-' (a caller's role and tenant are NATS subject tokens)",
					def.Name, list.what, n)
			}
		}
	}
	if def.NoSchemaMode != "" && !def.NoSchemaMode.Valid() {
		return Errorf(CodeInvalidDefinition,
			"tool %q: noSchemaMode %q is unknown; use \"read-only\", \"human-approval\" or \"full\"", def.Name, def.NoSchemaMode)
	}
	if len(def.Parameters) == 0 || isNull(def.Parameters) {
		if !def.AllowNoSchema {
			return Errorf(CodeInvalidDefinition,
				"tool %q has no parameters schema: add a JSON Schema of its arguments to Definition.Parameters "+
					"(e.g. {\"type\":\"object\",\"properties\":{...},\"required\":[...]}), or, if the tool really takes "+
					"unchecked input, set allowNoSchema together with noSchemaMode \"read-only\", \"human-approval\" or \"full\"",
				def.Name)
		}
		if !def.NoSchemaMode.Valid() {
			return Errorf(CodeInvalidDefinition,
				"tool %q sets allowNoSchema without a noSchemaMode: add noSchemaMode \"read-only\", \"human-approval\" or \"full\" "+
					"to say how far its unchecked calls may go, or give it a parameters schema", def.Name)
		}
		if def.NoSchemaMode == NoSchemaReadOnly && !def.ReadOnly() {
			return Errorf(CodeInvalidDefinition,
				"tool %q has noSchemaMode \"read-only\" but does not declare itself read-only: add \"read-only\" to its "+
					"capabilities (capabilities: [\"read-only\"]) if it has no side effects, or use noSchemaMode "+
					"\"human-approval\" or \"full\", or give it a parameters schema", def.Name)
		}
	}
	if def.Composite != nil {
		if err := def.Composite.check(def.Name); err != nil {
			return err
		}
	}
	if def.Timeout < 0 {
		return Errorf(CodeInvalidDefinition, "tool %q: timeout must not be negative, got %s", def.Name, def.Timeout.D())
	}
	if def.Retry != nil && def.Retry.When != nil {
		if err := def.Retry.When.Check(); err != nil {
			return Errorf(CodeInvalidDefinition, "tool %q: %v", def.Name, err)
		}
	}
	return checkLimits(def)
}

func isNull(b json.RawMessage) bool {
	return string(bytes.TrimSpace(b)) == "null"
}
