package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// CompositeDefinition builds what AddComposite registers, from definitions alone: the
// union of known sub-tools' schemas, any object for one only known by name, safety and
// idempotence from the sub-tools; and a tool registered WithCompositeEnvelope takes a
// call naming a tool outside the union (its run answers that entry), while the envelope
// itself is still enforced.
func TestCompositeDefinitionAndEnvelope(t *testing.T) {
	add := tools.Definition{Name: "add", Description: "Add.", Safe: true,
		Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}`)}
	remote := tools.Definition{Name: "remote"}
	def, err := tools.CompositeDefinition("both", "Both.", []tools.Definition{add, remote})
	if err != nil {
		t.Fatal(err)
	}
	if def.Safe || !def.IsIdempotent() || !strings.Contains(string(def.Parameters), `"remote":{"type":"object"}`) ||
		!strings.Contains(string(def.Parameters), `"required":["a"]`) || !strings.Contains(def.Description, "- add: Add.") {
		t.Errorf("definition %+v, parameters %s", def, def.Parameters)
	}
	for _, subs := range [][]tools.Definition{nil, {add, add}, {{Name: "both"}}} {
		if _, err := tools.CompositeDefinition("both", "", subs); !errors.Is(err, tools.ErrInvalidDefinition) {
			t.Errorf("CompositeDefinition(%v) = %v, want invalid_definition", subs, err)
		}
	}

	reg := tools.NewRegistry()
	var got json.RawMessage
	run := func(_ context.Context, args json.RawMessage) (any, error) { got = args; return "ran", nil }
	if err := reg.AddFunc(def, run, tools.WithCompositeEnvelope()); err != nil {
		t.Fatal(err)
	}
	call, err := reg.Hydrate("both", []byte(`{"calls":[{"name":"elsewhere","args":{}}]}`))
	if err != nil {
		t.Fatalf("a call naming a tool outside the union: %v", err)
	}
	if out := call.Run(context.Background()); out.Err != nil {
		t.Fatal(out.Err)
	}
	if !strings.Contains(string(got), "elsewhere") {
		t.Errorf("the tool got %s", got)
	}
	if _, err := reg.Hydrate("both", []byte(`{"calls":[{"name":"add"}]}`)); !errors.Is(err, tools.ErrInvalidInput) {
		t.Errorf("a call without args: %v, want invalid_tool_input", err)
	}
}

// A composite's definition names its sub-tools (composite.tools), which the catalog
// carries to planners: AddComposite and CompositeDefinition set it, it survives JSON as
// {"composite":{"tools":[...]}} (a definition stored without it reads as no composite),
// and a registration that names sub-tools is refused unless it takes the envelope, or
// when the list is empty, names the tool itself, a name twice or a bad name.
func TestCompositeDefinitionNamesItsSubTools(t *testing.T) {
	reg := tools.NewRegistry()
	obj := json.RawMessage(`{"type":"object"}`)
	for _, n := range []string{"a", "b"} {
		if err := reg.AddFunc(tools.Definition{Name: n, Parameters: obj, Safe: true}, func(context.Context, json.RawMessage) (any, error) { return n, nil }); err != nil {
			t.Fatal(err)
		}
	}
	if err := reg.AddComposite("ab", "Both.", []string{"a", "b"}); err != nil {
		t.Fatal(err)
	}
	def, _ := reg.Lookup("ab")
	if def.Composite == nil || !slices.Equal(def.Composite.Tools, []string{"a", "b"}) || !def.Composite.Has("b") || def.Composite.Has("ab") {
		t.Fatalf("AddComposite's definition names %+v", def.Composite)
	}
	b, err := json.Marshal(def)
	if err != nil || !strings.Contains(string(b), `"composite":{"tools":["a","b"]}`) {
		t.Fatalf("marshalled: %s, %v", b, err)
	}
	var back tools.Definition
	if err := json.Unmarshal(b, &back); err != nil || !slices.Equal(back.Composite.Tools, def.Composite.Tools) {
		t.Fatalf("read back: %+v, %v", back.Composite, err)
	}
	if a, _ := reg.Lookup("a"); a.Composite != nil {
		t.Errorf("a plain tool names sub-tools %+v", a.Composite)
	}
	var old tools.Definition
	if err := json.Unmarshal([]byte(`{"type":"function","name":"x","parameters":{"type":"object"},"safe":true}`), &old); err != nil || old.Composite != nil {
		t.Errorf("a definition stored before: %+v, %v", old.Composite, err)
	}

	run := func(context.Context, json.RawMessage) (any, error) { return nil, nil }
	named := def
	if err := tools.NewRegistry().AddFunc(named, run); !errors.Is(err, tools.ErrInvalidDefinition) || !strings.Contains(err.Error(), "WithCompositeEnvelope") {
		t.Errorf("a composite registered as a plain tool: %v", err)
	}
	if err := tools.NewRegistry().AddFunc(named, run, tools.WithCompositeEnvelope()); err != nil {
		t.Errorf("a composite registered with the envelope: %v", err)
	}
	for _, subs := range [][]string{{}, {"ab"}, {"a", "a"}, {"a.b"}} {
		bad := def
		bad.Composite = &tools.Composite{Tools: subs}
		if err := tools.NewRegistry().AddFunc(bad, run, tools.WithCompositeEnvelope()); !errors.Is(err, tools.ErrInvalidDefinition) {
			t.Errorf("composite of %q: %v, want invalid_definition", subs, err)
		}
	}
}
