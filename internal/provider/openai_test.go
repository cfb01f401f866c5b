package provider_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/internal/testsupport/providertest"
)

// Fixtures written from the OpenAI Chat Completions API reference: a chat.completion
// object, chat.completion.chunk events over SSE ending with [DONE] (usage in a last chunk
// with no choices when stream_options.include_usage is set), and error bodies
// {"error":{"message","type","param","code"}}.
var openAIHarness = providertest.Harness{
	Name: "openai",
	Path: "/v1/chat/completions",
	New:  newAt(provider.NewOpenAI, "/v1"),
	CheckHeaders: func(t *testing.T, h http.Header) {
		if got := h.Get("Authorization"); got != "Bearer "+providertest.APIKey {
			t.Errorf("Authorization = %q, want a bearer token", got)
		}
	},
	Decode:   decodeOpenAI,
	Features: providertest.Features{NativeToolChoice: true, CallIDs: true},
	Text: providertest.Reply{ContentType: "application/json", Body: `{
  "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
  "object": "chat.completion",
  "created": 1741569952,
  "model": "gpt-4o-mini-2024-07-18",
  "choices": [
    {
      "index": 0,
      "message": {
        "role": "assistant",
        "content": "It is 18°C and sunny in Paris; the clock service is down.",
        "refusal": null,
        "annotations": []
      },
      "logprobs": null,
      "finish_reason": "stop"
    }
  ],
  "usage": {
    "prompt_tokens": 57,
    "completion_tokens": 15,
    "total_tokens": 72,
    "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}
  },
  "service_tier": "default",
  "system_fingerprint": "fp_06737a9306"
}`},
	ToolCalls: providertest.Reply{ContentType: "application/json", Body: `{
  "id": "chatcmpl-abc123",
  "object": "chat.completion",
  "created": 1699896916,
  "model": "gpt-4o-mini-2024-07-18",
  "choices": [
    {
      "index": 0,
      "message": {
        "role": "assistant",
        "content": null,
        "tool_calls": [
          {"id": "call_DdmO9pD3xa9XTPNJ32zg2hcA", "type": "function",
           "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
          {"id": "call_7qAWOXnBgqv4NtmXjdrvK1tE", "type": "function",
           "function": {"name": "get_time", "arguments": "{\"zone\": \"Europe/Paris\"}"}}
        ],
        "refusal": null,
        "annotations": []
      },
      "logprobs": null,
      "finish_reason": "tool_calls"
    }
  ],
  "usage": {"prompt_tokens": 82, "completion_tokens": 41, "total_tokens": 123}
}`},
	StreamText: providertest.Reply{ContentType: "text/event-stream", Body: `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":"It is 18°C"},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":" and sunny in Paris;"},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":" the clock service is down."},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_1","choices":[],"usage":{"prompt_tokens":57,"completion_tokens":15,"total_tokens":72}}

data: [DONE]

`},
	StreamToolCalls: providertest.Reply{ContentType: "text/event-stream", Body: `data: {"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_DdmO9pD3xa9XTPNJ32zg2hcA","type":"function","function":{"name":"get_weather","arguments":""}}],"refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"ci"}}]},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"ty\": \"Paris\"}"}}]},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_7qAWOXnBgqv4NtmXjdrvK1tE","type":"function","function":{"name":"get_time","arguments":""}}]},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{\"zone\": \"Europe/Paris\"}"}}]},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}],"usage":null}

data: {"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini-2024-07-18","choices":[],"usage":{"prompt_tokens":82,"completion_tokens":41,"total_tokens":123}}

data: [DONE]

`},
	StreamError: providertest.Reply{ContentType: "text/event-stream", Body: `data: {"id":"chatcmpl-3","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"delta":{"role":"assistant","content":"It is"},"logprobs":null,"finish_reason":null}]}

data: {"error":{"message":"Overloaded","type":"server_error","param":null,"code":null}}

`},
	BadRequest: providertest.Reply{ContentType: "application/json", Body: `{
  "error": {
    "message": "tools.0.name: String should match pattern",
    "type": "invalid_request_error",
    "param": "tools[0].function.name",
    "code": "invalid_value"
  }
}`},
	RateLimited: providertest.Reply{ContentType: "application/json", Body: `{"error":{"message":"Rate limit reached for gpt-4o-mini in organization org-x on requests per min (RPM): Limit 3, Used 3, Requested 1.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`},
	ServerError: providertest.Reply{ContentType: "application/json", Body: `{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}`},
}

func TestOpenAIConformance(t *testing.T) {
	providertest.Run(t, openAIHarness)
}

// decodeOpenAI reads a Chat Completions request, insisting on the wire types: tool call
// arguments are strings, tool results are "tool" messages with tool_call_id.
func decodeOpenAI(t *testing.T, body []byte) providertest.Sent {
	t.Helper()
	var r struct {
		Model               string   `json:"model"`
		Stream              bool     `json:"stream"`
		MaxTokens           int      `json:"max_tokens"`
		MaxCompletionTokens int      `json:"max_completion_tokens"`
		Temperature         *float64 `json:"temperature"`
		ToolChoice          any      `json:"tool_choice"`
		Tools               []struct {
			Type     string `json:"type"`
			Function struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				Parameters  json.RawMessage `json:"parameters"`
				Strict      *bool           `json:"strict"`
			} `json:"function"`
		} `json:"tools"`
		Messages []map[string]any `json:"messages"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("request body: %v\n%s", err, body)
	}
	s := providertest.Sent{Model: r.Model, Stream: r.Stream, MaxTokens: r.MaxTokens + r.MaxCompletionTokens, Temperature: r.Temperature}
	for _, tl := range r.Tools {
		if tl.Type != "function" || tl.Function.Strict == nil {
			t.Errorf("tool %s: type %q, strict %v; want type function and an explicit strict", tl.Function.Name, tl.Type, tl.Function.Strict)
		}
		s.Tools = append(s.Tools, providertest.SentTool{Name: tl.Function.Name, Description: tl.Function.Description, Parameters: tl.Function.Parameters})
	}
	switch c := r.ToolChoice.(type) {
	case nil:
	case string:
		s.ToolChoice = c
	case map[string]any:
		fn, _ := c["function"].(map[string]any)
		if c["type"] != "function" || fn == nil {
			t.Errorf("tool_choice object %v, want {type:function,function:{name}}", c)
		}
		s.ToolChoice = "tool:" + str(t, fn["name"], "tool_choice.function.name")
	default:
		t.Errorf("tool_choice is %T", c)
	}
	for i, m := range r.Messages {
		role := str(t, m["role"], "role")
		content := str(t, m["content"], "content")
		switch role {
		case "system":
			if i != 0 {
				t.Errorf("system message at %d, want first", i)
			}
			s.System = content
		case "user":
			s.Messages = append(s.Messages, provider.Message{Role: provider.RoleUser, Text: content})
		case "assistant":
			msg := provider.Message{Role: provider.RoleAssistant, Text: content}
			calls, _ := m["tool_calls"].([]any)
			for _, c := range calls {
				c := c.(map[string]any)
				fn := c["function"].(map[string]any)
				if c["type"] != "function" {
					t.Errorf("tool call type %v, want function", c["type"])
				}
				args := str(t, fn["arguments"], "tool_calls[].function.arguments")
				msg.ToolCalls = append(msg.ToolCalls, provider.ToolCall{ID: str(t, c["id"], "id"),
					Name: str(t, fn["name"], "name"), Arguments: raw(args)})
			}
			s.Messages = append(s.Messages, msg)
		case "tool":
			s.Messages = append(s.Messages, provider.Message{Role: provider.RoleTool, ToolResults: []provider.ToolResult{
				{CallID: str(t, m["tool_call_id"], "tool_call_id"), Content: raw(content)}}})
		default:
			t.Errorf("message %d has role %q", i, role)
		}
	}
	return s
}

// TestOpenAIRequestBody pins the whole request, field by field.
func TestOpenAIRequestBody(t *testing.T) {
	t.Parallel()
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body = readAll(r)
		w.Write([]byte(openAIHarness.Text.Body))
	}))
	defer srv.Close()
	m, err := provider.NewOpenAI("gpt-4o-mini", provider.WithBaseURL(srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	req := stdRequest()
	req.ToolChoice = provider.ToolChoiceFor("get_time")
	if _, err := m.Generate(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	sameJSON(t, body, `{
	  "model": "gpt-4o-mini",
	  "max_tokens": 256,
	  "temperature": 0.2,
	  "tools": [
	    {"type": "function", "function": {"name": "get_weather", "description": "Current weather for a city.",
	      "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "units": {"enum": ["metric", "imperial"]}},
	                     "required": ["city"], "additionalProperties": false}, "strict": true}},
	    {"type": "function", "function": {"name": "get_time", "description": "Current time in a time zone.",
	      "parameters": {"type":"object","properties":{"zone":{"type":"string"}},"required":["zone"]}, "strict": false}}
	  ],
	  "tool_choice": {"type": "function", "function": {"name": "get_time"}},
	  "messages": [
	    {"role": "system", "content": "You are a weather assistant."},
	    {"role": "user", "content": "What is the weather in Paris, and the time there?"},
	    {"role": "assistant", "content": "Let me check both.", "tool_calls": [
	      {"id": "call_w1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
	      {"id": "call_t1", "type": "function", "function": {"name": "get_time", "arguments": "{\"zone\":\"Europe/Paris\"}"}}]},
	    {"role": "tool", "tool_call_id": "call_w1", "content": "{\"temp_c\":18,\"sky\":\"sunny\"}"},
	    {"role": "tool", "tool_call_id": "call_t1", "content": "{\"error\":{\"code\":\"tool_error\",\"message\":\"clock unavailable\"}}"}
	  ]
	}`)
}

// TestOpenAIOfficialMaxTokens: api.openai.com takes max_completion_tokens (max_tokens is
// refused by its reasoning models); compatible servers take max_tokens.
func TestOpenAIOfficialMaxTokens(t *testing.T) {
	t.Parallel()
	var body []byte
	transport := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		body = readAll(r)
		if r.URL.String() != "https://api.openai.com/v1/chat/completions" {
			t.Errorf("URL = %s", r.URL)
		}
		return jsonResponse(openAIHarness.Text.Body), nil
	})
	m, err := provider.NewOpenAI("o4-mini", provider.WithAPIKey("k"), provider.WithHTTPClient(&http.Client{Transport: transport}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Generate(context.Background(), stdRequest()); err != nil {
		t.Fatal(err)
	}
	got := jsonObject(t, body)
	if got["max_completion_tokens"] != 256.0 || got["max_tokens"] != nil {
		t.Errorf("max_completion_tokens = %v, max_tokens = %v; want 256 and absent", got["max_completion_tokens"], got["max_tokens"])
	}
	if _, err := provider.NewOpenAI("gpt-4o-mini"); err == nil {
		t.Errorf("api.openai.com without a key should be refused")
	}
}

// TestConnectionFailuresRetried: a server that cannot be reached is retried up to the
// bound, and the error says what failed.
func TestConnectionFailuresRetried(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there any more
	waits := 0
	m, _ := provider.NewOpenAI("m", provider.WithBaseURL(url), provider.WithRetry(provider.Retry{MaxAttempts: 3}),
		provider.WithSleep(func(ctx context.Context, _ time.Duration) error { waits++; return ctx.Err() }))
	_, err := m.Generate(context.Background(), stdRequest())
	if err == nil || !strings.Contains(err.Error(), "attempt 3") || waits != 2 {
		t.Fatalf("err = %v after %d waits; want the third attempt's failure after 2 waits", err, waits)
	}
}
