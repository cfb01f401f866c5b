// Package provider talks to chat models that call tools: OpenAI's Chat Completions API
// (and the servers that speak it: vLLM, llama.cpp, LM Studio, Ollama's /v1), Anthropic's
// Messages API, Ollama's native /api/chat, and an offline scripted model. Clients are
// plain net/http; no provider SDK is used.
//
// # One model, four wire formats
//
// Every client implements [Model]. A [Request] holds the system text, the conversation
// as provider-neutral [Message] values, the tools as tools.Definition values and a
// [ToolChoice]; a [Response] holds the assistant's [Message] (text and [ToolCall]s), a
// normalized [StopReason] and the token [Usage]:
//
//	m, err := provider.FromEnv() // TOOLFLEET_MODEL=ollama/llama3.1, openai/gpt-4o-mini, ...
//	if errors.Is(err, provider.ErrNoModel) {
//		m, err = provider.LoadScripted("demo.yaml")
//	}
//	resp, err := m.Generate(ctx, provider.Request{
//		System:   "You are a weather assistant.",
//		Messages: []provider.Message{{Role: provider.RoleUser, Text: "Weather in Paris?"}},
//		Tools:    reg.Definitions(),
//	})
//	for _, call := range resp.Message.ToolCalls {
//		hydrated, err := reg.Hydrate(call.Name, call.Arguments) // object or JSON string: both work
//		...
//	}
//
// The next request appends resp.Message and a [RoleTool] message whose [ToolResult]s
// answer the calls by id; an error result (IsError, its Content saying what was wrong)
// lets the model repair its call. Each client translates this into its provider's form:
// OpenAI gets one "tool" message per result, Anthropic a user message of tool_result
// blocks with is_error, Ollama "tool" messages with tool_name. Tools are translated with
// tools.OpenAIChatTool, tools.AnthropicTool and tools.OllamaTool, so the schema a model
// sees is the one calls are validated against.
//
// # Streaming
//
// [Model.Stream] delivers text as it arrives and each tool call once it is complete,
// then returns the same Response Generate would: OpenAI and Anthropic stream Server-Sent
// Events, Ollama newline-delimited JSON. One skeleton (stream.go) posts, reads, checks
// that the stream was complete and turns failures into errors for all three; each
// provider's file reads only its own events.
//
// # Failures
//
// Rate limits (429) and server errors (5xx, Anthropic's 529) are retried with exponential
// backoff, honouring Retry-After (seconds or an HTTP date) and bounded by [Retry]; other
// statuses fail at once. A provider's error comes back as an [*APIError] carrying its own
// message; a success status with a body that is not the provider's format is
// [ErrMalformedResponse]; a request that cannot be sent is [ErrInvalidRequest]. A
// canceled context ends a request, a stream or a wait between attempts, and the error
// matches context.Canceled.
//
// # The scripted model
//
// [Scripted] answers from a [Script] file of steps — tool calls (several make a parallel
// step), text, or both; a step may wait for a condition on the last tool results, such
// as an error, to repair a call, and a last step may repeat, to answer every follow-up
// of the conversation. It needs no network, keeps no state (the step is found
// by replaying the conversation, so any replica gives the same answer) and counts tokens
// as words so that budgets can be tested. Its name and its responses say "scripted".
//
// # Testing a client
//
// The providertest package is the conformance suite every client passes, against
// httptest servers speaking each provider's exact format.
package provider
