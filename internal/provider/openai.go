package provider

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// DefaultOpenAIBaseURL is the OpenAI API; set another base URL for a compatible server.
const DefaultOpenAIBaseURL = "https://api.openai.com/v1"

// OpenAI is a client of the Chat Completions API (POST {base}/chat/completions). The same
// wire format is served by vLLM, llama.cpp server, LM Studio and Ollama's /v1, so one
// client covers them all with a different base URL.
type OpenAI struct {
	model string
	t     transport
	// officialAPI: api.openai.com wants max_completion_tokens; compatible servers
	// understand max_tokens.
	officialAPI bool
}

// NewOpenAI returns a Chat Completions client for model. The API key is required for
// api.openai.com and optional for other servers.
func NewOpenAI(model string, opts ...Option) (*OpenAI, error) {
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	if model == "" {
		return nil, fmt.Errorf("%w: openai: no model name", ErrConfig)
	}
	base := o.baseURL
	if base == "" {
		base = DefaultOpenAIBaseURL
	}
	official := strings.HasPrefix(base, "https://api.openai.com")
	if official && o.apiKey == "" {
		return nil, fmt.Errorf("%w: openai: an API key is required for %s (set OPENAI_API_KEY)", ErrConfig, base)
	}
	c := &OpenAI{model: model, officialAPI: official}
	c.t = transport{provider: "openai", baseURL: base, o: o, auth: func(h http.Header) {
		if o.apiKey != "" {
			h.Set("Authorization", "Bearer "+o.apiKey)
		}
	}}
	return c, nil
}

// Name returns "openai/<model>".
func (c *OpenAI) Name() string { return "openai/" + c.model }

type oaRequest struct {
	Model               string            `json:"model"`
	Messages            []oaMessage       `json:"messages"`
	Tools               []json.RawMessage `json:"tools,omitempty"`
	ToolChoice          any               `json:"tool_choice,omitempty"`
	MaxTokens           int               `json:"max_tokens,omitempty"`
	MaxCompletionTokens int               `json:"max_completion_tokens,omitempty"`
	Temperature         *float64          `json:"temperature,omitempty"`
	Stream              bool              `json:"stream,omitempty"`
	StreamOptions       *oaStreamOptions  `json:"stream_options,omitempty"`
}

type oaStreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type oaMessage struct {
	Role       string       `json:"role"`
	Content    *string      `json:"content"`
	ToolCalls  []oaToolCall `json:"tool_calls,omitempty"`
	ToolCallID string       `json:"tool_call_id,omitempty"`
}

type oaToolCall struct {
	ID       string     `json:"id"`
	Type     string     `json:"type"`
	Function oaFunction `json:"function"`
}

type oaFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type oaUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

type oaResponse struct {
	Model   string `json:"model"`
	Choices []struct {
		Message      json.RawMessage `json:"message"`
		FinishReason string          `json:"finish_reason"`
	} `json:"choices"`
	Usage *oaUsage `json:"usage"`
}

func (c *OpenAI) body(req Request, stream bool) ([]byte, error) {
	if err := checkRequest(req); err != nil {
		return nil, err
	}
	r := oaRequest{Model: c.model, Temperature: req.Temperature, Stream: stream}
	if req.Model != "" {
		r.Model = req.Model
	}
	if stream {
		r.StreamOptions = &oaStreamOptions{IncludeUsage: true}
	}
	if n := cmp.Or(req.MaxTokens, c.t.o.maxTokens); n > 0 {
		if c.officialAPI {
			r.MaxCompletionTokens = n
		} else {
			r.MaxTokens = n
		}
	}
	var err error
	if r.Tools, err = translateTools(req.Tools, tools.OpenAIChatTool); err != nil {
		return nil, err
	}
	if len(r.Tools) > 0 {
		switch ch := req.ToolChoice; ch.mode() {
		case ChoiceTool:
			r.ToolChoice = map[string]any{"type": "function", "function": map[string]string{"name": ch.Tool}}
		default:
			r.ToolChoice = string(ch.mode())
		}
	}
	if req.System != "" {
		r.Messages = append(r.Messages, oaMessage{Role: "system", Content: &req.System})
	}
	for _, m := range req.Messages {
		switch m.Role {
		case RoleUser:
			r.Messages = append(r.Messages, oaMessage{Role: "user", Content: &m.Text})
		case RoleAssistant:
			msg := oaMessage{Role: "assistant"}
			if m.Text != "" {
				msg.Content = &m.Text
			}
			for _, tc := range m.ToolCalls {
				msg.ToolCalls = append(msg.ToolCalls, oaToolCall{ID: tc.ID, Type: "function",
					Function: oaFunction{Name: tc.Name, Arguments: argumentsText(tc.Arguments)}})
			}
			r.Messages = append(r.Messages, msg)
		case RoleTool:
			// One "tool" message per result; OpenAI has no error flag, so an error is
			// told by the content alone.
			for _, res := range m.ToolResults {
				text := resultText(res.Content)
				r.Messages = append(r.Messages, oaMessage{Role: "tool", ToolCallID: res.CallID, Content: &text})
			}
		}
	}
	return json.Marshal(r)
}

// Generate implements Model.
func (c *OpenAI) Generate(ctx context.Context, req Request) (*Response, error) {
	body, err := c.body(req, false)
	if err != nil {
		return nil, err
	}
	var r oaResponse
	if err := c.t.postJSON(ctx, "/chat/completions", body, &r); err != nil {
		return nil, err
	}
	if len(r.Choices) == 0 {
		return nil, malformed("openai", "response has no choices")
	}
	msg, err := c.parseMessage(r.Choices[0].Message)
	if err != nil {
		return nil, err
	}
	resp := &Response{Message: msg, RawStopReason: r.Choices[0].FinishReason,
		StopReason: openAIStop(r.Choices[0].FinishReason), Provider: "openai", Model: r.Model}
	if r.Usage != nil {
		resp.Usage = Usage{InputTokens: r.Usage.PromptTokens, OutputTokens: r.Usage.CompletionTokens}
	}
	return finish(resp), nil
}

func (c *OpenAI) parseMessage(raw json.RawMessage) (Message, error) {
	var m struct {
		Content *string `json:"content"`
		Refusal *string `json:"refusal"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &m) != nil {
		return Message{}, malformed("openai", "choices[0].message is not a message object: %s", snippet(raw))
	}
	calls, err := tools.ParseOpenAIChatToolCalls(raw)
	if err != nil {
		return Message{}, malformed("openai", "%v", err)
	}
	msg := Message{Role: RoleAssistant}
	if m.Content != nil {
		msg.Text = *m.Content
	} else if m.Refusal != nil {
		msg.Text = *m.Refusal
	}
	for _, rc := range calls {
		msg.ToolCalls = append(msg.ToolCalls, ToolCall(rc))
	}
	return msg, nil
}

func openAIStop(reason string) StopReason {
	switch reason {
	case "stop":
		return StopEnd
	case "tool_calls", "function_call":
		return StopToolCalls
	case "length":
		return StopMaxTokens
	case "content_filter":
		return StopRefused
	}
	return StopOther
}

// oaChunk is one chat.completion.chunk of a stream.
type oaChunk struct {
	Model   string `json:"model"`
	Choices []struct {
		Delta struct {
			Content   *string `json:"content"`
			Refusal   *string `json:"refusal"`
			ToolCalls []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *oaUsage        `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// Stream implements Model over Server-Sent Events: chunks carry text deltas and tool
// call fragments (by index: id and name first, then pieces of the arguments string),
// usage arrives in a last chunk with no choices, and "data: [DONE]" ends the stream.
func (c *OpenAI) Stream(ctx context.Context, req Request, onDelta func(Delta)) (*Response, error) {
	body, err := c.body(req, true)
	if err != nil {
		return nil, err
	}
	return c.t.stream(ctx, "/chat/completions", body, readSSE, &oaStream{
		out: &Response{Message: Message{Role: RoleAssistant}, Provider: "openai"}, calls: map[int]*oaPartialCall{}}, onDelta)
}

// oaStream reads a Chat Completions stream.
type oaStream struct {
	out            *Response
	text           strings.Builder
	calls          map[int]*oaPartialCall
	done, finished bool // [DONE] came; a finish_reason came
}

// oaPartialCall is a tool call being received.
type oaPartialCall struct {
	id, name string
	args     strings.Builder
}

func (s *oaStream) event(ev sseEvent, onDelta func(Delta)) error {
	if s.done {
		return nil
	}
	if string(ev.Data) == "[DONE]" {
		s.done = true
		return nil
	}
	var ch oaChunk
	if err := json.Unmarshal(ev.Data, &ch); err != nil {
		return malformed("openai", "stream chunk: %v: %s", err, snippet(ev.Data))
	}
	if len(ch.Error) > 0 {
		return streamError("openai", append(append([]byte(`{"error":`), ch.Error...), '}'), ch.Error)
	}
	if ch.Model != "" {
		s.out.Model = ch.Model
	}
	if ch.Usage != nil {
		s.out.Usage = Usage{InputTokens: ch.Usage.PromptTokens, OutputTokens: ch.Usage.CompletionTokens}
	}
	if len(ch.Choices) == 0 {
		return nil
	}
	d := ch.Choices[0].Delta
	if d.Content != nil && *d.Content != "" {
		s.text.WriteString(*d.Content)
		onDelta(Delta{Text: *d.Content})
	} else if d.Refusal != nil && *d.Refusal != "" {
		s.text.WriteString(*d.Refusal)
		onDelta(Delta{Text: *d.Refusal})
	}
	for _, tc := range d.ToolCalls {
		p := s.calls[tc.Index]
		if p == nil {
			p = &oaPartialCall{}
			s.calls[tc.Index] = p
		}
		if tc.ID != "" {
			p.id = tc.ID
		}
		if tc.Function.Name != "" {
			p.name = tc.Function.Name
		}
		p.args.WriteString(tc.Function.Arguments)
	}
	if fr := ch.Choices[0].FinishReason; fr != nil && *fr != "" {
		s.finished = true
		s.out.RawStopReason = *fr
		s.out.StopReason = openAIStop(*fr)
	}
	return nil
}

func (s *oaStream) missing() string {
	if !s.done && !s.finished {
		return "a finish_reason or [DONE]"
	}
	return ""
}

// response reassembles the tool calls as a Chat Completions message would carry them,
// and reads them with the same parser, so both paths agree on ids and argument forms;
// only now is each call complete, and announced.
func (s *oaStream) response(onDelta func(Delta)) (*Response, error) {
	out := s.out
	out.Message.Text = s.text.String()
	var msg struct {
		ToolCalls []oaToolCall `json:"tool_calls"`
	}
	for _, i := range slices.Sorted(maps.Keys(s.calls)) {
		p := s.calls[i]
		msg.ToolCalls = append(msg.ToolCalls, oaToolCall{ID: p.id, Type: "function",
			Function: oaFunction{Name: p.name, Arguments: p.args.String()}})
	}
	raw, err := json.Marshal(msg)
	if err != nil {
		return nil, malformed("openai", "streamed tool calls: %v", err)
	}
	parsed, err := tools.ParseOpenAIChatToolCalls(raw)
	if err != nil {
		return nil, malformed("openai", "streamed tool calls: %v", err)
	}
	for _, rc := range parsed {
		tc := ToolCall(rc)
		out.Message.ToolCalls = append(out.Message.ToolCalls, tc)
		onDelta(Delta{ToolCall: &tc})
	}
	return out, nil
}

var _ Model = (*OpenAI)(nil)
