package toolsfile

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

func TestRegisterRunsToolsFromAFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script(t, dir, "greet.sh", `read args; printf '{"greeting":"hello","args":%s}' "$args"`)
	script(t, dir, "fail.sh", `echo "no such user" >&2; exit 7`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":"unknown city"}`))
	}))
	t.Cleanup(srv.Close)
	p := writeFile(t, dir, "tools.json", `{"tools": [
	  {"name": "greet", "safe": true,
	   "parameters": {"type": "object", "properties": {"who": {"type": "string"}}, "required": ["who"], "additionalProperties": false},
	   "command": {"argv": ["./greet.sh"]}},
	  {"name": "fail", "parameters": {"type": "object"}, "command": {"argv": ["./fail.sh"]}},
	  {"name": "weather", "parameters": {"type": "object"}, "http": {"url": "`+srv.URL+`"}},
	  {"name": "anything", "allowNoSchema": true, "noSchemaMode": "read-only", "capabilities": ["read-only"], "command": {"argv": ["./greet.sh"]}}
	]}`)
	specs, err := Load(p)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	reg := tools.NewRegistry()
	if err := Register(reg, specs); err != nil {
		t.Fatalf("Register: %v", err)
	}

	// The schema is enforced before the command ever runs.
	if _, err := reg.Hydrate("greet", []byte(`{"who":"ann","extra":1}`)); !errors.Is(err, tools.ErrInvalidInput) {
		t.Fatalf("Hydrate with an extra field: %v, want invalid_tool_input", err)
	}
	if _, err := reg.Hydrate("greet", []byte(`{}`)); !errors.Is(err, tools.ErrInvalidInput) {
		t.Fatalf("Hydrate without who: %v, want invalid_tool_input", err)
	}

	c, err := reg.Hydrate("greet", []byte(`"{\"who\":\"ann\"}"`))
	if err != nil {
		t.Fatalf("Hydrate: %v", err)
	}
	o := c.Run(context.Background())
	if o.Err != nil || string(o.Output) != `{"greeting":"hello","args":{"who":"ann"}}` {
		t.Fatalf("greet = %s, %v", o.Output, o.Err)
	}

	c, _ = reg.Hydrate("fail", []byte(`{}`))
	o = c.Run(context.Background())
	if o.Err == nil || o.Err.Code != tools.CodeToolFailed || !strings.Contains(string(o.Output), "no such user") {
		t.Fatalf("fail = %s, %v; want tool_error with the stderr tail shown", o.Output, o.Err)
	}
	var ee *ExitError
	if !errors.As(o.Err, &ee) || ee.ExitCode != 7 {
		t.Fatalf("fail cause = %v, want exit code 7", o.Err)
	}

	c, _ = reg.Hydrate("weather", []byte(`{}`))
	o = c.Run(context.Background())
	if o.Err == nil || o.Err.Code != tools.CodeToolFailedPermanent || o.Err.Code.Retryable() {
		t.Fatalf("weather = %s, %v; want a non-retryable tool_error_permanent", o.Output, o.Err)
	}

	c, err = reg.Hydrate("anything", []byte(`{"free":["form"]}`))
	if err != nil || c.Validated() {
		t.Fatalf("Hydrate of a no-schema tool = %v, validated %v; want it accepted unvalidated", err, c.Validated())
	}
}

func TestRegisterRefuses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script(t, dir, "ok.sh", "cat")
	load := func(content string) []Spec {
		t.Helper()
		specs, err := Load(writeFile(t, dir, "tools.yaml", content))
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		return specs
	}

	reg := tools.NewRegistry()
	if err := reg.AddFunc(tools.Definition{Name: "calculator", Parameters: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, json.RawMessage) (any, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}

	err := Register(reg, load("tools:\n  - {name: calculator, parameters: {type: object}, command: {argv: [./ok.sh]}}\n"))
	if !errors.Is(err, ErrInvalidFile) || !strings.Contains(err.Error(), `"calculator" is already registered`) {
		t.Fatalf("Register over a built-in = %v", err)
	}

	// One schema that does not compile: nothing of the file stays registered.
	err = Register(reg, load(`tools:
  - {name: good, parameters: {type: object}, command: {argv: [./ok.sh]}}
  - {name: remote, parameters: {"$ref": "https://example.com/schema.json"}, command: {argv: [./ok.sh]}}
`))
	if !errors.Is(err, tools.ErrInvalidDefinition) || !strings.Contains(err.Error(), "tool 2 (remote)") {
		t.Fatalf("Register with a remote $ref = %v, want invalid_definition naming the tool", err)
	}
	if _, ok := reg.Lookup("good"); ok {
		t.Fatal("a refused file left its first tool registered")
	}

	err = Register(reg, []Spec{{Definition: tools.Definition{Name: "bare", Parameters: json.RawMessage(`{}`)}, Source: "code"}})
	if !errors.Is(err, ErrInvalidFile) || !strings.Contains(err.Error(), "exactly one runner") {
		t.Fatalf("Register of a spec without a runner = %v", err)
	}
}
