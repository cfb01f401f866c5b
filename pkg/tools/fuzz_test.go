package tools_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// fuzzSeeds are the odd cases models and networks produce.
var fuzzSeeds = []string{
	`{"query":"go","limit":5}`,
	`"{\"query\":\"go\"}"`,            // arguments as a JSON string (OpenAI)
	`"\"{\\\"query\\\":1}\""`,         // a string of a string
	`{"query":"go"`,                   // truncated
	`{"query":"go","limit":1e999999}`, // huge number
	`{"query":"go","limit":12345678901234567890123}`,
	`{"query":"go","limit":-0.0e-0}`,
	`{"query":"\ud800","a/b~c":true}`, // lone surrogate
	"{\"query\":\"\xff\xfe\"}",        // invalid UTF-8
	strings.Repeat("[", 20000),        // deep nesting
	`{"filters":` + strings.Repeat(`[`, 200) + strings.Repeat(`]`, 200) + `}`,
	`null`, `[]`, `[{"query":"go"}]`, `""`, ` `, `0`, `true`,
	`{"query":"go","query":"again"}`, // duplicate keys
	`{"calls":[{"name":"search","args":{"query":"x"}},{"name":"nope","args":{}}]}`,
	`{"s":"x","i":9223372036854775808,"a":[1,{"b":null}],"CASE":"c"}`,
}

func fuzzRegistry(t testing.TB) *tools.Registry {
	reg := tools.NewRegistry(tools.WithMaxArgumentBytes(64 << 10))
	for _, def := range []tools.Definition{
		{Name: "search", Parameters: json.RawMessage(searchSchema)},
		{Name: "free", AllowNoSchema: true, NoSchemaMode: tools.NoSchemaReadOnly, Capabilities: []string{tools.CapabilityReadOnly}},
	} {
		if err := reg.AddFunc(def, okFunc); err != nil {
			t.Fatal(err)
		}
	}
	tools.MustAdd[decodeCase](reg)
	if err := reg.AddComposite("batch", "", []string{"search", "free"}); err != nil {
		t.Fatal(err)
	}
	return reg
}

// FuzzHydrate feeds arbitrary bytes to every kind of tool: hydration never panics, and
// answers either a call that runs to valid JSON or an *Error with a code it may use. The
// fast validation path never accepts what the compiled validator refuses.
func FuzzHydrate(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	reg := fuzzRegistry(f)
	allowed := map[tools.Code]bool{tools.CodeInvalidInput: true, tools.CodeInputTooLarge: true}
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, name := range []string{"search", "free", "decode", "batch", "missing"} {
			c, err := reg.Hydrate(name, raw)
			if err != nil {
				var te *tools.Error
				if !errors.As(err, &te) {
					t.Fatalf("%s: %T %v is not an *Error", name, err, err)
				}
				if name == "decode" && strings.Contains(te.Message, "cannot be decoded") {
					var want decodeCase
					if json.Unmarshal(raw, &want) == nil && json.Valid(raw) && bytes.HasPrefix(bytes.TrimSpace(raw), []byte("{")) {
						t.Fatalf("%q: refused (%v), encoding/json decodes it", raw, err)
					}
				}
				if !allowed[te.Code] && !(name == "missing" && te.Code == tools.CodeNoSuchTool) {
					t.Fatalf("%s: unexpected code %s: %v", name, te.Code, err)
				}
				if c != nil {
					t.Fatalf("%s: both a call and an error", name)
				}
				continue
			}
			if !json.Valid(c.Arguments()) {
				t.Fatalf("%s: arguments %q are not JSON", name, c.Arguments())
			}
			out := c.Run(context.Background())
			if !json.Valid(out.Output) {
				t.Fatalf("%s: output %q is not JSON", name, out.Output)
			}
			if name == "decode" { // the direct decoder gives what encoding/json gives
				var want decodeCase
				if err := json.Unmarshal(c.Arguments(), &want); err != nil {
					t.Fatalf("decoded %q, encoding/json refuses it: %v", raw, err)
				}
				if b, _ := json.Marshal(want); !bytes.Equal(b, out.Output) {
					t.Fatalf("%q: decoded to %s, encoding/json to %s", raw, out.Output, b)
				}
			}
		}
		if covered, fast, full := reg.FastAndFull("search", raw); covered && fast && !full {
			t.Fatalf("fast path accepts %q, the validator refuses it", raw)
		}
	})
}
