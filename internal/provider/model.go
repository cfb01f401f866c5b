package provider

import (
	"context"
	"encoding/json"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Model is a chat model that can call tools. Every client (OpenAI, Anthropic, Ollama,
// scripted) implements it; the planner speaks only this interface.
//
// Implementations are safe for concurrent use and keep no conversation state: everything a
// turn depends on is in the Request, so any planner replica can continue any run.
type Model interface {
	// Name identifies the model as "<provider>/<model>", e.g. "openai/gpt-4o-mini" or
	// "scripted/demo"; it is what logs and run metadata show.
	Name() string
	// Generate asks for the model's next message. Transient failures (429, 5xx, a dropped
	// connection) are retried with backoff; the error of the last attempt is returned,
	// as an *APIError when the provider answered with an error status.
	Generate(ctx context.Context, req Request) (*Response, error)
	// Stream is Generate with the answer delivered as it is produced: onDelta is called,
	// from the calling goroutine, for each text chunk and for each tool call once it is
	// complete. The returned Response is the whole message, as Generate would return it.
	// Retries happen only before the first delta.
	Stream(ctx context.Context, req Request, onDelta func(Delta)) (*Response, error)
}

// Role says who wrote a message.
type Role string

// The three roles of a conversation. System instructions are not a message: they go in
// Request.System, because providers place them differently.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	// RoleTool messages carry the results of the previous assistant message's tool calls.
	RoleTool Role = "tool"
)

// Request is one turn asked of a model.
type Request struct {
	// Model overrides the client's model for this request; empty uses the client's.
	Model string
	// System holds the system instructions; empty sends none.
	System string
	// Messages is the conversation so far, oldest first.
	Messages []Message
	// Tools are the tools the model may call, translated for the provider with the
	// pkg/tools shape functions.
	Tools []tools.Definition
	// ToolChoice says whether and which tools the model must call. The zero value is auto.
	ToolChoice ToolChoice
	// MaxTokens bounds the answer's length; 0 uses the client's default (Anthropic
	// requires a bound, so its client always sends one).
	MaxTokens int
	// Temperature is sent when not nil.
	Temperature *float64
}

// Message is one message of the conversation, in a provider-neutral form.
type Message struct {
	Role Role `json:"role"`
	// Text is the message's text. An assistant message may have text and tool calls.
	Text string `json:"text,omitempty"`
	// ToolCalls are the calls an assistant message makes; several are run in parallel.
	ToolCalls []ToolCall `json:"toolCalls,omitempty"`
	// ToolResults answer the previous assistant message's calls (RoleTool only).
	ToolResults []ToolResult `json:"toolResults,omitempty"`
}

// ToolCall is one call a model asked for.
type ToolCall struct {
	// ID is the provider's call id (generated when the provider sends none); a result
	// names its call by it.
	ID   string `json:"id"`
	Name string `json:"name"`
	// Arguments are as the provider sent them: an object, or (OpenAI) a JSON string
	// holding one, possibly malformed. tools.Registry.Hydrate accepts both; clients send
	// either form back in the form their provider wants.
	Arguments json.RawMessage `json:"arguments"`
}

// ToolResult is the outcome of one tool call, as the model is shown it.
type ToolResult struct {
	// CallID is the ToolCall.ID this result answers.
	CallID string `json:"callId"`
	// Name is the tool's name; Ollama needs it, others ignore it.
	Name string `json:"name"`
	// Content is the tool's output (or its error output) as JSON. A JSON string is shown
	// to the model as its text; any other value as its JSON text.
	Content json.RawMessage `json:"content"`
	// IsError marks a failed call. Anthropic receives it as is_error; the others see it
	// only through Content, which should then say what went wrong.
	IsError bool `json:"isError,omitempty"`
}

// StopReason says why the model stopped, normalized across providers.
type StopReason string

// Stop reasons.
const (
	// StopEnd: the model finished its answer.
	StopEnd StopReason = "end"
	// StopToolCalls: the model wants its tool calls run.
	StopToolCalls StopReason = "tool_calls"
	// StopMaxTokens: the answer hit the token limit and is cut off.
	StopMaxTokens StopReason = "max_tokens"
	// StopRefused: the provider's safety system stopped or refused the answer.
	StopRefused StopReason = "refused"
	// StopOther: any other reason the provider gave (see Response.RawStopReason).
	StopOther StopReason = "other"
)

// Usage counts tokens, as the provider reported them.
type Usage struct {
	InputTokens  int `json:"inputTokens"`
	OutputTokens int `json:"outputTokens"`
}

// Total returns input plus output tokens.
func (u Usage) Total() int { return u.InputTokens + u.OutputTokens }

// Add returns the sum of two usages.
func (u Usage) Add(o Usage) Usage {
	return Usage{InputTokens: u.InputTokens + o.InputTokens, OutputTokens: u.OutputTokens + o.OutputTokens}
}

// Response is a model's answer to one Request.
type Response struct {
	// Message is the assistant message: text, tool calls or both.
	Message Message
	// StopReason is why the model stopped; StopToolCalls whenever Message has calls.
	StopReason StopReason
	// RawStopReason is the provider's own word for it ("stop", "end_turn", ...).
	RawStopReason string
	Usage         Usage
	// Provider says who answered: "openai", "anthropic", "ollama" or "scripted". A
	// scripted answer is never a real model's, and is labelled so wherever it is shown.
	Provider string
	// Model is the model that answered, as the provider named it.
	Model string
}

// Delta is one piece of a streamed answer: a chunk of text, or a tool call that has been
// fully received.
type Delta struct {
	Text     string
	ToolCall *ToolCall
}
