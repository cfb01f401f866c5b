package tools_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

func TestRefsOutsideTheSchemaAreRefused(t *testing.T) {
	t.Parallel()
	// Real targets exist for http and file refs, so a refusal is not just a failed fetch.
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.Write([]byte(`{"type":"string"}`))
	}))
	defer srv.Close()
	dir := t.TempDir()
	file := filepath.Join(dir, "s.json")
	if err := os.WriteFile(file, []byte(`{"type":"string"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, ref, shown string }{
		{"http", srv.URL + "/s.json", srv.URL + "/s.json"},
		{"https", "https://example.com/schemas/s.json", "https://example.com/schemas/s.json"},
		{"file", "file://" + file, "file://" + file},
		{"relative file", "s.json", "s.json"},
		{"relative path", "../defs/s.json#/x", "../defs/s.json#/x"},
		{"urn", "urn:example:s", "urn:example:s"},
		{"absolute path", file, file},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			params := `{"type":"object","properties":{"x":{"$ref":` + quote(tt.ref) + `}}}`
			err := tools.NewRegistry().AddFunc(tools.Definition{Name: "r", Parameters: json.RawMessage(params)}, okFunc)
			wantCode(t, err, tools.CodeInvalidDefinition, "outside the schema", tt.shown, "$defs")
		})
	}
	t.Run("meta-schema from the network", func(t *testing.T) {
		t.Parallel()
		params := `{"$schema":` + quote(srv.URL+"/meta") + `,"type":"object"}`
		err := tools.NewRegistry().AddFunc(tools.Definition{Name: "r", Parameters: json.RawMessage(params)}, okFunc)
		wantCode(t, err, tools.CodeInvalidDefinition, "outside the schema")
	})
	t.Run("response schema", func(t *testing.T) {
		t.Parallel()
		err := tools.NewRegistry().AddFunc(tools.Definition{Name: "r", Parameters: json.RawMessage(objSchema),
			ResponseSchema: json.RawMessage(`{"$ref":"https://example.com/out.json"}`)}, okFunc)
		wantCode(t, err, tools.CodeInvalidDefinition, "responseSchema refers to", "https://example.com/out.json")
	})
	t.Cleanup(func() {
		if n := hits.Load(); n != 0 {
			t.Errorf("the http server was fetched %d times", n)
		}
	})
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

func TestLocalRefsResolve(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, schema string
	}{
		{"$defs", `{"type":"object","properties":{"p":{"$ref":"#/$defs/point"}},"required":["p"],
			"$defs":{"point":{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]}}}`},
		{"definitions draft-07", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object",
			"properties":{"p":{"$ref":"#/definitions/point"}},"required":["p"],
			"definitions":{"point":{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]}}}`},
		{"anchor", `{"type":"object","properties":{"p":{"$ref":"#pt"}},"required":["p"],
			"$defs":{"point":{"$anchor":"pt","type":"object","properties":{"x":{"type":"integer"}},"required":["x"]}}}`},
		{"recursive", `{"type":"object","properties":{"p":{"$ref":"#/$defs/point"}},"required":["p"],
			"$defs":{"point":{"type":"object","properties":{"x":{"type":"integer"},"next":{"$ref":"#/$defs/point"}},"required":["x"]}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			reg := tools.NewRegistry()
			if err := reg.AddFunc(tools.Definition{Name: "geo", Parameters: json.RawMessage(tt.schema)}, okFunc); err != nil {
				t.Fatal(err)
			}
			if _, err := reg.Hydrate("geo", []byte(`{"p":{"x":1}}`)); err != nil {
				t.Errorf("valid call refused: %v", err)
			}
			_, err := reg.Hydrate("geo", []byte(`{"p":{"x":"one"}}`))
			te := wantCode(t, err, tools.CodeInvalidInput)
			if len(te.Violations) != 1 || te.Violations[0].Pointer != "/p/x" {
				t.Errorf("violations = %+v, want one at /p/x", te.Violations)
			}
		})
	}
}

func TestDrafts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, schema, valid, invalid string
	}{
		// Tuple items: an array of schemas is draft-07 only (2020-12 uses prefixItems).
		{"draft-07 tuple items",
			`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object",
			 "properties":{"pair":{"type":"array","items":[{"type":"string"},{"type":"integer"}],"additionalItems":false}}}`,
			`{"pair":["a",1]}`, `{"pair":[1,"a"]}`},
		// dependencies is draft-07's; 2020-12 ignores it as an unknown keyword.
		{"draft-07 dependencies",
			`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","dependencies":{"card":["cvv"]}}`,
			`{"card":"4111","cvv":"123"}`, `{"card":"4111"}`},
		// format is asserted by draft-07 by default, an annotation in 2020-12.
		{"draft-07 format asserted",
			`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"d":{"type":"string","format":"date"}}}`,
			`{"d":"2024-01-31"}`, `{"d":"31/01/2024"}`},
		{"2019-09 dependentRequired",
			`{"$schema":"https://json-schema.org/draft/2019-09/schema","type":"object","dependentRequired":{"card":["cvv"]}}`,
			`{"card":"4111","cvv":"123"}`, `{"card":"4111"}`},
		{"2020-12 prefixItems by default",
			`{"type":"object","properties":{"pair":{"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false}}}`,
			`{"pair":["a",1]}`, `{"pair":["a",1,2]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			reg := tools.NewRegistry()
			if err := reg.AddFunc(tools.Definition{Name: "d", Parameters: json.RawMessage(tt.schema)}, okFunc); err != nil {
				t.Fatal(err)
			}
			if _, err := reg.Hydrate("d", []byte(tt.valid)); err != nil {
				t.Errorf("valid %s refused: %v", tt.valid, err)
			}
			if _, err := reg.Hydrate("d", []byte(tt.invalid)); !errors.Is(err, tools.ErrInvalidInput) {
				t.Errorf("invalid %s: got %v, want invalid_tool_input", tt.invalid, err)
			}
		})
	}
	t.Run("2020-12 ignores draft-07 keywords", func(t *testing.T) {
		t.Parallel()
		reg := tools.NewRegistry()
		schema := `{"type":"object","properties":{"d":{"type":"string","format":"date"}}}`
		if err := reg.AddFunc(tools.Definition{Name: "d", Parameters: json.RawMessage(schema)}, okFunc); err != nil {
			t.Fatal(err)
		}
		if _, err := reg.Hydrate("d", []byte(`{"d":"not a date"}`)); err != nil {
			t.Errorf("2020-12 applied a draft-07 rule: %v", err)
		}
	})
	t.Run("2020-12 refuses draft-07 tuple items", func(t *testing.T) {
		t.Parallel()
		schema := `{"type":"object","properties":{"pair":{"type":"array","items":[{"type":"string"}]}}}`
		err := tools.NewRegistry().AddFunc(tools.Definition{Name: "d", Parameters: json.RawMessage(schema)}, okFunc)
		wantCode(t, err, tools.CodeInvalidDefinition, "does not compile")
		if strings.Contains(err.Error(), "mem:///") {
			t.Errorf("message leaks the internal location: %v", err)
		}
	})
}
