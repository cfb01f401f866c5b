package tools_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

const objSchema = `{"type":"object","properties":{"q":{"type":"string"}},"required":["q"],"additionalProperties":false}`

func okFunc(_ context.Context, args json.RawMessage) (any, error) { return args, nil }

// wantCode asserts err is an *Error with code whose message contains every fragment.
func wantCode(t *testing.T, err error, code tools.Code, fragments ...string) *tools.Error {
	t.Helper()
	var te *tools.Error
	if !errors.As(err, &te) {
		t.Fatalf("want *tools.Error %s, got %T %v", code, err, err)
	}
	if te.Code != code {
		t.Fatalf("code = %s, want %s (%v)", te.Code, code, err)
	}
	for _, f := range fragments {
		if !strings.Contains(te.Message, f) {
			t.Errorf("message %q does not mention %q", te.Message, f)
		}
	}
	return te
}

func TestRegistryFailsClosed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		def       tools.Definition
		fragments []string
	}{
		{"no schema", tools.Definition{Name: "a"},
			[]string{"no parameters schema", "Definition.Parameters", "allowNoSchema", "read-only", "human-approval", "full"}},
		{"null schema", tools.Definition{Name: "a", Parameters: json.RawMessage("null")},
			[]string{"no parameters schema"}},
		{"allowNoSchema without mode", tools.Definition{Name: "a", AllowNoSchema: true},
			[]string{"without a noSchemaMode", "read-only", "human-approval", "full"}},
		{"read-only mode without the read-only capability", tools.Definition{Name: "a", AllowNoSchema: true, NoSchemaMode: tools.NoSchemaReadOnly, Capabilities: []string{"streaming"}},
			[]string{`noSchemaMode "read-only"`, `capabilities: ["read-only"]`, "human-approval", "full"}},
		{"allowNoSchema with bad mode", tools.Definition{Name: "a", AllowNoSchema: true, NoSchemaMode: "yolo"},
			[]string{`noSchemaMode "yolo" is unknown`}},
		{"bad name dot", tools.Definition{Name: "math.factorial", Parameters: json.RawMessage(objSchema)},
			[]string{`"math.factorial"`, "must match"}},
		{"empty name", tools.Definition{Name: "", Parameters: json.RawMessage(objSchema)}, []string{"must match"}},
		{"long name", tools.Definition{Name: strings.Repeat("x", 65), Parameters: json.RawMessage(objSchema)}, []string{"must match"}},
		{"bad type", tools.Definition{Type: "retrieval", Name: "a", Parameters: json.RawMessage(objSchema)},
			[]string{`type must be "function"`, "retrieval"}},
		{"schema not JSON", tools.Definition{Name: "a", Parameters: json.RawMessage(`{"type":`)}, []string{"parameters is not valid JSON"}},
		{"schema not object", tools.Definition{Name: "a", Parameters: json.RawMessage(`[1]`)}, []string{"must be a JSON Schema object"}},
		{"schema does not compile", tools.Definition{Name: "a", Parameters: json.RawMessage(`{"type":"thing"}`)}, []string{"does not compile"}},
		{"bad response schema", tools.Definition{Name: "a", Parameters: json.RawMessage(objSchema), ResponseSchema: json.RawMessage(`{"minimum":"x"}`)},
			[]string{"responseSchema does not compile"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			reg := tools.NewRegistry()
			err := reg.AddFunc(tt.def, okFunc)
			wantCode(t, err, tools.CodeInvalidDefinition, tt.fragments...)
			if !errors.Is(err, tools.ErrInvalidDefinition) {
				t.Error("errors.Is(err, ErrInvalidDefinition) is false")
			}
			if reg.Len() != 0 {
				t.Errorf("registry holds %d tools after a refused registration", reg.Len())
			}
		})
	}
	t.Run("nil func", func(t *testing.T) {
		t.Parallel()
		err := tools.NewRegistry().AddFunc(tools.Definition{Name: "a", Parameters: json.RawMessage(objSchema)}, nil)
		wantCode(t, err, tools.CodeInvalidDefinition, "nil")
	})
}

func TestRegistryAcceptsValidDefinitions(t *testing.T) {
	t.Parallel()
	reg := tools.NewRegistry()
	for _, def := range []tools.Definition{
		{Name: "plain", Parameters: json.RawMessage(objSchema)},
		{Type: "function", Name: "Typed-Name_64" + strings.Repeat("x", 50), Parameters: json.RawMessage(objSchema)},
		{Name: "free", AllowNoSchema: true, NoSchemaMode: tools.NoSchemaReadOnly, Capabilities: []string{tools.CapabilityReadOnly}},
		{Name: "free-ro", AllowNoSchema: true, NoSchemaMode: tools.NoSchemaReadOnly, Capabilities: []string{"streaming", "Read-Only"}},
		{Name: "schema-ro-mode", Parameters: json.RawMessage(objSchema), NoSchemaMode: tools.NoSchemaReadOnly}, // a schema makes the mode moot
		{Name: "free2", AllowNoSchema: true, NoSchemaMode: tools.NoSchemaHumanApproval},
		{Name: "free3", AllowNoSchema: true, NoSchemaMode: tools.NoSchemaFull},
	} {
		if err := reg.AddFunc(def, okFunc); err != nil {
			t.Errorf("%s: %v", def.Name, err)
		}
	}
	d, ok := reg.Lookup("plain")
	if !ok || d.Type != "function" {
		t.Errorf("Lookup(plain) = %+v, %v; want type function", d, ok)
	}
}

func TestParametersKeptByteForByte(t *testing.T) {
	t.Parallel()
	// Odd spacing, key order, unicode escapes and a big number must all survive.
	params := []byte("{ \"type\" :\"object\",\n\t\"properties\":{\"z\":{\"type\":\"number\",\"maximum\":1e400},\"a\":{\"description\":\"caf\\u00e9\"}} }")
	resp := []byte(`{"type":"object" }`)
	orig := bytes.Clone(params)
	reg := tools.NewRegistry()
	if err := reg.AddFunc(tools.Definition{Name: "t", Parameters: params, ResponseSchema: resp}, okFunc); err != nil {
		t.Fatal(err)
	}
	params[0] = 'X' // the author's slice changing later must not change the registry
	d, _ := reg.Lookup("t")
	if !bytes.Equal(d.Parameters, orig) {
		t.Errorf("Parameters = %s, want %s", d.Parameters, orig)
	}
	if !bytes.Equal(d.ResponseSchema, resp) {
		t.Errorf("ResponseSchema = %s, want %s", d.ResponseSchema, resp)
	}
	if got := reg.Definitions()[0].Parameters; !bytes.Equal(got, orig) {
		t.Errorf("Definitions()[0].Parameters = %s", got)
	}
}

func TestReRegistrationReplaces(t *testing.T) {
	t.Parallel()
	reg := tools.NewRegistry()
	mk := func(name, answer string) {
		t.Helper()
		err := reg.AddFunc(tools.Definition{Name: name, Description: answer, Parameters: json.RawMessage(objSchema)},
			func(context.Context, json.RawMessage) (any, error) { return answer, nil })
		if err != nil {
			t.Fatal(err)
		}
	}
	mk("a", "first")
	mk("b", "b")
	mk("a", "second")
	if names := defNames(reg); names != "a,b" {
		t.Errorf("order after replacing a = %s, want a,b (a keeps its place)", names)
	}
	if d, _ := reg.Lookup("a"); d.Description != "second" {
		t.Errorf("description = %q, want second", d.Description)
	}
	c, err := reg.Hydrate("a", []byte(`{"q":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	if out := c.Run(context.Background()); string(out.Output) != `"second"` {
		t.Errorf("output = %s, want the replacement's", out.Output)
	}
	reg.Remove("a")
	reg.Remove("nope")
	if names := defNames(reg); names != "b" {
		t.Errorf("after Remove(a): %s", names)
	}
	_, err = reg.Hydrate("a", nil)
	wantCode(t, err, tools.CodeNoSuchTool, `"a"`)
}

func defNames(r *tools.Registry) string {
	var names []string
	for _, d := range r.Definitions() {
		names = append(names, d.Name)
	}
	return strings.Join(names, ",")
}

func TestOnlyAndWithout(t *testing.T) {
	t.Parallel()
	reg := tools.NewRegistry(tools.WithMaxArgumentBytes(64))
	for _, n := range []string{"a", "b", "c"} {
		if err := reg.AddFunc(tools.Definition{Name: n, Parameters: json.RawMessage(objSchema)}, okFunc); err != nil {
			t.Fatal(err)
		}
	}
	only := reg.Only("c", "a", "missing")
	without := reg.Without("b")
	if got := defNames(only); got != "a,c" {
		t.Errorf("Only(c,a) = %s, want a,c (registration order)", got)
	}
	if got := defNames(without); got != "a,c" {
		t.Errorf("Without(b) = %s, want a,c", got)
	}
	if _, err := only.Hydrate("b", []byte(`{"q":"x"}`)); !errors.Is(err, tools.ErrNoSuchTool) {
		t.Errorf("Only view hydrates b: %v", err)
	}
	if _, err := only.Hydrate("a", []byte(`{"q":"x"}`)); err != nil {
		t.Errorf("Only view cannot hydrate a: %v", err)
	}
	// A view keeps the parent's limit.
	_, err := only.Hydrate("a", []byte(`{"q":"`+strings.Repeat("x", 100)+`"}`))
	wantCode(t, err, tools.CodeInputTooLarge)
	// Views are snapshots: later changes on either side do not cross over.
	if err := reg.AddFunc(tools.Definition{Name: "d", Parameters: json.RawMessage(objSchema)}, okFunc); err != nil {
		t.Fatal(err)
	}
	reg.Remove("a")
	if got := defNames(without); got != "a,c" {
		t.Errorf("view changed after parent changed: %s", got)
	}
	without.Remove("c")
	if got := defNames(reg); got != "b,c,d" {
		t.Errorf("parent changed after view changed: %s", got)
	}
}

func TestConcurrentHydrateRunAndRegister(t *testing.T) {
	t.Parallel()
	reg := tools.NewRegistry()
	add := func(n int) {
		err := reg.AddFunc(tools.Definition{Name: fmt.Sprintf("t%d", n%4), Parameters: json.RawMessage(objSchema)},
			func(_ context.Context, args json.RawMessage) (any, error) { return n, nil })
		if err != nil {
			t.Error(err)
		}
	}
	for i := range 4 {
		add(i)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				if g == 0 && i%10 == 0 {
					add(i)
					_ = reg.Only("t1").Definitions()
					continue
				}
				c, err := reg.Hydrate(fmt.Sprintf("t%d", i%4), []byte(`{"q":"x"}`))
				if err != nil {
					t.Error(err)
					return
				}
				if out := c.Run(context.Background()); out.Err != nil || !json.Valid(out.Output) {
					t.Errorf("run: %v %s", out.Err, out.Output)
					return
				}
				if _, err := reg.Hydrate("t1", []byte(`{"q":1}`)); !errors.Is(err, tools.ErrInvalidInput) {
					t.Errorf("invalid call accepted: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if reg.Len() != 4 {
		t.Errorf("Len = %d, want 4", reg.Len())
	}
}
