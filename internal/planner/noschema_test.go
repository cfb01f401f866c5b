package planner

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// A run's call records say validated:false and the noSchemaMode of calls of tools without
// a schema, as the executor's results do, and nothing of the kind for validated calls.
func TestCallRecordsShowNoSchemaMode(t *testing.T) {
	t.Parallel()
	b := setup(t, map[string]string{"main": `
name: noschema
steps:
  - calls:
      - {name: peek, arguments: {anything: 1}}
      - {name: poke, arguments: {anything: 2}}
      - {name: echo, arguments: {text: hi}}
  - text: done
`})
	ran := func(_ context.Context, args json.RawMessage) (any, error) { return args, nil }
	startExecutor(t, b, tools.Definition{Type: "function", Name: "peek", Description: "Looks.", Safe: true,
		AllowNoSchema: true, NoSchemaMode: tools.NoSchemaReadOnly, Capabilities: []string{tools.CapabilityReadOnly}}, ran)
	startExecutor(t, b, tools.Definition{Type: "function", Name: "poke", Description: "Does anything.", Safe: true,
		AllowNoSchema: true, NoSchemaMode: tools.NoSchemaFull}, ran)

	run := b.run(t, StartRequest{Input: "look around", Tools: []string{"peek", "poke", "echo"}})
	if run.Termination != TerminationCompleted || len(run.Calls) != 3 {
		t.Fatalf("run ended %s (%s) with %d calls: %+v", run.Termination, run.Detail, len(run.Calls), run.Calls)
	}
	want := map[string]tools.NoSchemaMode{"peek": tools.NoSchemaReadOnly, "poke": tools.NoSchemaFull, "echo": ""}
	for _, c := range run.Calls {
		mode := want[c.Name]
		if c.Status != "ok" || c.Local || c.Validated != (mode == "") || c.NoSchemaMode != mode {
			t.Errorf("call of %s: status %s, local %v, validated %v, noSchemaMode %q; want ok from the fleet, validated %v, mode %q",
				c.Name, c.Status, c.Local, c.Validated, c.NoSchemaMode, mode == "", mode)
		}
		rec, _ := json.Marshal(c)
		var fields map[string]any
		_ = json.Unmarshal(rec, &fields)
		if got, _ := fields["noSchemaMode"].(string); got != string(mode) {
			t.Errorf("call of %s: stored record %s; want noSchemaMode %q", c.Name, rec, mode)
		}
	}
}
