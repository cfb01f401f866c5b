package tools

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
)

// Provider shapes: the same Definition as each model provider wants to see it, and the
// provider's tool calls read back into RawCall values ready for Registry.Hydrate.
//
// The Parameters schema is copied into the output byte for byte (not re-encoded), so what
// a provider is shown is exactly the contract calls are validated against. A Definition
// without a schema (AllowNoSchema) is shown as {"type":"object"}, the loosest schema every
// provider accepts. Translation reads the Definition and never changes it.

// emptyObjectSchema stands in for a missing schema: providers require an object schema.
var emptyObjectSchema = []byte(`{"type":"object"}`)

// OpenAIChatTool returns d in the OpenAI Chat Completions shape:
// {"type":"function","function":{"name","description","parameters","strict"}}.
// The same shape serves vLLM, llama.cpp server, LM Studio and Ollama's /v1.
func OpenAIChatTool(d Definition) json.RawMessage {
	var b bytes.Buffer
	b.WriteString(`{"type":"function","function":{`)
	writeNameDescription(&b, d)
	b.WriteString(`,"parameters":`)
	b.Write(schemaOf(d))
	writeStrict(&b, d)
	b.WriteString(`}}`)
	return b.Bytes()
}

// OpenAIResponsesTool returns d in the flat shape of the OpenAI Responses API:
// {"type":"function","name","description","parameters","strict"}. strict is always
// written because the Responses API treats an absent strict as true.
func OpenAIResponsesTool(d Definition) json.RawMessage {
	var b bytes.Buffer
	b.WriteString(`{"type":"function",`)
	writeNameDescription(&b, d)
	b.WriteString(`,"parameters":`)
	b.Write(schemaOf(d))
	writeStrict(&b, d)
	b.WriteString(`}`)
	return b.Bytes()
}

// AnthropicTool returns d in the Anthropic Messages shape: {"name","description","input_schema"}.
func AnthropicTool(d Definition) json.RawMessage {
	var b bytes.Buffer
	b.WriteString(`{`)
	writeNameDescription(&b, d)
	b.WriteString(`,"input_schema":`)
	b.Write(schemaOf(d))
	b.WriteString(`}`)
	return b.Bytes()
}

// OllamaTool returns d in the shape of Ollama's native /api/chat:
// {"type":"function","function":{"name","description","parameters"}}. Ollama has no
// strict mode, so strict is left out.
func OllamaTool(d Definition) json.RawMessage {
	var b bytes.Buffer
	b.WriteString(`{"type":"function","function":{`)
	writeNameDescription(&b, d)
	b.WriteString(`,"parameters":`)
	b.Write(schemaOf(d))
	b.WriteString(`}}`)
	return b.Bytes()
}

func writeNameDescription(b *bytes.Buffer, d Definition) {
	b.WriteString(`"name":`)
	b.Write(jsonString(d.Name))
	if d.Description != "" {
		b.WriteString(`,"description":`)
		b.Write(jsonString(d.Description))
	}
}

func writeStrict(b *bytes.Buffer, d Definition) {
	b.WriteString(`,"strict":`)
	b.WriteString(strconv.FormatBool(d.Strict))
}

// schemaOf returns the schema bytes to embed: the Parameters as given, or the empty
// object schema. It returns the slice itself; callers only copy from it.
func schemaOf(d Definition) []byte {
	if len(bytes.TrimSpace(d.Parameters)) == 0 || string(bytes.TrimSpace(d.Parameters)) == "null" {
		return emptyObjectSchema
	}
	return d.Parameters
}

func jsonString(s string) []byte {
	b, _ := json.Marshal(s) // a string always marshals
	return b
}

// RawCall is one tool call as a provider returned it, before hydration.
type RawCall struct {
	// ID identifies the call within the model's turn; tool results refer to it.
	ID string `json:"id"`
	// Name is the tool the model asked for.
	Name string `json:"name"`
	// Arguments are as the provider sent them: a JSON string holding an object (OpenAI)
	// or an object (Anthropic, Ollama). Registry.Hydrate accepts both.
	Arguments json.RawMessage `json:"arguments"`
}

// ParseOpenAIChatToolCalls reads the tool calls of an OpenAI Chat Completions assistant
// message (choices[i].message): tool_calls[].{id,type,function:{name,arguments}}, where
// arguments is a JSON string. A message without tool_calls yields no calls and no error.
// Compatible servers that send arguments as an object, or an empty string for a call
// without arguments, are accepted too; a missing id gets a stable generated one.
func ParseOpenAIChatToolCalls(message []byte) ([]RawCall, error) {
	var m struct {
		Choices   json.RawMessage `json:"choices"`
		ToolCalls []struct {
			ID       string `json:"id"`
			Type     string `json:"type"`
			Function *struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	}
	if err := decodeObject(message, &m, "OpenAI assistant message"); err != nil {
		return nil, err
	}
	if m.Choices != nil {
		return nil, fmt.Errorf("parse OpenAI tool calls: got a whole chat completion; pass choices[i].message")
	}
	calls := make([]RawCall, 0, len(m.ToolCalls))
	for i, tc := range m.ToolCalls {
		if tc.Type != "" && tc.Type != "function" {
			return nil, fmt.Errorf("parse OpenAI tool calls: tool_calls[%d] has type %q; only \"function\" calls are supported", i, tc.Type)
		}
		if tc.Function == nil {
			return nil, fmt.Errorf("parse OpenAI tool calls: tool_calls[%d] has no function", i)
		}
		if tc.Function.Name == "" {
			return nil, fmt.Errorf("parse OpenAI tool calls: tool_calls[%d].function has no name", i)
		}
		args, err := providerArguments(tc.Function.Arguments, true)
		if err != nil {
			return nil, fmt.Errorf("parse OpenAI tool calls: tool_calls[%d].function.arguments: %w", i, err)
		}
		calls = append(calls, RawCall{ID: idOr(tc.ID, "call", i, tc.Function.Name, args),
			Name: tc.Function.Name, Arguments: args})
	}
	return calls, nil
}

// ParseAnthropicToolUses reads the tool_use blocks of an Anthropic Messages content array
// ([{"type":"text",...},{"type":"tool_use","id","name","input"}]); other block types
// (text, thinking) are skipped. input must be an object.
func ParseAnthropicToolUses(content []byte) ([]RawCall, error) {
	var blocks []struct {
		Type  string          `json:"type"`
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	}
	trimmed := bytes.TrimSpace(content)
	if len(trimmed) == 0 {
		return nil, fmt.Errorf("parse Anthropic tool uses: empty input; want the content array of a message")
	}
	if trimmed[0] != '[' {
		return nil, fmt.Errorf("parse Anthropic tool uses: want the content array of a message, got %s", describeJSON(trimmed))
	}
	if err := json.Unmarshal(trimmed, &blocks); err != nil {
		return nil, fmt.Errorf("parse Anthropic tool uses: %w", err)
	}
	var calls []RawCall
	for i, bl := range blocks {
		if bl.Type != "tool_use" {
			continue
		}
		if bl.ID == "" {
			return nil, fmt.Errorf("parse Anthropic tool uses: content[%d] (tool_use) has no id", i)
		}
		if bl.Name == "" {
			return nil, fmt.Errorf("parse Anthropic tool uses: content[%d] (tool_use) has no name", i)
		}
		args, err := providerArguments(bl.Input, false)
		if err != nil {
			return nil, fmt.Errorf("parse Anthropic tool uses: content[%d].input: %w", i, err)
		}
		calls = append(calls, RawCall{ID: bl.ID, Name: bl.Name, Arguments: args})
	}
	return calls, nil
}

// ParseOllamaToolCalls reads the tool calls of an Ollama /api/chat message:
// tool_calls[].function.{name,arguments}, where arguments is an object. Ollama often
// sends no call id; such calls get a stable id derived from their position, name and
// arguments ("ollama_<index>_<hash>"), unique within the message and the same every time
// the same message is parsed. It is not unique across messages: callers that need a
// globally unique id (an event id) must scope it, e.g. with the run and step.
func ParseOllamaToolCalls(message []byte) ([]RawCall, error) {
	var m struct {
		Message   json.RawMessage `json:"message"`
		ToolCalls []struct {
			ID       string `json:"id"`
			Function *struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	}
	if err := decodeObject(message, &m, "Ollama message"); err != nil {
		return nil, err
	}
	if m.Message != nil && m.ToolCalls == nil {
		return nil, fmt.Errorf("parse Ollama tool calls: got a whole chat response; pass its \"message\"")
	}
	calls := make([]RawCall, 0, len(m.ToolCalls))
	for i, tc := range m.ToolCalls {
		if tc.Function == nil {
			return nil, fmt.Errorf("parse Ollama tool calls: tool_calls[%d] has no function", i)
		}
		if tc.Function.Name == "" {
			return nil, fmt.Errorf("parse Ollama tool calls: tool_calls[%d].function has no name", i)
		}
		args, err := providerArguments(tc.Function.Arguments, true)
		if err != nil {
			return nil, fmt.Errorf("parse Ollama tool calls: tool_calls[%d].function.arguments: %w", i, err)
		}
		calls = append(calls, RawCall{ID: idOr(tc.ID, "ollama", i, tc.Function.Name, args),
			Name: tc.Function.Name, Arguments: args})
	}
	return calls, nil
}

// decodeObject unmarshals a JSON object, with errors that name what was expected.
func decodeObject(data []byte, v any, what string) error {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return fmt.Errorf("parse tool calls: empty input; want an %s object", what)
	}
	if trimmed[0] != '{' {
		return fmt.Errorf("parse tool calls: want an %s object, got %s", what, describeJSON(trimmed))
	}
	if err := json.Unmarshal(trimmed, v); err != nil {
		return fmt.Errorf("parse tool calls: %s: %w", what, err)
	}
	return nil
}

// providerArguments checks the arguments' form and returns them as sent. A missing or
// null value, or (when strings are allowed) an empty string, means "no arguments": {}.
// The content of a string is not checked: a model's malformed JSON must reach hydration,
// which reports it to the model as invalid input so that it can repair the call.
func providerArguments(raw json.RawMessage, allowString bool) (json.RawMessage, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || string(trimmed) == "null" || string(trimmed) == `""` {
		return json.RawMessage(`{}`), nil
	}
	switch trimmed[0] {
	case '{':
		if !json.Valid(trimmed) {
			return nil, fmt.Errorf("not valid JSON")
		}
		return append(json.RawMessage(nil), trimmed...), nil
	case '"':
		if !allowString {
			return nil, fmt.Errorf("want an object, got a string")
		}
		var s string
		if err := json.Unmarshal(trimmed, &s); err != nil {
			return nil, fmt.Errorf("not a valid JSON string: %w", err)
		}
		return append(json.RawMessage(nil), trimmed...), nil
	}
	return nil, fmt.Errorf("want an object%s, got %s", map[bool]string{true: " or a JSON string holding one"}[allowString], describeJSON(trimmed))
}

// idOr returns id, or a stable id for a call that came without one.
func idOr(id, prefix string, index int, name string, args []byte) string {
	if id != "" {
		return id
	}
	h := sha256.New()
	h.Write([]byte(name))
	h.Write([]byte{0})
	h.Write(args)
	return fmt.Sprintf("%s_%d_%s", prefix, index, hex.EncodeToString(h.Sum(nil))[:12])
}

// describeJSON names the kind of a JSON value for error messages.
func describeJSON(b []byte) string {
	if len(b) == 0 {
		return "nothing"
	}
	switch b[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	if b[0] == '-' || (b[0] >= '0' && b[0] <= '9') {
		return "a number"
	}
	return "invalid JSON"
}
