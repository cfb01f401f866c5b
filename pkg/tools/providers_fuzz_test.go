package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// The provider tool-call parsers read what a model's server sent: outside input. Each
// fuzzer below feeds them arbitrary bytes and holds them to one contract: no panic;
// either an error and no calls, or calls that each name a tool, have an id and carry
// arguments in a form Hydrate reads (an object, or a JSON string); hydrating such a call
// gives a call that runs to valid JSON or an *Error with a code; and the same bytes parse
// the same way twice (generated ids are stable).

// providerSeeds wraps the odd argument cases of fuzzSeeds in each provider's shape, beside
// messages as the providers document them.
func providerSeeds(f *testing.F, wrap func(args string) string, more ...string) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(wrap(strconv.Quote(s))))
		if json.Valid([]byte(s)) {
			f.Add([]byte(wrap(s)))
		}
	}
	for _, s := range append(more, ``, ` `, `null`, `[]`, `{}`, `"x"`, `{"tool_calls":null}`, `{"tool_calls":{}}`,
		`{"tool_calls":[null]}`, `{"tool_calls":[{}]}`, `{"tool_calls":[{"function":null}]}`, `[{"type":"tool_use"}]`,
		`{"tool_calls":[{"function":{"name":"search","arguments":1}}]}`, `[null,1,"a",{}]`) {
		f.Add([]byte(s))
	}
}

func checkParsed(t *testing.T, reg *tools.Registry, parse func([]byte) ([]tools.RawCall, error), raw []byte) {
	t.Helper()
	calls, err := parse(raw)
	again, err2 := parse(raw)
	if (err == nil) != (err2 == nil) || !reflect.DeepEqual(calls, again) {
		t.Fatalf("%q parses differently twice: %v, %v / %v, %v", raw, calls, err, again, err2)
	}
	if err != nil {
		if calls != nil {
			t.Fatalf("%q: both calls %v and an error %v", raw, calls, err)
		}
		if err.Error() == "" {
			t.Fatalf("%q: an error without a message", raw)
		}
		return
	}
	for i, c := range calls {
		if c.ID == "" || c.Name == "" {
			t.Fatalf("%q: call %d has id %q and name %q; want both", raw, i, c.ID, c.Name)
		}
		args := strings.TrimSpace(string(c.Arguments))
		if !json.Valid(c.Arguments) || (args[0] != '{' && args[0] != '"') {
			t.Fatalf("%q: call %d has arguments %q, want an object or a JSON string", raw, i, c.Arguments)
		}
		for _, name := range []string{c.Name, "search", "free", "decode", "batch"} {
			hc, err := reg.Hydrate(name, c.Arguments)
			if err != nil {
				var te *tools.Error
				if !errors.As(err, &te) || te.Code == "" {
					t.Fatalf("%q: hydrating call %d as %s: %T %v is not a coded *Error", raw, i, name, err, err)
				}
				continue
			}
			if out := hc.Run(context.Background()); !json.Valid(out.Output) {
				t.Fatalf("%q: call %d as %s ran to output %q, not JSON", raw, i, name, out.Output)
			}
		}
	}
}

func FuzzParseOpenAIChatToolCalls(f *testing.F) {
	providerSeeds(f, func(args string) string {
		return `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"search","arguments":` + args + `}}]}`
	},
		`{"role":"assistant","content":"hi","refusal":null}`,
		`{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"search","arguments":""}},{"id":"c2","function":{"name":"free","arguments":{}}}]}`,
		`{"tool_calls":[{"id":"c","type":"custom","custom":{"name":"x","input":"y"}}]}`,
		`{"choices":[{"message":{"tool_calls":[]}}]}`,
		`{"tool_calls":[{"id":"c","type":"function","function":{"name":"search","arguments":"{\"query\":"}}]}`)
	reg := fuzzRegistry(f)
	f.Fuzz(func(t *testing.T, raw []byte) { checkParsed(t, reg, tools.ParseOpenAIChatToolCalls, raw) })
}

func FuzzParseAnthropicToolUses(f *testing.F) {
	providerSeeds(f, func(args string) string {
		return `[{"type":"text","text":"Let me look."},{"type":"tool_use","id":"toolu_01","name":"search","input":` + args + `}]`
	},
		`[{"type":"thinking","thinking":"...","signature":"s"},{"type":"tool_use","id":"toolu_02","name":"free","input":{}}]`,
		`[{"type":"tool_use","id":"toolu_03","name":"search"}]`,
		`[{"type":"tool_use","id":"","name":"search","input":{}}]`,
		`[{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"x"}}]`)
	reg := fuzzRegistry(f)
	f.Fuzz(func(t *testing.T, raw []byte) { checkParsed(t, reg, tools.ParseAnthropicToolUses, raw) })
}

func FuzzParseOllamaToolCalls(f *testing.F) {
	providerSeeds(f, func(args string) string {
		return `{"role":"assistant","content":"","tool_calls":[{"function":{"name":"search","arguments":` + args + `}}]}`
	},
		`{"role":"assistant","content":"","tool_calls":[{"function":{"index":0,"name":"search","arguments":{"query":"go"}}},{"function":{"index":1,"name":"search","arguments":{"query":"go"}}}]}`,
		`{"model":"llama3.1","message":{"role":"assistant","tool_calls":[]},"done":true}`,
		`{"tool_calls":[{"id":"call_x","function":{"name":"free","arguments":null}}]}`)
	reg := fuzzRegistry(f)
	f.Fuzz(func(t *testing.T, raw []byte) { checkParsed(t, reg, tools.ParseOllamaToolCalls, raw) })
}
