package plannertest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/toolfleet/toolfleet/internal/provider"
)

// OpenAIFixture is a model server speaking OpenAI's Chat Completions format (POST
// /chat/completions, streamed over SSE or not), for tests that need what a real
// provider does with a request: it answers each request as its answer function says,
// and honours max_tokens (or max_completion_tokens) as a provider does, cutting the
// answer's output tokens to it (finish_reason "length"). It keeps every request it
// was sent, as decoded, so that a test asserts what the model was asked.
type OpenAIFixture struct {
	srv    *httptest.Server
	answer func(OpenAIRequest) OpenAIAnswer
	mu     sync.Mutex
	reqs   []OpenAIRequest
}

// OpenAIRequest is what the fixture decoded of one request.
type OpenAIRequest struct {
	Messages []OpenAIMessage `json:"messages"`
	// MaxTokens is max_tokens, or max_completion_tokens; 0 when the request sets none.
	MaxTokens           int  `json:"max_tokens"`
	MaxCompletionTokens int  `json:"max_completion_tokens"`
	Stream              bool `json:"stream"`
}

// OpenAIMessage is one message of a request.
type OpenAIMessage struct {
	Role      string            `json:"role"`
	Content   *string           `json:"content"`
	ToolCalls []json.RawMessage `json:"tool_calls"`
}

// Text is the message's content, "" when it has none.
func (m OpenAIMessage) Text() string {
	if m.Content == nil {
		return ""
	}
	return *m.Content
}

// OpenAIAnswer is the answer to a request: text or calls, and the usage it reports
// (its output cut to the request's max_tokens).
type OpenAIAnswer struct {
	Text  string
	Calls []provider.ToolCall
	Usage provider.Usage
}

// NewOpenAIFixture starts a fixture that answers with answer until the test ends.
func NewOpenAIFixture(t testing.TB, answer func(OpenAIRequest) OpenAIAnswer) *OpenAIFixture {
	t.Helper()
	f := &OpenAIFixture{answer: answer}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// Model is a client of the fixture, as the planner's configuration takes it.
func (f *OpenAIFixture) Model(t testing.TB) provider.Model {
	t.Helper()
	m, err := provider.NewOpenAI("fixture", provider.WithBaseURL(f.srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Requests are the requests the fixture was sent, in order.
func (f *OpenAIFixture) Requests() []OpenAIRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]OpenAIRequest(nil), f.reqs...)
}

func (f *OpenAIFixture) serve(w http.ResponseWriter, r *http.Request) {
	var req OpenAIRequest
	if r.Method != http.MethodPost || r.URL.Path != "/chat/completions" {
		http.Error(w, `{"error":{"message":"not found"}}`, http.StatusNotFound)
		return
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, fmt.Sprintf(`{"error":{"message":%q}}`, err.Error()), http.StatusBadRequest)
		return
	}
	if req.MaxTokens == 0 {
		req.MaxTokens = req.MaxCompletionTokens
	}
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	f.mu.Unlock()

	a := f.answer(req)
	finish := "stop"
	if len(a.Calls) > 0 {
		finish = "tool_calls"
	}
	if req.MaxTokens > 0 && a.Usage.OutputTokens > req.MaxTokens {
		a.Usage.OutputTokens, finish = req.MaxTokens, "length"
	}
	usage := map[string]int{"prompt_tokens": a.Usage.InputTokens, "completion_tokens": a.Usage.OutputTokens,
		"total_tokens": a.Usage.Total()}
	var calls []map[string]any
	for i, c := range a.Calls {
		calls = append(calls, map[string]any{"index": i, "id": c.ID, "type": "function",
			"function": map[string]string{"name": c.Name, "arguments": string(c.Arguments)}})
	}
	msg := map[string]any{"role": "assistant", "content": a.Text}
	if len(calls) > 0 {
		msg["tool_calls"], msg["content"] = calls, nil
	}
	if !req.Stream {
		writeJSON(w, map[string]any{"id": "chatcmpl-fixture", "object": "chat.completion", "model": "fixture",
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}, "usage": usage})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := func(choices []any, usage any) {
		b, err := json.Marshal(map[string]any{"id": "chatcmpl-fixture", "object": "chat.completion.chunk", "model": "fixture",
			"choices": choices, "usage": usage})
		if err != nil {
			panic(err) // maps of strings and numbers
		}
		fmt.Fprintf(w, "data: %s\n\n", b)
	}
	chunk([]any{map[string]any{"index": 0, "delta": msg, "finish_reason": nil}}, nil)
	chunk([]any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": finish}}, nil)
	chunk([]any{}, usage)
	fmt.Fprint(w, "data: [DONE]\n\n")
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // maps of strings and numbers
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}
