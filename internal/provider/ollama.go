package provider

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// DefaultOllamaBaseURL is a local Ollama server.
const DefaultOllamaBaseURL = "http://localhost:11434"

// Ollama is a client of Ollama's native chat API (POST {base}/api/chat). Tool calls carry
// their arguments as objects and usually no id (ids are then generated, see
// tools.ParseOllamaToolCalls); tool results go back as "tool" messages with tool_name.
// Streams are newline-delimited JSON objects, the last with "done":true.
//
// Ollama has no tool_choice. ChoiceNone is exact: no tools are sent. ChoiceRequired and
// ChoiceTool are emulated: a line telling the model to call a tool (or the named tool) is
// added to the system instructions, and for ChoiceTool only that tool is offered. The
// model may still answer in text; the client reports what it said.
type Ollama struct {
	model string
	t     transport
}

// NewOllama returns a native Ollama client for model (e.g. "llama3.1"). An API key, when
// given, is sent as a bearer token (for a server behind an authenticating proxy, or
// Ollama's hosted API).
func NewOllama(model string, opts ...Option) (*Ollama, error) {
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	if model == "" {
		return nil, fmt.Errorf("%w: ollama: no model name", ErrConfig)
	}
	c := &Ollama{model: model}
	c.t = transport{provider: "ollama", baseURL: cmp.Or(o.baseURL, DefaultOllamaBaseURL), o: o, auth: func(h http.Header) {
		if o.apiKey != "" {
			h.Set("Authorization", "Bearer "+o.apiKey)
		}
	}}
	return c, nil
}

// Name returns "ollama/<model>".
func (c *Ollama) Name() string { return "ollama/" + c.model }

type olRequest struct {
	Model    string            `json:"model"`
	Messages []olMessage       `json:"messages"`
	Tools    []json.RawMessage `json:"tools,omitempty"`
	Stream   bool              `json:"stream"`
	Options  map[string]any    `json:"options,omitempty"`
}

type olMessage struct {
	Role      string       `json:"role"`
	Content   string       `json:"content"`
	ToolCalls []olToolCall `json:"tool_calls,omitempty"`
	ToolName  string       `json:"tool_name,omitempty"`
}

type olToolCall struct {
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

type olResponse struct {
	Model           string          `json:"model"`
	Message         json.RawMessage `json:"message"`
	Done            bool            `json:"done"`
	DoneReason      string          `json:"done_reason"`
	PromptEvalCount int             `json:"prompt_eval_count"`
	EvalCount       int             `json:"eval_count"`
	Error           string          `json:"error"`
}

// Instructions added to the system prompt to emulate a tool choice Ollama lacks.
const (
	ollamaRequiredHint = "You must answer by calling one or more of the provided tools."
	ollamaToolHint     = "You must answer by calling the tool %s."
)

func (c *Ollama) body(req Request, stream bool) ([]byte, error) {
	if err := checkRequest(req); err != nil {
		return nil, err
	}
	r := olRequest{Model: cmp.Or(req.Model, c.model), Stream: stream}
	opts := map[string]any{}
	if req.Temperature != nil {
		opts["temperature"] = *req.Temperature
	}
	if n := cmp.Or(req.MaxTokens, c.t.o.maxTokens); n > 0 {
		opts["num_predict"] = n
	}
	if len(opts) > 0 {
		r.Options = opts
	}
	system := req.System
	offered := req.Tools
	switch ch := req.ToolChoice; ch.mode() {
	case ChoiceNone:
		offered = nil
	case ChoiceRequired:
		system = joinLines(system, ollamaRequiredHint)
	case ChoiceTool:
		for _, d := range req.Tools {
			if d.Name == ch.Tool {
				offered = []tools.Definition{d}
			}
		}
		system = joinLines(system, fmt.Sprintf(ollamaToolHint, ch.Tool))
	}
	var err error
	if r.Tools, err = translateTools(offered, tools.OllamaTool); err != nil {
		return nil, err
	}
	if system != "" {
		r.Messages = append(r.Messages, olMessage{Role: "system", Content: system})
	}
	for _, m := range req.Messages {
		switch m.Role {
		case RoleUser:
			r.Messages = append(r.Messages, olMessage{Role: "user", Content: m.Text})
		case RoleAssistant:
			msg := olMessage{Role: "assistant", Content: m.Text}
			for _, tc := range m.ToolCalls {
				args, err := argumentsObject(tc)
				if err != nil {
					return nil, err
				}
				var call olToolCall
				call.Function.Name, call.Function.Arguments = tc.Name, args
				msg.ToolCalls = append(msg.ToolCalls, call)
			}
			r.Messages = append(r.Messages, msg)
		case RoleTool:
			for _, res := range m.ToolResults {
				r.Messages = append(r.Messages, olMessage{Role: "tool", Content: resultText(res.Content), ToolName: res.Name})
			}
		}
	}
	return json.Marshal(r)
}

func joinLines(a, b string) string {
	if a == "" {
		return b
	}
	return a + "\n\n" + b
}

// Generate implements Model.
func (c *Ollama) Generate(ctx context.Context, req Request) (*Response, error) {
	body, err := c.body(req, false)
	if err != nil {
		return nil, err
	}
	var r olResponse
	if err := c.t.postJSON(ctx, "/api/chat", body, &r); err != nil {
		return nil, err
	}
	if r.Error != "" {
		return nil, &APIError{Provider: "ollama", Message: r.Error, Attempts: 1}
	}
	if len(r.Message) == 0 {
		return nil, malformed("ollama", "response has no message")
	}
	msg, err := ollamaMessage(r.Message)
	if err != nil {
		return nil, err
	}
	return finish(&Response{Message: msg, StopReason: ollamaStop(r.DoneReason), RawStopReason: r.DoneReason,
		Usage:    Usage{InputTokens: r.PromptEvalCount, OutputTokens: r.EvalCount},
		Provider: "ollama", Model: r.Model}), nil
}

func ollamaMessage(raw json.RawMessage) (Message, error) {
	var m struct {
		Content string `json:"content"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return Message{}, malformed("ollama", "message: %v: %s", err, snippet(raw))
	}
	calls, err := tools.ParseOllamaToolCalls(raw)
	if err != nil {
		return Message{}, malformed("ollama", "%v", err)
	}
	msg := Message{Role: RoleAssistant, Text: m.Content}
	for _, rc := range calls {
		msg.ToolCalls = append(msg.ToolCalls, ToolCall(rc))
	}
	return msg, nil
}

func ollamaStop(reason string) StopReason {
	switch reason {
	case "stop":
		return StopEnd
	case "length":
		return StopMaxTokens
	}
	return StopOther
}

// Stream implements Model over newline-delimited JSON: each line is a chat response
// whose message carries the next piece of text; tool calls arrive whole in a line's
// message.tool_calls; the last line has "done":true and the token counts; a line with
// "error" ends the stream with an *APIError.
func (c *Ollama) Stream(ctx context.Context, req Request, onDelta func(Delta)) (*Response, error) {
	body, err := c.body(req, true)
	if err != nil {
		return nil, err
	}
	return c.t.stream(ctx, "/api/chat", body, readNDJSON, &olStream{
		out: &Response{Message: Message{Role: RoleAssistant}, Provider: "ollama"}}, onDelta)
}

// olStream reads a /api/chat stream of JSON lines.
type olStream struct {
	out  *Response
	text strings.Builder
	done bool
}

func (s *olStream) event(ev sseEvent, onDelta func(Delta)) error {
	var r olResponse
	if err := json.Unmarshal(ev.Data, &r); err != nil {
		return malformed("ollama", "stream line: %v: %s", err, snippet(ev.Data))
	}
	if r.Error != "" {
		return &APIError{Provider: "ollama", Message: r.Error, Attempts: 1}
	}
	if len(r.Message) > 0 {
		// Ids are generated per line; number calls across the whole message.
		msg, err := ollamaMessage(r.Message)
		if err != nil {
			return err
		}
		if msg.Text != "" {
			s.text.WriteString(msg.Text)
			onDelta(Delta{Text: msg.Text})
		}
		for _, tc := range msg.ToolCalls {
			tc.ID = renumberOllamaID(tc.ID, len(s.out.Message.ToolCalls))
			s.out.Message.ToolCalls = append(s.out.Message.ToolCalls, tc)
			onDelta(Delta{ToolCall: &tc})
		}
	}
	if !r.Done {
		return nil
	}
	s.done = true
	s.out.Model = r.Model
	s.out.RawStopReason = r.DoneReason
	s.out.StopReason = ollamaStop(r.DoneReason)
	s.out.Usage = Usage{InputTokens: r.PromptEvalCount, OutputTokens: r.EvalCount}
	return errStreamEnd // the lines after done are not read
}

func (s *olStream) missing() string {
	if !s.done {
		return `a line with "done":true`
	}
	return ""
}

func (s *olStream) response(func(Delta)) (*Response, error) {
	s.out.Message.Text = s.text.String()
	return s.out, nil
}

// renumberOllamaID gives a generated id ("ollama_<i>_<hash>") the call's position in the
// whole streamed message rather than in its line, so that two calls in two lines never
// share an id. Ids sent by the server are kept.
func renumberOllamaID(id string, index int) string {
	rest, ok := strings.CutPrefix(id, "ollama_")
	if !ok {
		return id
	}
	_, hash, ok := strings.Cut(rest, "_")
	if !ok {
		return id
	}
	return fmt.Sprintf("ollama_%d_%s", index, hash)
}

var (
	_ Model = (*Ollama)(nil)
	_ Model = (*Anthropic)(nil)
)
