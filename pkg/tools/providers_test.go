package tools

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// weatherSchema keeps odd but valid formatting on purpose: it must reach the provider
// exactly as written, not re-encoded.
const weatherSchema = `{
  "type": "object",
  "properties": {"city": {"type": "string", "description": "City name, e.g. \u00c9vry"},
                 "units": {"enum": ["metric", "imperial"]}},
  "required": ["city"],
  "additionalProperties": false
}`

func weatherDefinition() Definition {
	return Definition{Type: "function", Name: "get_weather", Description: `Current weather; "quotes" & <tags>`,
		Parameters: json.RawMessage(weatherSchema), Strict: true, Safe: true, Tags: []string{"weather"},
		Timeout: Duration(3 * time.Second), Retry: &RetryPolicy{Multiplier: 3},
		ResponseSchema: json.RawMessage(`{"type":"object"}`)}
}

func decodeAny(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("output is not valid JSON: %v\n%s", err, b)
	}
	return v
}

func TestProviderShapes(t *testing.T) {
	t.Parallel()
	schema := decodeAny(t, []byte(weatherSchema))
	desc := `Current weather; "quotes" & <tags>`
	tests := []struct {
		name      string
		translate func(Definition) json.RawMessage
		want      any
	}{
		{"openai chat", OpenAIChatTool, map[string]any{"type": "function", "function": map[string]any{
			"name": "get_weather", "description": desc, "parameters": schema, "strict": true}}},
		{"openai responses", OpenAIResponsesTool, map[string]any{"type": "function",
			"name": "get_weather", "description": desc, "parameters": schema, "strict": true}},
		{"anthropic", AnthropicTool, map[string]any{"name": "get_weather", "description": desc, "input_schema": schema}},
		{"ollama", OllamaTool, map[string]any{"type": "function", "function": map[string]any{
			"name": "get_weather", "description": desc, "parameters": schema}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := weatherDefinition()
			before, err := json.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			params := bytes.Clone(d.Parameters)
			out := tt.translate(d)
			if got := decodeAny(t, out); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("shape:\n got %s\nwant %v", out, tt.want)
			}
			// The schema is embedded verbatim, whitespace and escapes included.
			if !bytes.Contains(out, []byte(weatherSchema)) {
				t.Errorf("output does not contain the schema byte for byte:\n%s", out)
			}
			after, _ := json.Marshal(d)
			if !bytes.Equal(before, after) || !bytes.Equal(params, d.Parameters) {
				t.Errorf("translation changed the definition:\nbefore %s\n after %s", before, after)
			}
			// The output must not alias the definition's schema: changing it must not
			// change the definition.
			for i := range out {
				out[i] = ' '
			}
			if !bytes.Equal(params, d.Parameters) {
				t.Errorf("output aliases the definition's Parameters")
			}
		})
	}
}

func TestProviderShapesNoSchemaAndNotStrict(t *testing.T) {
	t.Parallel()
	d := Definition{Name: "ping", AllowNoSchema: true, NoSchemaMode: NoSchemaReadOnly}
	wantSchema := map[string]any{"type": "object"}
	chat := decodeAny(t, OpenAIChatTool(d)).(map[string]any)["function"].(map[string]any)
	if !reflect.DeepEqual(chat["parameters"], wantSchema) {
		t.Errorf("openai chat parameters = %v, want %v", chat["parameters"], wantSchema)
	}
	if _, ok := chat["description"]; ok {
		t.Errorf("empty description should be left out: %v", chat)
	}
	// strict:false must be explicit: the Responses API reads an absent strict as true.
	resp := decodeAny(t, OpenAIResponsesTool(d)).(map[string]any)
	if resp["strict"] != false {
		t.Errorf("responses strict = %v, want false", resp["strict"])
	}
	if got := decodeAny(t, AnthropicTool(d)).(map[string]any)["input_schema"]; !reflect.DeepEqual(got, wantSchema) {
		t.Errorf("anthropic input_schema = %v", got)
	}
	ollama := decodeAny(t, OllamaTool(d)).(map[string]any)["function"].(map[string]any)
	if !reflect.DeepEqual(ollama["parameters"], wantSchema) {
		t.Errorf("ollama parameters = %v", ollama["parameters"])
	}
	if _, ok := ollama["strict"]; ok {
		t.Errorf("ollama has no strict mode: %v", ollama)
	}
	d.Parameters = json.RawMessage(" null ")
	if got := decodeAny(t, OllamaTool(d)).(map[string]any)["function"].(map[string]any)["parameters"]; !reflect.DeepEqual(got, wantSchema) {
		t.Errorf("null parameters should read as no schema, got %v", got)
	}
}

func TestParseOpenAIChatToolCalls(t *testing.T) {
	t.Parallel()
	// choices[0].message of a Chat Completions response with two parallel calls.
	msg := `{"role":"assistant","content":null,"tool_calls":[
	  {"id":"call_abc","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},
	  {"id":"call_def","type":"function","function":{"name":"get_time","arguments":"{\"zone\":\"Europe/Paris\"}"}}],
	  "refusal":null}`
	calls, err := ParseOpenAIChatToolCalls([]byte(msg))
	if err != nil {
		t.Fatal(err)
	}
	want := []RawCall{
		{ID: "call_abc", Name: "get_weather", Arguments: json.RawMessage(`"{\"city\":\"Paris\"}"`)},
		{ID: "call_def", Name: "get_time", Arguments: json.RawMessage(`"{\"zone\":\"Europe/Paris\"}"`)},
	}
	if !reflect.DeepEqual(calls, want) {
		t.Fatalf("calls = %s, want %s", mustJSON(calls), mustJSON(want))
	}

	calls, err = ParseOpenAIChatToolCalls([]byte(`{"role":"assistant","content":"Hello"}`))
	if err != nil || len(calls) != 0 {
		t.Fatalf("text-only message: calls=%v err=%v", calls, err)
	}

	// Compatible servers: no id, empty-string or object arguments.
	calls, err = ParseOpenAIChatToolCalls([]byte(`{"tool_calls":[{"function":{"name":"ping","arguments":""}},{"function":{"name":"add","arguments":{"a":1}}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(calls[0].Arguments) != `{}` || string(calls[1].Arguments) != `{"a":1}` {
		t.Errorf("arguments = %s, %s", calls[0].Arguments, calls[1].Arguments)
	}
	if calls[0].ID == "" || calls[0].ID == calls[1].ID {
		t.Errorf("generated ids must be present and distinct: %q %q", calls[0].ID, calls[1].ID)
	}
	again, _ := ParseOpenAIChatToolCalls([]byte(`{"tool_calls":[{"function":{"name":"ping","arguments":""}},{"function":{"name":"add","arguments":{"a":1}}}]}`))
	if again[0].ID != calls[0].ID || again[1].ID != calls[1].ID {
		t.Errorf("generated ids are not stable: %v vs %v", again, calls)
	}

	// A malformed argument string is kept as sent: hydration reports it to the model.
	calls, err = ParseOpenAIChatToolCalls([]byte(`{"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":"}}]}`))
	if err != nil || string(calls[0].Arguments) != `"{\"a\":"` {
		t.Errorf("malformed argument string: calls=%v err=%v", calls, err)
	}
}

func TestParseAnthropicToolUses(t *testing.T) {
	t.Parallel()
	content := `[{"type":"text","text":"Let me check both."},
	  {"type":"tool_use","id":"toolu_01A","name":"get_weather","input":{"city":"Paris"}},
	  {"type":"tool_use","id":"toolu_01B","name":"get_time","input":{"zone":"Europe/Paris"}},
	  {"type":"tool_use","id":"toolu_01C","name":"ping","input":{}}]`
	calls, err := ParseAnthropicToolUses([]byte(content))
	if err != nil {
		t.Fatal(err)
	}
	want := []RawCall{
		{ID: "toolu_01A", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)},
		{ID: "toolu_01B", Name: "get_time", Arguments: json.RawMessage(`{"zone":"Europe/Paris"}`)},
		{ID: "toolu_01C", Name: "ping", Arguments: json.RawMessage(`{}`)},
	}
	if !reflect.DeepEqual(calls, want) {
		t.Fatalf("calls = %s, want %s", mustJSON(calls), mustJSON(want))
	}
	calls, err = ParseAnthropicToolUses([]byte(`[{"type":"text","text":"Done."}]`))
	if err != nil || len(calls) != 0 {
		t.Fatalf("text-only content: calls=%v err=%v", calls, err)
	}
}

func TestParseOllamaToolCalls(t *testing.T) {
	t.Parallel()
	msg := `{"role":"assistant","content":"","tool_calls":[
	  {"function":{"name":"get_weather","arguments":{"city":"Paris","units":"metric"}}},
	  {"function":{"index":1,"name":"get_weather","arguments":{"city":"Lyon"}}},
	  {"id":"call_x1","function":{"name":"get_time","arguments":{"zone":"Europe/Paris"}}}]}`
	calls, err := ParseOllamaToolCalls([]byte(msg))
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 3 {
		t.Fatalf("got %d calls, want 3", len(calls))
	}
	if string(calls[0].Arguments) != `{"city":"Paris","units":"metric"}` || calls[0].Name != "get_weather" {
		t.Errorf("call 0 = %+v", calls[0])
	}
	if !strings.HasPrefix(calls[0].ID, "ollama_0_") || !strings.HasPrefix(calls[1].ID, "ollama_1_") || calls[0].ID == calls[1].ID {
		t.Errorf("generated ids = %q, %q", calls[0].ID, calls[1].ID)
	}
	if calls[2].ID != "call_x1" {
		t.Errorf("an id the server sent must be kept, got %q", calls[2].ID)
	}
	again, _ := ParseOllamaToolCalls([]byte(msg))
	if !reflect.DeepEqual(again, calls) {
		t.Errorf("parsing the same message twice gave different ids: %v vs %v", again, calls)
	}
}

func TestParseToolCallsErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		parse   func([]byte) ([]RawCall, error)
		in      string
		wantErr string
	}{
		{"openai empty", ParseOpenAIChatToolCalls, ``, "empty input"},
		{"openai not json", ParseOpenAIChatToolCalls, `{"tool_calls":[`, "unexpected end"},
		{"openai array", ParseOpenAIChatToolCalls, `[]`, "got an array"},
		{"openai whole completion", ParseOpenAIChatToolCalls, `{"choices":[{"message":{}}]}`, "pass choices[i].message"},
		{"openai no name", ParseOpenAIChatToolCalls, `{"tool_calls":[{"id":"a","type":"function","function":{"arguments":"{}"}}]}`, "tool_calls[0].function has no name"},
		{"openai no function", ParseOpenAIChatToolCalls, `{"tool_calls":[{"id":"a","type":"function"}]}`, "tool_calls[0] has no function"},
		{"openai custom type", ParseOpenAIChatToolCalls, `{"tool_calls":[{"id":"a","type":"custom","custom":{"name":"x","input":"y"}}]}`, `type "custom"`},
		{"openai number args", ParseOpenAIChatToolCalls, `{"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":42}}]}`, "got a number"},
		{"openai tool_calls not array", ParseOpenAIChatToolCalls, `{"tool_calls":{}}`, "cannot unmarshal"},
		{"anthropic object", ParseAnthropicToolUses, `{"type":"tool_use"}`, "want the content array"},
		{"anthropic empty", ParseAnthropicToolUses, ` `, "empty input"},
		{"anthropic no id", ParseAnthropicToolUses, `[{"type":"tool_use","name":"f","input":{}}]`, "content[0] (tool_use) has no id"},
		{"anthropic no name", ParseAnthropicToolUses, `[{"type":"text","text":"x"},{"type":"tool_use","id":"t","input":{}}]`, "content[1] (tool_use) has no name"},
		{"anthropic string input", ParseAnthropicToolUses, `[{"type":"tool_use","id":"t","name":"f","input":"{}"}]`, "want an object, got a string"},
		{"anthropic array input", ParseAnthropicToolUses, `[{"type":"tool_use","id":"t","name":"f","input":[1]}]`, "content[0].input: want an object, got an array"},
		{"ollama whole response", ParseOllamaToolCalls, `{"model":"llama3.1","message":{"role":"assistant"},"done":true}`, `pass its "message"`},
		{"ollama no name", ParseOllamaToolCalls, `{"tool_calls":[{"function":{"arguments":{}}}]}`, "tool_calls[0].function has no name"},
		{"ollama bool args", ParseOllamaToolCalls, `{"tool_calls":[{"function":{"name":"f","arguments":true}}]}`, "got a boolean"},
		{"ollama string", ParseOllamaToolCalls, `"hi"`, "got a string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			calls, err := tt.parse([]byte(tt.in))
			if err == nil {
				t.Fatalf("want an error containing %q, got calls %v", tt.wantErr, calls)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %q does not contain %q", err, tt.wantErr)
			}
		})
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
