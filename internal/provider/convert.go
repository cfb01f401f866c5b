package provider

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Conversions shared by the clients: the neutral message parts into the few forms the
// providers want (arguments as a string or as an object, results as text).

// argumentsText returns a call's arguments as the string OpenAI wants: the content of a
// JSON string, or the JSON text of an object. Malformed arguments a model sent are
// passed back unchanged, so that the model sees what it wrote.
func argumentsText(raw json.RawMessage) string {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 {
		return "{}"
	}
	if trimmed[0] == '"' {
		var s string
		if json.Unmarshal(trimmed, &s) == nil {
			return s
		}
	}
	return string(trimmed)
}

// argumentsObject returns a call's arguments as the object Anthropic and Ollama want.
// A JSON string holding an object is unwrapped. Arguments that are no object cannot be
// carried by these providers and are refused with ErrInvalidRequest.
func argumentsObject(call ToolCall) (json.RawMessage, error) {
	trimmed := bytes.TrimSpace(call.Arguments)
	if len(trimmed) == 0 {
		return json.RawMessage(`{}`), nil
	}
	if trimmed[0] == '"' {
		var s string
		if json.Unmarshal(trimmed, &s) == nil {
			trimmed = bytes.TrimSpace([]byte(s))
			if len(trimmed) == 0 {
				return json.RawMessage(`{}`), nil
			}
		}
	}
	if trimmed[0] != '{' || !json.Valid(trimmed) {
		return nil, fmt.Errorf("%w: tool call %s (%s): arguments are not a JSON object: %s",
			ErrInvalidRequest, call.ID, call.Name, snippet(call.Arguments))
	}
	return json.RawMessage(trimmed), nil
}

// resultText returns a tool result's content as text: a JSON string's content, or the
// JSON text of any other value.
func resultText(raw json.RawMessage) string {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 {
		return ""
	}
	if trimmed[0] == '"' {
		var s string
		if json.Unmarshal(trimmed, &s) == nil {
			return s
		}
	}
	return string(trimmed)
}

// translateTools turns definitions into a provider's shape, refusing schemas that are
// not valid JSON (the shape functions embed them verbatim).
func translateTools(defs []tools.Definition, shape func(tools.Definition) json.RawMessage) ([]json.RawMessage, error) {
	out := make([]json.RawMessage, 0, len(defs))
	for _, d := range defs {
		if !tools.NamePattern.MatchString(d.Name) {
			return nil, fmt.Errorf("%w: tool name %q does not match %s", ErrInvalidRequest, d.Name, tools.NamePattern)
		}
		t := shape(d)
		if !json.Valid(t) {
			return nil, fmt.Errorf("%w: tool %s: parameters are not valid JSON", ErrInvalidRequest, d.Name)
		}
		out = append(out, t)
	}
	return out, nil
}

// checkRequest validates what every client needs before sending.
func checkRequest(req Request) error {
	if len(req.Messages) == 0 {
		return fmt.Errorf("%w: no messages", ErrInvalidRequest)
	}
	for i, m := range req.Messages {
		switch m.Role {
		case RoleUser, RoleAssistant:
			if m.Text == "" && len(m.ToolCalls) == 0 {
				return fmt.Errorf("%w: message %d (%s) is empty", ErrInvalidRequest, i, m.Role)
			}
			if m.Role == RoleUser && len(m.ToolCalls) > 0 {
				return fmt.Errorf("%w: message %d: only assistant messages have tool calls", ErrInvalidRequest, i)
			}
		case RoleTool:
			if len(m.ToolResults) == 0 {
				return fmt.Errorf("%w: message %d (tool) has no tool results", ErrInvalidRequest, i)
			}
			for j, r := range m.ToolResults {
				if r.CallID == "" {
					return fmt.Errorf("%w: message %d, result %d has no call id", ErrInvalidRequest, i, j)
				}
			}
		default:
			return fmt.Errorf("%w: message %d has role %q; want user, assistant or tool", ErrInvalidRequest, i, m.Role)
		}
		if m.Role != RoleTool && len(m.ToolResults) > 0 {
			return fmt.Errorf("%w: message %d: only tool messages carry tool results", ErrInvalidRequest, i)
		}
	}
	return req.ToolChoice.check(req.Tools)
}

// finish sets the stop reason a response with calls must have, whatever the provider said
// (Ollama says "stop" when it calls tools).
func finish(resp *Response) *Response {
	if len(resp.Message.ToolCalls) > 0 && resp.StopReason != StopMaxTokens {
		resp.StopReason = StopToolCalls
	}
	if resp.StopReason == "" {
		resp.StopReason = StopOther
	}
	return resp
}
