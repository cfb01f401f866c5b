package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

const searchSchema = `{"type":"object","properties":{
	"query":{"type":"string","minLength":1},
	"limit":{"type":"integer","minimum":1,"maximum":50},
	"a/b~c":{"type":"boolean"},
	"filters":{"type":"array","items":{"type":"object","properties":{"field":{"type":"string"}},"required":["field"]}}},
	"required":["query"],"additionalProperties":false}`

func searchRegistry(t *testing.T, opts ...tools.RegistryOption) *tools.Registry {
	t.Helper()
	reg := tools.NewRegistry(opts...)
	if err := reg.AddFunc(tools.Definition{Name: "search", Parameters: json.RawMessage(searchSchema)}, okFunc); err != nil {
		t.Fatal(err)
	}
	if err := reg.AddFunc(tools.Definition{Name: "free", AllowNoSchema: true, NoSchemaMode: tools.NoSchemaReadOnly, Capabilities: []string{tools.CapabilityReadOnly}}, okFunc); err != nil {
		t.Fatal(err)
	}
	return reg
}

func TestHydrateArgumentForms(t *testing.T) {
	t.Parallel()
	reg := searchRegistry(t)
	tests := []struct {
		name, raw, want string
	}{
		{"object", `{"query":"go"}`, `{"query":"go"}`},
		{"object with spaces", " \n{\"query\":\"go\"}\t", `{"query":"go"}`},
		{"JSON string holding an object (OpenAI)", `"{\"query\":\"go\"}"`, `{"query":"go"}`},
		{"JSON string with spaces", `"  {\"query\":\"go\"} "`, `{"query":"go"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := reg.Hydrate("search", []byte(tt.raw))
			if err != nil {
				t.Fatal(err)
			}
			if string(c.Arguments()) != tt.want {
				t.Errorf("Arguments = %s, want %s", c.Arguments(), tt.want)
			}
			if !c.Validated() || c.Definition().Name != "search" {
				t.Errorf("Validated = %v, Definition = %s", c.Validated(), c.Definition().Name)
			}
		})
	}
	for _, raw := range []string{"", "  \n", `""`, `" "`} {
		c, err := reg.Hydrate("free", []byte(raw))
		if err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
		if string(c.Arguments()) != "{}" {
			t.Errorf("%q: Arguments = %s, want {}", raw, c.Arguments())
		}
	}
	// Empty arguments are {} and still validated: search requires query.
	_, err := reg.Hydrate("search", nil)
	wantCode(t, err, tools.CodeInvalidInput, "missing property", "query")
}

func TestHydrateRefusesBadJSON(t *testing.T) {
	t.Parallel()
	reg := searchRegistry(t)
	tests := []struct {
		name, raw string
		fragments []string
	}{
		{"truncated", `{"query":"go"`, []string{"not valid JSON", "end of input", "offset 13"}},
		{"bad token", "{\n\"query\": go}", []string{"not valid JSON", "'g'", "line 2, column 10"}},
		{"trailing garbage", `{"query":"go"} x`, []string{"not valid JSON", "after the top-level value"}},
		{"string holding garbage", `"{query: go}"`, []string{"JSON string whose content is not valid JSON"}},
		{"array", `[{"query":"go"}]`, []string{"must be a JSON object, got an array"}},
		{"null", `null`, []string{"must be a JSON object, got null"}},
		{"number", `12`, []string{"must be a JSON object, got a number"}},
		{"string of a string", `"\"{}\""`, []string{"must be a JSON object, got a string"}},
		{"invalid UTF-8 outside strings", "{\"query\":\"go\"\xff}", []string{"not valid JSON", "0xff"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, tool := range []string{"search", "free"} { // no schema still needs an object
				_, err := reg.Hydrate(tool, []byte(tt.raw))
				te := wantCode(t, err, tools.CodeInvalidInput, tt.fragments...)
				if !strings.Contains(te.Message, `"`+tool+`"`) {
					t.Errorf("message %q does not name the tool", te.Message)
				}
			}
		})
	}
}

func TestHydrateReportsEveryViolation(t *testing.T) {
	t.Parallel()
	reg := searchRegistry(t)
	raw := `{"limit":0,"a/b~c":"yes","filters":[{"field":"x"},{}],"extra":1}`
	_, err := reg.Hydrate("search", []byte(raw))
	te := wantCode(t, err, tools.CodeInvalidInput, `arguments of "search" do not match its schema`)
	got := map[string]string{}
	var pointers []string
	for _, v := range te.Violations {
		got[v.Pointer] += v.Message + ";"
		pointers = append(pointers, v.Pointer)
	}
	sort.Strings(pointers)
	want := map[string]string{
		"":           "missing property 'query'",
		"/limit":     "minimum",
		"/a~1b~0c":   "want boolean",
		"/filters/1": "missing property 'field'",
	}
	for p, frag := range want {
		if !strings.Contains(got[p], frag) {
			t.Errorf("violation at %q = %q, want it to mention %q (all: %v)", p, got[p], frag, te.Violations)
		}
	}
	if !strings.Contains(got[""], "extra") {
		t.Errorf("the unknown argument is not reported: %v", te.Violations)
	}
	if len(te.Violations) != 5 {
		t.Errorf("%d violations, want 5: %v", len(te.Violations), pointers)
	}
	// The model-facing form carries them.
	var shown struct {
		Error struct {
			Code       string `json:"code"`
			Violations []tools.Violation
		} `json:"error"`
	}
	if err := json.Unmarshal(te.ForModel(), &shown); err != nil || shown.Error.Code != "invalid_tool_input" || len(shown.Error.Violations) != 5 {
		t.Errorf("ForModel = %s (%v)", te.ForModel(), err)
	}
}

func TestHydrateSizeLimit(t *testing.T) {
	t.Parallel()
	reg := searchRegistry(t, tools.WithMaxArgumentBytes(32))
	// Over the limit and not even JSON: the size is checked first.
	_, err := reg.Hydrate("search", []byte(`{"query":"`+strings.Repeat("x", 40)))
	wantCode(t, err, tools.CodeInputTooLarge, "50 bytes", "limit is 32 bytes")
	// Also for an unknown tool: nothing bigger than the limit is looked at.
	_, err = reg.Hydrate("nope", make([]byte, 33))
	wantCode(t, err, tools.CodeInputTooLarge)
	if _, err := reg.Hydrate("search", []byte(`{"query":"`+strings.Repeat("x", 20)+`"}`)); err != nil {
		t.Errorf("32 bytes refused: %v", err)
	}

	def := searchRegistry(t) // default: 1 MiB
	big := `{"query":"` + strings.Repeat("x", 1<<20) + `"}`
	_, err = def.Hydrate("search", []byte(big))
	wantCode(t, err, tools.CodeInputTooLarge, "limit is 1048576 bytes")
	if _, err := def.Hydrate("search", []byte(big[:1<<20-2]+`"}`)); err != nil {
		t.Errorf("exactly 1 MiB refused: %v", err)
	}
	// WithMaxArgumentBytes(0) keeps the default.
	if _, err := searchRegistry(t, tools.WithMaxArgumentBytes(0)).Hydrate("search", []byte(big)); !errors.Is(err, tools.ErrInputTooLarge) {
		t.Errorf("limit 0: %v", err)
	}
}

func TestHydrateUnknownTool(t *testing.T) {
	t.Parallel()
	reg := searchRegistry(t)
	_, err := reg.Hydrate("delete_everything", []byte(`{}`))
	te := wantCode(t, err, tools.CodeNoSuchTool, `"delete_everything"`)
	if strings.Contains(te.Message, "search") || strings.Contains(te.Message, "free") {
		t.Errorf("message lists registered tools: %q", te.Message)
	}
}

func TestNoSchemaToolsAreNotValidated(t *testing.T) {
	t.Parallel()
	reg := searchRegistry(t)
	c, err := reg.Hydrate("free", []byte(`{"anything":[1,2,{"x":null}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Validated() {
		t.Error("Validated() = true for an allowNoSchema tool")
	}
	if out := c.Run(context.Background()); string(out.Output) != `{"anything":[1,2,{"x":null}]}` {
		t.Errorf("output = %s", out.Output)
	}
}

// counted counts its instantiations: its UnmarshalJSON runs once per instance.
type counted struct {
	Q string `json:"q"`
}

var countedMade atomic.Int32

func (c *counted) UnmarshalJSON(b []byte) error {
	countedMade.Add(1)
	type plain counted
	return json.Unmarshal(b, (*plain)(c))
}

func (counted) Definition() tools.Definition {
	return tools.Definition{Name: "counted", Parameters: json.RawMessage(objSchema)}
}

var countedRuns atomic.Int32

func (c *counted) Run(context.Context) (any, error) { countedRuns.Add(1); return c.Q, nil }

func TestFailedHydrationInstantiatesNothing(t *testing.T) {
	reg := tools.NewRegistry()
	tools.MustAdd[counted](reg)
	for _, raw := range []string{`{"q":1}`, `{"q":"x"`, `[]`, `{"q":"x","z":1}`} {
		if c, err := reg.Hydrate("counted", []byte(raw)); err == nil || c != nil {
			t.Errorf("%s: got a call", raw)
		}
	}
	if n := countedMade.Load(); n != 0 {
		t.Errorf("%d instances made by failed hydrations", n)
	}
	c, err := reg.Hydrate("counted", []byte(`{"q":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	if countedMade.Load() != 1 || countedRuns.Load() != 0 {
		t.Errorf("after hydration: made %d, ran %d; want 1, 0", countedMade.Load(), countedRuns.Load())
	}
	if out := c.Run(context.Background()); string(out.Output) != `"x"` || countedRuns.Load() != 1 {
		t.Errorf("run: %s, runs %d", out.Output, countedRuns.Load())
	}
}
