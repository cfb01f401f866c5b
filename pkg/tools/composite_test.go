package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

const pairSchema = `{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"],"additionalProperties":false}`

type compositeBundle struct {
	reg *tools.Registry
	tr  *trace
}

func setupComposite(t *testing.T) compositeBundle {
	t.Helper()
	tr := &trace{}
	reg := tools.NewRegistry()
	type pair struct{ A, B float64 }
	arith := func(name string, f func(a, b float64) (any, error)) {
		t.Helper()
		err := reg.AddFunc(tools.Definition{Name: name, Description: "The " + name + " of a and b.", Parameters: json.RawMessage(pairSchema), Safe: true},
			func(_ context.Context, args json.RawMessage) (any, error) {
				var p pair
				if err := json.Unmarshal(args, &p); err != nil {
					return nil, err
				}
				tr.add("%s(%v,%v)", name, p.A, p.B)
				return f(p.A, p.B)
			},
			tools.WithCallbacks(tools.Callbacks{
				BeforeCall: func(context.Context, json.RawMessage) (any, error) { tr.add("before %s", name); return nil, nil },
				OnError: func(_ context.Context, _ json.RawMessage, e tools.ErrorOutput) (any, error) {
					tr.add("onError %s", name)
					return nil, nil
				},
				FormatOutput: func(_ context.Context, out any) (any, error) { return map[string]any{name: out}, nil },
			}))
		if err != nil {
			t.Fatal(err)
		}
	}
	arith("add", func(a, b float64) (any, error) { return a + b, nil })
	arith("divide", func(a, b float64) (any, error) {
		if b == 0 {
			return nil, errors.New("division by zero")
		}
		return a / b, nil
	})
	// A sub-tool with local $defs, which must still resolve inside the union.
	err := reg.AddFunc(tools.Definition{Name: "locate", Description: "Where a point is.", Safe: true,
		Parameters: json.RawMessage(`{"type":"object","properties":{"p":{"$ref":"#/$defs/point"}},"required":["p"],
			"$defs":{"point":{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]}}}`)},
		func(context.Context, json.RawMessage) (any, error) { tr.add("locate"); return "here", nil })
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.AddComposite("math", "Arithmetic in bulk.", []string{"add", "divide", "locate"}); err != nil {
		t.Fatal(err)
	}
	return compositeBundle{reg: reg, tr: tr}
}

func TestCompositeRunsInOrderThroughEachCallbacks(t *testing.T) {
	t.Parallel()
	b := setupComposite(t)
	c, err := b.reg.Hydrate("math", []byte(`{"calls":[
		{"name":"divide","args":{"a":1,"b":0}},
		{"name":"sqrt","args":{"x":4}},
		{"name":"add","args":{"a":1,"b":2}},
		{"name":"locate","args":{"p":{"x":3}}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	out := c.Run(context.Background())
	if out.Err != nil {
		t.Fatalf("composite failed: %v", out.Err)
	}
	want := `{"results":[` +
		`{"name":"divide","result":{"divide":{"error":{"code":"tool_error","message":"division by zero"}}}},` +
		`{"name":"sqrt","result":{"error":{"code":"no_such_tool","message":"unknown sub-tool: sqrt"}}},` +
		`{"name":"add","result":{"add":3}},` +
		`{"name":"locate","result":"here"}]}`
	if string(out.Output) != want {
		t.Errorf("output:\n%s\nwant\n%s", out.Output, want)
	}
	if got, want := b.tr.String(), "before divide > divide(1,0) > onError divide > before add > add(1,2) > locate"; got != want {
		t.Errorf("trace = %s, want %s", got, want)
	}
}

func TestCompositeValidatesEverySubCall(t *testing.T) {
	t.Parallel()
	b := setupComposite(t)
	_, err := b.reg.Hydrate("math", []byte(`{"calls":[
		{"name":"add","args":{"a":"one","b":2}},
		{"name":"divide","args":{"a":1}},
		{"name":"locate","args":{"p":{"x":1.5}}}]}`))
	te := wantCode(t, err, tools.CodeInvalidInput)
	got := map[string]string{}
	for _, v := range te.Violations {
		got[v.Pointer] = v.Message
	}
	for p, frag := range map[string]string{
		"/calls/0/args/a":   "want number",
		"/calls/1/args":     "missing property 'b'",
		"/calls/2/args/p/x": "want integer",
	} {
		if !strings.Contains(got[p], frag) {
			t.Errorf("violation at %s = %q, want %q (all %+v)", p, got[p], frag, te.Violations)
		}
	}
	if b.tr.String() != "" {
		t.Errorf("something ran: %s", b.tr)
	}
	for _, raw := range []string{`{}`, `{"calls":{}}`, `{"calls":[{"name":"add"}]}`, `{"calls":[{"name":"add","args":[]}]}`, `{"calls":[],"x":1}`} {
		if _, err := b.reg.Hydrate("math", []byte(raw)); !errors.Is(err, tools.ErrInvalidInput) {
			t.Errorf("%s: %v, want invalid_tool_input", raw, err)
		}
	}
}

func TestCompositeDefinition(t *testing.T) {
	t.Parallel()
	b := setupComposite(t)
	d, _ := b.reg.Lookup("math")
	for _, frag := range []string{"Arithmetic in bulk.", "- add: The add of a and b.", "- divide: The divide of a and b.", "- locate: Where a point is."} {
		if !strings.Contains(d.Description, frag) {
			t.Errorf("description lacks %q:\n%s", frag, d.Description)
		}
	}
	if !d.Safe || !d.IsIdempotent() {
		t.Errorf("safe = %v, idempotent = %v; want both (all sub-tools are)", d.Safe, d.IsIdempotent())
	}
	// The union schema validates calls the same way, as a standalone tool.
	reg := tools.NewRegistry()
	if err := reg.AddFunc(tools.Definition{Name: "union", Parameters: d.Parameters}, okFunc); err != nil {
		t.Fatalf("the union schema does not compile on its own: %v\n%s", err, d.Parameters)
	}
	for raw, ok := range map[string]bool{
		`{"calls":[{"name":"add","args":{"a":1,"b":2}},{"name":"locate","args":{"p":{"x":1}}}]}`: true,
		`{"calls":[{"name":"locate","args":{"p":{"x":"1"}}}]}`:                                   false,
		`{"calls":[{"name":"add","args":{"a":1}}]}`:                                              false,
		`{"calls":[{"name":"sqrt","args":{}}]}`:                                                  false,
	} {
		if _, err := reg.Hydrate("union", []byte(raw)); (err == nil) != ok {
			t.Errorf("union schema on %s: %v, want ok=%v", raw, err, ok)
		}
	}

	// Safety and idempotence are those of the weakest sub-tool.
	if err := b.reg.AddFunc(tools.Definition{Name: "pay", Parameters: json.RawMessage(objSchema), Idempotent: new(false)}, okFunc); err != nil {
		t.Fatal(err)
	}
	if err := b.reg.AddComposite("mixed", "Mixed.", []string{"add", "pay"}); err != nil {
		t.Fatal(err)
	}
	d, _ = b.reg.Lookup("mixed")
	if d.Safe || d.IsIdempotent() {
		t.Errorf("mixed: safe = %v, idempotent = %v; want neither", d.Safe, d.IsIdempotent())
	}
}

func TestCompositeRefusals(t *testing.T) {
	t.Parallel()
	b := setupComposite(t)
	wantCode(t, b.reg.AddComposite("c", "", nil), tools.CodeInvalidDefinition, "at least one sub-tool")
	wantCode(t, b.reg.AddComposite("c", "", []string{"add", "nope"}), tools.CodeInvalidDefinition, `"nope" is not registered`)
	wantCode(t, b.reg.AddComposite("c", "", []string{"add", "add"}), tools.CodeInvalidDefinition, "twice")
	wantCode(t, b.reg.AddComposite("math", "", []string{"math"}), tools.CodeInvalidDefinition, "itself")
	wantCode(t, b.reg.AddComposite("bad name", "", []string{"add"}), tools.CodeInvalidDefinition, "must match")
}

func TestCompositeOfNoSchemaToolIsNotValidated(t *testing.T) {
	t.Parallel()
	b := setupComposite(t)
	if err := b.reg.AddFunc(tools.Definition{Name: "free", AllowNoSchema: true, NoSchemaMode: tools.NoSchemaFull}, okFunc); err != nil {
		t.Fatal(err)
	}
	if err := b.reg.AddComposite("c", "", []string{"add", "free"}); err != nil {
		t.Fatal(err)
	}
	c, err := b.reg.Hydrate("c", []byte(`{"calls":[{"name":"add","args":{"a":1,"b":1}}]}`))
	if err != nil || !c.Validated() {
		t.Fatalf("validated sub-calls only: %v, validated=%v", err, c != nil && c.Validated())
	}
	c, err = b.reg.Hydrate("c", []byte(`{"calls":[{"name":"free","args":{"anything":true}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Validated() {
		t.Error("a composite calling a no-schema tool reports validated")
	}
	if out := c.Run(context.Background()); string(out.Output) != `{"results":[{"name":"free","result":{"anything":true}}]}` {
		t.Errorf("output = %s", out.Output)
	}
}

// A composite does not widen who may call its sub-tools: a sub-tool whose roles exclude
// the caller (as the executor established it) gives an error entry and does not run,
// while the others do.
func TestCompositeKeepsSubToolRoles(t *testing.T) {
	reg := tools.NewRegistry()
	ran := map[string]int{}
	for _, d := range []tools.Definition{
		{Name: "open", Parameters: json.RawMessage(`{"type":"object"}`), Safe: true},
		{Name: "admin_only", Parameters: json.RawMessage(`{"type":"object"}`), Safe: true, Roles: []string{"admin"}},
	} {
		name := d.Name
		if err := reg.AddFunc(d, func(context.Context, json.RawMessage) (any, error) { ran[name]++; return "ran " + name, nil }); err != nil {
			t.Fatal(err)
		}
	}
	if err := reg.AddComposite("both", "Runs both.", []string{"open", "admin_only"}); err != nil {
		t.Fatal(err)
	}
	args := json.RawMessage(`{"calls":[{"name":"open","args":{}},{"name":"admin_only","args":{}}]}`)
	for _, tt := range []struct {
		role      string
		adminRuns int
	}{{"guest", 0}, {"", 0}, {"admin", 1}} {
		clear(ran)
		c, err := reg.Hydrate("both", args)
		if err != nil {
			t.Fatal(err)
		}
		out := c.Run(tools.WithCallInfo(context.Background(), tools.CallInfo{Tool: "both", Tenant: "acme", Role: tt.role}))
		if out.Err != nil || ran["open"] != 1 || ran["admin_only"] != tt.adminRuns {
			t.Fatalf("role %q: %s, %v, ran %v", tt.role, out.Output, out.Err, ran)
		}
		if forbidden := strings.Contains(string(out.Output), "may not be called"); forbidden != (tt.adminRuns == 0) {
			t.Fatalf("role %q: output %s", tt.role, out.Output)
		}
	}
}

func TestAllowsCaller(t *testing.T) {
	d := tools.Definition{Name: "t", Roles: []string{"admin"}, Tenants: []string{"acme"}}
	for _, tt := range []struct {
		tenant, role string
		want         bool
	}{{"acme", "admin", true}, {"acme", "user", false}, {"globex", "admin", false}, {"", "", false}, {"", "admin", false}} {
		if got := d.AllowsCaller(tt.tenant, tt.role); got != tt.want {
			t.Errorf("AllowsCaller(%q, %q) = %v, want %v", tt.tenant, tt.role, got, tt.want)
		}
		if f := d.Forbidden(tt.tenant, tt.role); (f == nil) != tt.want || f != nil && f.Code != tools.CodeForbidden {
			t.Errorf("Forbidden(%q, %q) = %v", tt.tenant, tt.role, f)
		}
	}
	if !(tools.Definition{}).AllowsCaller("", "") {
		t.Error("a tool without roles or tenants refuses an anonymous caller")
	}
}

func TestRolesAndTenantsMustBeTokens(t *testing.T) {
	reg := tools.NewRegistry()
	for _, d := range []tools.Definition{
		{Name: "a", Parameters: json.RawMessage(`{"type":"object"}`), Roles: []string{"admin.ops"}},
		{Name: "b", Parameters: json.RawMessage(`{"type":"object"}`), Tenants: []string{""}},
		{Name: "c", Parameters: json.RawMessage(`{"type":"object"}`), Roles: []string{"*"}},
	} {
		err := reg.AddFunc(d, func(context.Context, json.RawMessage) (any, error) { return nil, nil })
		if !errors.Is(err, tools.ErrInvalidDefinition) {
			t.Errorf("%s: %v, want invalid_definition", d.Name, err)
		}
	}
}
