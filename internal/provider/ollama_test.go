package provider_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/internal/testsupport/providertest"
)

// Fixtures written from Ollama's API reference (docs/api.md, "Generate a chat
// completion"): a chat response whose message.tool_calls[].function.arguments is an
// object and carries no id; a stream of JSON lines ending with "done":true and the eval
// counts; error bodies {"error":"..."}.
var ollamaHarness = providertest.Harness{
	Name: "ollama",
	Path: "/api/chat",
	New:  newAt(provider.NewOllama, ""),
	CheckHeaders: func(t *testing.T, h http.Header) {
		// Ollama itself needs no key; one given is sent as a bearer token for a proxy.
		if got := h.Get("Authorization"); got != "Bearer "+providertest.APIKey {
			t.Errorf("Authorization = %q, want the bearer token", got)
		}
	},
	Decode:   decodeOllama,
	Features: providertest.Features{ResultNames: true},
	Text: providertest.Reply{ContentType: "application/json; charset=utf-8", Body: `{
  "model": "llama3.1",
  "created_at": "2024-07-22T20:33:28.123648Z",
  "message": {"role": "assistant", "content": "It is 18°C and sunny in Paris; the clock service is down."},
  "done_reason": "stop",
  "done": true,
  "total_duration": 885095291,
  "load_duration": 3753500,
  "prompt_eval_count": 57,
  "prompt_eval_duration": 328493000,
  "eval_count": 15,
  "eval_duration": 552222000
}`},
	ToolCalls: providertest.Reply{ContentType: "application/json; charset=utf-8", Body: `{
  "model": "llama3.1",
  "created_at": "2024-07-22T20:33:28.123648Z",
  "message": {
    "role": "assistant",
    "content": "",
    "tool_calls": [
      {"function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
      {"function": {"name": "get_time", "arguments": {"zone": "Europe/Paris"}}}
    ]
  },
  "done_reason": "stop",
  "done": true,
  "total_duration": 885095291,
  "load_duration": 3753500,
  "prompt_eval_count": 82,
  "prompt_eval_duration": 328493000,
  "eval_count": 41,
  "eval_duration": 552222000
}`},
	StreamText: providertest.Reply{ContentType: "application/x-ndjson", Body: `{"model":"llama3.1","created_at":"2023-08-04T08:52:19.385406455-07:00","message":{"role":"assistant","content":"It is 18°C"},"done":false}
{"model":"llama3.1","created_at":"2023-08-04T08:52:19.485406455-07:00","message":{"role":"assistant","content":" and sunny in Paris;"},"done":false}
{"model":"llama3.1","created_at":"2023-08-04T08:52:19.585406455-07:00","message":{"role":"assistant","content":" the clock service is down."},"done":false}
{"model":"llama3.1","created_at":"2023-08-04T19:22:45.499127Z","message":{"role":"assistant","content":""},"done_reason":"stop","done":true,"total_duration":4883583458,"load_duration":1334875,"prompt_eval_count":57,"prompt_eval_duration":342546000,"eval_count":15,"eval_duration":4535599000}
`},
	StreamToolCalls: providertest.Reply{ContentType: "application/x-ndjson", Body: `{"model":"llama3.1","created_at":"2024-07-22T20:33:28.1Z","message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"get_weather","arguments":{"city":"Paris"}}}]},"done":false}
{"model":"llama3.1","created_at":"2024-07-22T20:33:28.2Z","message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"get_time","arguments":{"zone":"Europe/Paris"}}}]},"done":false}
{"model":"llama3.1","created_at":"2024-07-22T20:33:28.3Z","message":{"role":"assistant","content":""},"done_reason":"stop","done":true,"prompt_eval_count":82,"eval_count":41}
`},
	StreamError: providertest.Reply{ContentType: "application/x-ndjson", Body: `{"model":"llama3.1","created_at":"2024-07-22T20:33:28.1Z","message":{"role":"assistant","content":"It is"},"done":false}
{"error":"an error was encountered while running the model: Overloaded"}
`},
	BadRequest:  providertest.Reply{ContentType: "application/json; charset=utf-8", Body: `{"error":"tools.0.name: String should match pattern"}`},
	RateLimited: providertest.Reply{ContentType: "application/json; charset=utf-8", Body: `{"error":"server busy, please try again.  maximum pending requests exceeded"}`},
	ServerError: providertest.Reply{ContentType: "application/json; charset=utf-8", Body: `{"error":"llama runner process has terminated: exit status 2"}`},
}

func TestOllamaConformance(t *testing.T) {
	providertest.Run(t, ollamaHarness)
}

// decodeOllama reads an /api/chat request: system as the first message, tool call
// arguments as objects, tool results as "tool" messages with tool_name.
func decodeOllama(t *testing.T, body []byte) providertest.Sent {
	t.Helper()
	var r struct {
		Model   string          `json:"model"`
		Stream  *bool           `json:"stream"`
		Options map[string]any  `json:"options"`
		Extra   json.RawMessage `json:"tool_choice"`
		Tools   []struct {
			Type     string `json:"type"`
			Function struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				Parameters  json.RawMessage `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
		Messages []struct {
			Role      string `json:"role"`
			Content   string `json:"content"`
			ToolName  string `json:"tool_name"`
			ToolCalls []struct {
				Function struct {
					Name      string          `json:"name"`
					Arguments json.RawMessage `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("request body: %v\n%s", err, body)
	}
	if r.Stream == nil {
		t.Errorf("stream must be explicit: Ollama streams by default")
	}
	if r.Extra != nil {
		t.Errorf("tool_choice sent to Ollama, which has none: %s", r.Extra)
	}
	s := providertest.Sent{Model: r.Model, Stream: r.Stream != nil && *r.Stream}
	if v, ok := r.Options["num_predict"].(float64); ok {
		s.MaxTokens = int(v)
	}
	if v, ok := r.Options["temperature"].(float64); ok {
		s.Temperature = &v
	}
	for _, tl := range r.Tools {
		if tl.Type != "function" {
			t.Errorf("tool type %q", tl.Type)
		}
		s.Tools = append(s.Tools, providertest.SentTool{Name: tl.Function.Name, Description: tl.Function.Description, Parameters: tl.Function.Parameters})
	}
	for i, m := range r.Messages {
		switch m.Role {
		case "system":
			if i != 0 {
				t.Errorf("system message at %d", i)
			}
			s.System = m.Content
		case "user":
			s.Messages = append(s.Messages, provider.Message{Role: provider.RoleUser, Text: m.Content})
		case "assistant":
			msg := provider.Message{Role: provider.RoleAssistant, Text: m.Content}
			for _, tc := range m.ToolCalls {
				if len(tc.Function.Arguments) == 0 || tc.Function.Arguments[0] != '{' {
					t.Errorf("tool call arguments %s, want an object", tc.Function.Arguments)
				}
				msg.ToolCalls = append(msg.ToolCalls, provider.ToolCall{Name: tc.Function.Name, Arguments: tc.Function.Arguments})
			}
			s.Messages = append(s.Messages, msg)
		case "tool":
			s.Messages = append(s.Messages, provider.Message{Role: provider.RoleTool, ToolResults: []provider.ToolResult{
				{Name: m.ToolName, Content: raw(m.Content)}}})
		default:
			t.Errorf("message %d has role %q", i, m.Role)
		}
	}
	return s
}

// TestOllamaRequestBody pins the whole request, field by field.
func TestOllamaRequestBody(t *testing.T) {
	t.Parallel()
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body = readAll(r)
		w.Write([]byte(ollamaHarness.Text.Body))
	}))
	defer srv.Close()
	m, err := provider.NewOllama("llama3.1", provider.WithBaseURL(srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Generate(context.Background(), stdRequest()); err != nil {
		t.Fatal(err)
	}
	sameJSON(t, body, `{
	  "model": "llama3.1",
	  "stream": false,
	  "options": {"temperature": 0.2, "num_predict": 256},
	  "tools": [
	    {"type": "function", "function": {"name": "get_weather", "description": "Current weather for a city.",
	      "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "units": {"enum": ["metric", "imperial"]}},
	                     "required": ["city"], "additionalProperties": false}}},
	    {"type": "function", "function": {"name": "get_time", "description": "Current time in a time zone.",
	      "parameters": {"type":"object","properties":{"zone":{"type":"string"}},"required":["zone"]}}}
	  ],
	  "messages": [
	    {"role": "system", "content": "You are a weather assistant."},
	    {"role": "user", "content": "What is the weather in Paris, and the time there?"},
	    {"role": "assistant", "content": "Let me check both.", "tool_calls": [
	      {"function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
	      {"function": {"name": "get_time", "arguments": {"zone": "Europe/Paris"}}}]},
	    {"role": "tool", "tool_name": "get_weather", "content": "{\"temp_c\":18,\"sky\":\"sunny\"}"},
	    {"role": "tool", "tool_name": "get_time", "content": "{\"error\":{\"code\":\"tool_error\",\"message\":\"clock unavailable\"}}"}
	  ]
	}`)
}

// TestOllamaToolChoiceEmulation: Ollama has no tool_choice; "required" and a named tool
// become an instruction in the system prompt (a named tool is also the only one offered).
func TestOllamaToolChoiceEmulation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		choice provider.ToolChoice
		hint   string
	}{
		{provider.ToolChoiceRequired, "You must answer by calling one or more of the provided tools."},
		{provider.ToolChoiceFor("get_time"), "You must answer by calling the tool get_time."},
	} {
		var body []byte
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body = readAll(r)
			w.Write([]byte(ollamaHarness.Text.Body))
		}))
		m, _ := provider.NewOllama("llama3.1", provider.WithBaseURL(srv.URL))
		req := stdRequest()
		req.ToolChoice = tc.choice
		if _, err := m.Generate(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		srv.Close()
		sent := decodeOllama(t, body)
		if sent.System != providertest.System+"\n\n"+tc.hint {
			t.Errorf("%s: system = %q, want the system text then %q", tc.choice, sent.System, tc.hint)
		}
	}
}

// TestOllamaStreamIDsAcrossLines: calls that arrive in separate lines of a stream get
// distinct ids, numbered across the whole message.
func TestOllamaStreamIDsAcrossLines(t *testing.T) {
	t.Parallel()
	line := `{"model":"llama3.1","message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"ping","arguments":{}}}]},"done":false}` + "\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(line + line + `{"model":"llama3.1","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop"}` + "\n"))
	}))
	defer srv.Close()
	m, _ := provider.NewOllama("llama3.1", provider.WithBaseURL(srv.URL))
	resp, err := m.Stream(context.Background(), stdRequest(), func(provider.Delta) {})
	if err != nil {
		t.Fatal(err)
	}
	calls := resp.Message.ToolCalls
	if len(calls) != 2 || calls[0].ID == calls[1].ID || !strings.HasPrefix(calls[1].ID, "ollama_1_") {
		t.Fatalf("ids = %v, want two distinct ids numbered 0 and 1", calls)
	}
}
