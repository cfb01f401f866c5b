package tools_test

import (
	"context"
	"encoding/json"
	"errors"
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
