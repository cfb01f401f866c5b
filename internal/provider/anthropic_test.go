package provider_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/internal/testsupport/providertest"
)

// Fixtures written from the Anthropic Messages API reference: a "message" object with
// text and tool_use content blocks; the SSE stream message_start, content_block_start,
// ping, content_block_delta (text_delta, input_json_delta), content_block_stop,
// message_delta, message_stop, and the error event; error bodies
// {"type":"error","error":{"type","message"}}.
var anthropicHarness = providertest.Harness{
	Name: "anthropic",
	Path: "/v1/messages",
	New:  newAt(provider.NewAnthropic, ""),
	CheckHeaders: func(t *testing.T, h http.Header) {
		if got := h.Get("X-Api-Key"); got != providertest.APIKey {
			t.Errorf("x-api-key = %q, want the key", got)
		}
		if got := h.Get("Anthropic-Version"); got != "2023-06-01" {
			t.Errorf("anthropic-version = %q, want 2023-06-01", got)
		}
		if got := h.Get("Authorization"); got != "" {
			t.Errorf("Authorization = %q; Anthropic takes the key in x-api-key only", got)
		}
	},
	Decode:   decodeAnthropic,
	Features: providertest.Features{NativeToolChoice: true, CallIDs: true, ErrorFlag: true},
	Text: providertest.Reply{ContentType: "application/json", Body: `{
  "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
  "type": "message",
  "role": "assistant",
  "model": "claude-sonnet-4-5-20250929",
  "content": [{"type": "text", "text": "It is 18°C and sunny in Paris; the clock service is down."}],
  "stop_reason": "end_turn",
  "stop_sequence": null,
  "usage": {"input_tokens": 57, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
            "output_tokens": 15, "service_tier": "standard"}
}`},
	ToolCalls: providertest.Reply{ContentType: "application/json", Body: `{
  "id": "msg_01Aq9w938a90dw8q",
  "type": "message",
  "role": "assistant",
  "model": "claude-sonnet-4-5-20250929",
  "content": [
    {"type": "text", "text": "I'll look up the weather and the time."},
    {"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": "get_weather", "input": {"city": "Paris"}},
    {"type": "tool_use", "id": "toolu_01B7yT5nXkq2Wm8rLd3Hc4Pz", "name": "get_time", "input": {"zone": "Europe/Paris"}}
  ],
  "stop_reason": "tool_use",
  "stop_sequence": null,
  "usage": {"input_tokens": 82, "output_tokens": 41}
}`},
	StreamText: providertest.Reply{ContentType: "text/event-stream", Body: `event: message_start
data: {"type":"message_start","message":{"id":"msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5-20250929","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":57,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: ping
data: {"type": "ping"}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"It is 18°C"}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" and sunny in Paris;"}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" the clock service is down."}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}

event: message_stop
data: {"type":"message_stop"}

`},
	StreamToolCalls: providertest.Reply{ContentType: "text/event-stream", Body: `event: message_start
data: {"type":"message_start","message":{"id":"msg_014p7gG3wDgGV9EUtLvnow3U","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","stop_sequence":null,"usage":{"input_tokens":82,"output_tokens":1},"content":[],"stop_reason":null}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Checking both."}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","name":"get_weather","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"city\": "}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\"Paris\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: content_block_start
data: {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_01B7yT5nXkq2Wm8rLd3Hc4Pz","name":"get_time","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"zone\": \"Europe/Paris\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":2}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":41}}

event: message_stop
data: {"type":"message_stop"}

`},
	StreamError: providertest.Reply{ContentType: "text/event-stream", Body: `event: message_start
data: {"type":"message_start","message":{"id":"msg_x","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5-20250929","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":57,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"It is"}}

event: error
data: {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}

`},
	BadRequest:  providertest.Reply{ContentType: "application/json", Body: `{"type":"error","error":{"type":"invalid_request_error","message":"tools.0.name: String should match pattern"},"request_id":"req_011CSHoEeqs5C35K2UUqR7Fy"}`},
	RateLimited: providertest.Reply{ContentType: "application/json", Body: `{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization of 50 requests per minute."}}`},
	ServerError: providertest.Reply{ContentType: "application/json", Body: `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`},
}

func TestAnthropicConformance(t *testing.T) {
	providertest.Run(t, anthropicHarness)
}

// decodeAnthropic reads a Messages request: system at the top, content blocks, tool_use
// input objects, tool results as tool_result blocks in user messages.
func decodeAnthropic(t *testing.T, body []byte) providertest.Sent {
	t.Helper()
	var r struct {
		Model       string   `json:"model"`
		MaxTokens   int      `json:"max_tokens"`
		System      string   `json:"system"`
		Stream      bool     `json:"stream"`
		Temperature *float64 `json:"temperature"`
		ToolChoice  *struct {
			Type string `json:"type"`
			Name string `json:"name"`
		} `json:"tool_choice"`
		Tools []struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"input_schema"`
		} `json:"tools"`
		Messages []struct {
			Role    string `json:"role"`
			Content []struct {
				Type      string          `json:"type"`
				Text      string          `json:"text"`
				ID        string          `json:"id"`
				Name      string          `json:"name"`
				Input     json.RawMessage `json:"input"`
				ToolUseID string          `json:"tool_use_id"`
				Content   json.RawMessage `json:"content"`
				IsError   bool            `json:"is_error"`
			} `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("request body: %v\n%s", err, body)
	}
	if r.MaxTokens <= 0 {
		t.Errorf("max_tokens = %d; Anthropic requires it", r.MaxTokens)
	}
	s := providertest.Sent{Model: r.Model, System: r.System, Stream: r.Stream, MaxTokens: r.MaxTokens, Temperature: r.Temperature}
	for _, tl := range r.Tools {
		s.Tools = append(s.Tools, providertest.SentTool{Name: tl.Name, Description: tl.Description, Parameters: tl.InputSchema})
	}
	if c := r.ToolChoice; c != nil {
		switch c.Type {
		case "auto", "none":
			s.ToolChoice = c.Type
		case "any":
			s.ToolChoice = "required"
		case "tool":
			s.ToolChoice = "tool:" + c.Name
		default:
			t.Errorf("tool_choice type %q", c.Type)
		}
	}
	for i, m := range r.Messages {
		switch m.Role {
		case "user":
			msg := provider.Message{Role: provider.RoleUser}
			for _, b := range m.Content {
				switch b.Type {
				case "text":
					msg.Text += b.Text
				case "tool_result":
					msg.Role = provider.RoleTool
					if len(b.Content) == 0 || b.Content[0] != '"' {
						t.Errorf("tool_result content %s, want a string", b.Content)
					}
					msg.ToolResults = append(msg.ToolResults, provider.ToolResult{CallID: b.ToolUseID, Content: b.Content, IsError: b.IsError})
				default:
					t.Errorf("user block type %q", b.Type)
				}
			}
			if msg.Role == provider.RoleTool && msg.Text != "" {
				t.Errorf("message %d mixes tool results and text", i)
			}
			s.Messages = append(s.Messages, msg)
		case "assistant":
			msg := provider.Message{Role: provider.RoleAssistant}
			for _, b := range m.Content {
				switch b.Type {
				case "text":
					if b.Text == "" {
						t.Errorf("empty text block: Anthropic refuses them")
					}
					msg.Text += b.Text
				case "tool_use":
					if len(b.Input) == 0 || b.Input[0] != '{' {
						t.Errorf("tool_use input %s, want an object", b.Input)
					}
					msg.ToolCalls = append(msg.ToolCalls, provider.ToolCall{ID: b.ID, Name: b.Name, Arguments: b.Input})
				default:
					t.Errorf("assistant block type %q", b.Type)
				}
			}
			s.Messages = append(s.Messages, msg)
		default:
			t.Errorf("message %d has role %q; the Messages API has user and assistant only", i, m.Role)
		}
	}
	return s
}

// TestAnthropicRequestBody pins the whole request, field by field.
func TestAnthropicRequestBody(t *testing.T) {
	t.Parallel()
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body = readAll(r)
		w.Write([]byte(anthropicHarness.Text.Body))
	}))
	defer srv.Close()
	m, err := provider.NewAnthropic("claude-sonnet-4-5", provider.WithBaseURL(srv.URL), provider.WithAPIKey("k"))
	if err != nil {
		t.Fatal(err)
	}
	req := stdRequest()
	req.MaxTokens, req.Temperature = 0, nil
	req.ToolChoice = provider.ToolChoiceRequired
	if _, err := m.Generate(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	sameJSON(t, body, `{
	  "model": "claude-sonnet-4-5",
	  "max_tokens": 4096,
	  "system": "You are a weather assistant.",
	  "tools": [
	    {"name": "get_weather", "description": "Current weather for a city.",
	     "input_schema": {"type": "object", "properties": {"city": {"type": "string"}, "units": {"enum": ["metric", "imperial"]}},
	                      "required": ["city"], "additionalProperties": false}},
	    {"name": "get_time", "description": "Current time in a time zone.",
	     "input_schema": {"type":"object","properties":{"zone":{"type":"string"}},"required":["zone"]}}
	  ],
	  "tool_choice": {"type": "any"},
	  "messages": [
	    {"role": "user", "content": [{"type": "text", "text": "What is the weather in Paris, and the time there?"}]},
	    {"role": "assistant", "content": [
	      {"type": "text", "text": "Let me check both."},
	      {"type": "tool_use", "id": "call_w1", "name": "get_weather", "input": {"city": "Paris"}},
	      {"type": "tool_use", "id": "call_t1", "name": "get_time", "input": {"zone": "Europe/Paris"}}]},
	    {"role": "user", "content": [
	      {"type": "tool_result", "tool_use_id": "call_w1", "content": "{\"temp_c\":18,\"sky\":\"sunny\"}"},
	      {"type": "tool_result", "tool_use_id": "call_t1", "content": "{\"error\":{\"code\":\"tool_error\",\"message\":\"clock unavailable\"}}", "is_error": true}]}
	  ]
	}`)
}

// TestAnthropic529Overloaded: Anthropic's 529 (overloaded) is retried like a 5xx.
func TestAnthropic529Overloaded(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.WriteHeader(529)
			w.Write([]byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`))
			return
		}
		w.Write([]byte(anthropicHarness.Text.Body))
	}))
	defer srv.Close()
	m, _ := provider.NewAnthropic("claude-x", provider.WithBaseURL(srv.URL),
		provider.WithSleep(func(context.Context, time.Duration) error { return nil }))
	resp, err := m.Generate(context.Background(), stdRequest())
	if err != nil || n.Load() != 2 || resp.Message.Text != providertest.WantText {
		t.Fatalf("after a 529: resp=%v err=%v attempts=%d", resp, err, n.Load())
	}
	if _, err := provider.NewAnthropic("claude-x"); err == nil {
		t.Errorf("no key and no base URL should be refused")
	}
}

// TestAnthropicRefusesNonObjectArguments: a call whose arguments are no object (a
// model's malformed JSON string from another provider) cannot be sent as tool_use input.
func TestAnthropicRefusesNonObjectArguments(t *testing.T) {
	t.Parallel()
	m, _ := provider.NewAnthropic("claude-x", provider.WithBaseURL("http://127.0.0.1:1"))
	req := stdRequest()
	req.Messages[1].ToolCalls[0].Arguments = json.RawMessage(`"{\"city\":"`)
	_, err := m.Generate(context.Background(), req)
	if !errors.Is(err, provider.ErrInvalidRequest) || !strings.Contains(err.Error(), "call_w1") {
		t.Fatalf("err = %v, want ErrInvalidRequest naming call_w1", err)
	}
}
