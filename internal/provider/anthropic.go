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

// Anthropic API defaults.
const (
	DefaultAnthropicBaseURL = "https://api.anthropic.com"
	// AnthropicVersion is sent as the anthropic-version header.
	AnthropicVersion = "2023-06-01"
)

// Anthropic is a client of the Anthropic Messages API (POST {base}/v1/messages, headers
// x-api-key and anthropic-version). Tool calls arrive as tool_use content blocks; tool
// results go back as tool_result blocks in a user message, with is_error for failures.
type Anthropic struct {
	model string
	t     transport
}

// NewAnthropic returns a Messages API client for model. An API key is required unless a
// base URL (a proxy or gateway) is given.
func NewAnthropic(model string, opts ...Option) (*Anthropic, error) {
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	if model == "" {
		return nil, fmt.Errorf("%w: anthropic: no model name", ErrConfig)
	}
	base := o.baseURL
	if base == "" {
		if o.apiKey == "" {
			return nil, fmt.Errorf("%w: anthropic: an API key is required (set ANTHROPIC_API_KEY)", ErrConfig)
		}
		base = DefaultAnthropicBaseURL
	}
	c := &Anthropic{model: model}
	c.t = transport{provider: "anthropic", baseURL: base, o: o, auth: func(h http.Header) {
		if o.apiKey != "" {
			h.Set("X-Api-Key", o.apiKey)
		}
		h.Set("Anthropic-Version", AnthropicVersion)
	}}
	return c, nil
}

// Name returns "anthropic/<model>".
func (c *Anthropic) Name() string { return "anthropic/" + c.model }

type anRequest struct {
	Model       string            `json:"model"`
	MaxTokens   int               `json:"max_tokens"`
	System      string            `json:"system,omitempty"`
	Messages    []anMessage       `json:"messages"`
	Tools       []json.RawMessage `json:"tools,omitempty"`
	ToolChoice  any               `json:"tool_choice,omitempty"`
	Temperature *float64          `json:"temperature,omitempty"`
	Stream      bool              `json:"stream,omitempty"`
}

type anMessage struct {
	Role    string    `json:"role"`
	Content []anBlock `json:"content"`
}

// anBlock is a content block; which fields are set depends on Type.
type anBlock struct {
	Type string `json:"type"`
	// text
	Text string `json:"text,omitempty"`
	// tool_use
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
	// tool_result
	ToolUseID string  `json:"tool_use_id,omitempty"`
	Content   *string `json:"content,omitempty"`
	IsError   bool    `json:"is_error,omitempty"`
}

type anUsage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

type anResponse struct {
	Type       string          `json:"type"`
	Model      string          `json:"model"`
	Content    json.RawMessage `json:"content"`
	StopReason string          `json:"stop_reason"`
	Usage      anUsage         `json:"usage"`
}

func (c *Anthropic) body(req Request, stream bool) ([]byte, error) {
	if err := checkRequest(req); err != nil {
		return nil, err
	}
	r := anRequest{Model: cmp.Or(req.Model, c.model), System: req.System, Temperature: req.Temperature,
		Stream: stream, MaxTokens: cmp.Or(req.MaxTokens, c.t.o.maxTokens, DefaultMaxTokens)}
	var err error
	if r.Tools, err = translateTools(req.Tools, tools.AnthropicTool); err != nil {
		return nil, err
	}
	if len(r.Tools) > 0 {
		// The tools stay in the request even for "none": a conversation holding tool_use
		// blocks must define its tools.
		switch ch := req.ToolChoice; ch.mode() {
		case ChoiceAuto:
			r.ToolChoice = map[string]string{"type": "auto"}
		case ChoiceRequired:
			r.ToolChoice = map[string]string{"type": "any"}
		case ChoiceNone:
			r.ToolChoice = map[string]string{"type": "none"}
		case ChoiceTool:
			r.ToolChoice = map[string]string{"type": "tool", "name": ch.Tool}
		}
	}
	for _, m := range req.Messages {
		switch m.Role {
		case RoleUser:
			r.Messages = append(r.Messages, anMessage{Role: "user", Content: []anBlock{{Type: "text", Text: m.Text}}})
		case RoleAssistant:
			msg := anMessage{Role: "assistant"}
			if m.Text != "" {
				msg.Content = append(msg.Content, anBlock{Type: "text", Text: m.Text})
			}
			for _, tc := range m.ToolCalls {
				input, err := argumentsObject(tc)
				if err != nil {
					return nil, err
				}
				msg.Content = append(msg.Content, anBlock{Type: "tool_use", ID: tc.ID, Name: tc.Name, Input: input})
			}
			r.Messages = append(r.Messages, msg)
		case RoleTool:
			msg := anMessage{Role: "user"}
			for _, res := range m.ToolResults {
				text := resultText(res.Content)
				msg.Content = append(msg.Content, anBlock{Type: "tool_result", ToolUseID: res.CallID,
					Content: &text, IsError: res.IsError})
			}
			r.Messages = append(r.Messages, msg)
		}
	}
	return json.Marshal(r)
}

// Generate implements Model.
func (c *Anthropic) Generate(ctx context.Context, req Request) (*Response, error) {
	body, err := c.body(req, false)
	if err != nil {
		return nil, err
	}
	var r anResponse
	if err := c.t.postJSON(ctx, "/v1/messages", body, &r); err != nil {
		return nil, err
	}
	if r.Type != "message" {
		return nil, malformed("anthropic", "response type is %q, want \"message\"", r.Type)
	}
	msg, err := anthropicMessage(r.Content)
	if err != nil {
		return nil, err
	}
	return finish(&Response{Message: msg, StopReason: anthropicStop(r.StopReason), RawStopReason: r.StopReason,
		Usage:    Usage{InputTokens: r.Usage.InputTokens, OutputTokens: r.Usage.OutputTokens},
		Provider: "anthropic", Model: r.Model}), nil
}

// anthropicMessage reads a content array: text blocks are joined, tool_use blocks become
// calls, other blocks (thinking) are skipped.
func anthropicMessage(content json.RawMessage) (Message, error) {
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(content, &blocks); err != nil {
		return Message{}, malformed("anthropic", "content: %v: %s", err, snippet(content))
	}
	msg := Message{Role: RoleAssistant}
	var text strings.Builder
	for _, b := range blocks {
		if b.Type == "text" {
			text.WriteString(b.Text)
		}
	}
	msg.Text = text.String()
	calls, err := tools.ParseAnthropicToolUses(content)
	if err != nil {
		return Message{}, malformed("anthropic", "%v", err)
	}
	for _, rc := range calls {
		msg.ToolCalls = append(msg.ToolCalls, ToolCall(rc))
	}
	return msg, nil
}

func anthropicStop(reason string) StopReason {
	switch reason {
	case "end_turn", "stop_sequence":
		return StopEnd
	case "tool_use":
		return StopToolCalls
	case "max_tokens", "model_context_window_exceeded":
		return StopMaxTokens
	case "refusal":
		return StopRefused
	}
	return StopOther
}

// anEvent is one event of a Messages stream; which fields are set depends on Type.
type anEvent struct {
	Type    string `json:"type"`
	Message *struct {
		Model string  `json:"model"`
		Usage anUsage `json:"usage"`
	} `json:"message"`
	Index        int             `json:"index"`
	ContentBlock json.RawMessage `json:"content_block"`
	Delta        struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		PartialJSON string `json:"partial_json"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	Usage *anUsage        `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// Stream implements Model over Server-Sent Events: message_start (model, input tokens),
// content_block_start / content_block_delta (text_delta, input_json_delta) /
// content_block_stop per block, message_delta (stop reason, output tokens), message_stop;
// ping events are ignored and an error event ends the stream with an *APIError.
func (c *Anthropic) Stream(ctx context.Context, req Request, onDelta func(Delta)) (*Response, error) {
	body, err := c.body(req, true)
	if err != nil {
		return nil, err
	}
	return c.t.stream(ctx, "/v1/messages", body, readSSE, &anStream{
		out: &Response{Provider: "anthropic"}, blocks: map[int]*anStreamBlock{}}, onDelta)
}

// anStream reads a Messages stream.
type anStream struct {
	out              *Response
	blocks           map[int]*anStreamBlock
	started, stopped bool
}

func (s *anStream) event(ev sseEvent, onDelta func(Delta)) error {
	var e anEvent
	if err := json.Unmarshal(ev.Data, &e); err != nil {
		return malformed("anthropic", "stream event %q: %v: %s", ev.Event, err, snippet(ev.Data))
	}
	switch e.Type {
	case "message_start":
		if e.Message == nil {
			return malformed("anthropic", "message_start without a message")
		}
		s.started = true
		s.out.Model = e.Message.Model
		s.out.Usage = Usage{InputTokens: e.Message.Usage.InputTokens, OutputTokens: e.Message.Usage.OutputTokens}
	case "content_block_start":
		var cb struct {
			Type  string          `json:"type"`
			ID    string          `json:"id"`
			Name  string          `json:"name"`
			Text  string          `json:"text"`
			Input json.RawMessage `json:"input"`
		}
		if err := json.Unmarshal(e.ContentBlock, &cb); err != nil {
			return malformed("anthropic", "content_block_start: %v", err)
		}
		if s.blocks[e.Index] != nil {
			return malformed("anthropic", "content_block_start for block %d, which was started before", e.Index)
		}
		b := &anStreamBlock{typ: cb.Type, id: cb.ID, name: cb.Name, startInput: cb.Input}
		b.text.WriteString(cb.Text)
		s.blocks[e.Index] = b
		if cb.Text != "" {
			onDelta(Delta{Text: cb.Text})
		}
	case "content_block_delta":
		b := s.blocks[e.Index]
		if b == nil {
			return malformed("anthropic", "content_block_delta for block %d, which was never started", e.Index)
		}
		if b.stopped {
			return malformed("anthropic", "content_block_delta for block %d after its content_block_stop", e.Index)
		}
		switch e.Delta.Type {
		case "text_delta":
			b.text.WriteString(e.Delta.Text)
			onDelta(Delta{Text: e.Delta.Text})
		case "input_json_delta":
			b.input.WriteString(e.Delta.PartialJSON)
		}
	case "content_block_stop":
		b := s.blocks[e.Index]
		if b == nil || b.stopped {
			return nil
		}
		b.stopped = true
		if b.typ != "tool_use" {
			return nil
		}
		tc, err := b.toolCall()
		if err != nil {
			return err
		}
		onDelta(Delta{ToolCall: &tc})
	case "message_delta":
		if e.Delta.StopReason != "" {
			s.out.RawStopReason = e.Delta.StopReason
			s.out.StopReason = anthropicStop(e.Delta.StopReason)
		}
		if e.Usage != nil {
			// Counts in message_delta are cumulative.
			s.out.Usage.OutputTokens = e.Usage.OutputTokens
			if e.Usage.InputTokens > 0 {
				s.out.Usage.InputTokens = e.Usage.InputTokens
			}
		}
	case "message_stop":
		s.stopped = true
	case "error":
		return streamError("anthropic", ev.Data, ev.Data)
	}
	return nil
}

func (s *anStream) missing() string {
	if !s.started || !s.stopped {
		return "message_stop"
	}
	return ""
}

// response joins the text blocks and reads the tool_use blocks, in block order; each
// call was announced at its content_block_stop.
func (s *anStream) response(func(Delta)) (*Response, error) {
	out := s.out
	out.Message = Message{Role: RoleAssistant}
	var text strings.Builder
	for _, i := range slices.Sorted(maps.Keys(s.blocks)) {
		b := s.blocks[i]
		switch b.typ {
		case "text":
			text.WriteString(b.text.String())
		case "tool_use":
			if !b.stopped { // its call was never announced, and its input may be cut short
				return nil, malformed("anthropic", "stream ended before content_block_stop of tool_use block %d", i)
			}
			tc, err := b.toolCall()
			if err != nil {
				return nil, err
			}
			out.Message.ToolCalls = append(out.Message.ToolCalls, tc)
		}
	}
	out.Message.Text = text.String()
	return out, nil
}

// anStreamBlock is a content block being received.
type anStreamBlock struct {
	typ, id, name string
	text, input   strings.Builder
	stopped       bool // content_block_stop came: the block is complete
	// startInput is the input of content_block_start ({} in practice); the deltas, when
	// there are any, replace it.
	startInput json.RawMessage
}

// toolCall assembles a streamed tool_use block and reads it with the same parser as a
// whole response, so both paths agree.
func (b *anStreamBlock) toolCall() (ToolCall, error) {
	input := json.RawMessage(b.input.String())
	if strings.TrimSpace(string(input)) == "" {
		input = b.startInput
	}
	raw, err := json.Marshal([]anBlock{{Type: "tool_use", ID: b.id, Name: b.name, Input: input}})
	if err != nil {
		return ToolCall{}, malformed("anthropic", "streamed tool_use %s: input is not valid JSON: %s", b.id, snippet(input))
	}
	calls, err := tools.ParseAnthropicToolUses(raw)
	if err != nil {
		return ToolCall{}, malformed("anthropic", "streamed tool_use: %v", err)
	}
	return ToolCall(calls[0]), nil
}
