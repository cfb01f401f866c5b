package providertest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Values the fixtures must encode, and the values the suite sends.
const (
	// APIKey is the key clients are built with; CheckHeaders should find it.
	APIKey = "sk-test-0123456789"
	// WantModel is the model name clients are built with.
	WantModel = "test-model"
	// WantText is the text of the Text and StreamText fixtures.
	WantText = "It is 18°C and sunny in Paris; the clock service is down."
	// WantErrorMessage is the message of the BadRequest fixture's error body.
	WantErrorMessage = "tools.0.name: String should match pattern"
	// WantStreamErrorMessage is the message of the StreamError fixture's error event.
	WantStreamErrorMessage = "Overloaded"
	// System is the system text the suite sends.
	System = "You are a weather assistant."
)

// Usage the fixtures report.
var (
	WantTextUsage  = provider.Usage{InputTokens: 57, OutputTokens: 15}
	WantCallsUsage = provider.Usage{InputTokens: 82, OutputTokens: 41}
)

// WantCalls are the two parallel calls of the ToolCalls and StreamToolCalls fixtures, in
// order. Their arguments may be sent as objects or as JSON strings.
var WantCalls = []provider.ToolCall{
	{Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)},
	{Name: "get_time", Arguments: json.RawMessage(`{"zone":"Europe/Paris"}`)},
}

// WeatherSchema is get_weather's schema, oddly formatted on purpose.
const WeatherSchema = `{"type": "object",
  "properties": {"city": {"type": "string"}, "units": {"enum": ["metric", "imperial"]}},
  "required": ["city"], "additionalProperties": false}`

// Tools are the tools the suite offers.
func Tools() []tools.Definition {
	return []tools.Definition{
		{Type: "function", Name: "get_weather", Description: "Current weather for a city.",
			Parameters: json.RawMessage(WeatherSchema), Strict: true, Safe: true},
		{Type: "function", Name: "get_time", Description: "Current time in a time zone.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"zone":{"type":"string"}},"required":["zone"]}`), Safe: true},
	}
}

// Conversation is the suite's conversation: a question, an assistant turn with text and
// two parallel calls (one argument string as OpenAI sends them, one object), and their
// results, one a success and one an error.
func Conversation() []provider.Message {
	return []provider.Message{
		{Role: provider.RoleUser, Text: "What is the weather in Paris, and the time there?"},
		{Role: provider.RoleAssistant, Text: "Let me check both.", ToolCalls: []provider.ToolCall{
			{ID: "call_w1", Name: "get_weather", Arguments: json.RawMessage(`"{\"city\":\"Paris\"}"`)},
			{ID: "call_t1", Name: "get_time", Arguments: json.RawMessage(`{"zone":"Europe/Paris"}`)},
		}},
		{Role: provider.RoleTool, ToolResults: []provider.ToolResult{
			{CallID: "call_w1", Name: "get_weather", Content: json.RawMessage(`{"temp_c":18,"sky":"sunny"}`)},
			{CallID: "call_t1", Name: "get_time", Content: json.RawMessage(`{"error":{"code":"tool_error","message":"clock unavailable"}}`), IsError: true},
		}},
	}
}

// Reply is one canned HTTP answer.
type Reply struct {
	Status      int
	ContentType string
	Body        string
	Header      http.Header
}

// Sent is a request as the suite reads it back, provider-neutral.
type Sent struct {
	Model       string
	System      string
	Stream      bool
	MaxTokens   int
	Temperature *float64
	Tools       []SentTool
	// ToolChoice is "auto", "required", "none" or "tool:NAME"; "" when none was sent.
	ToolChoice string
	// Messages are the conversation; tool results may be spread over several RoleTool
	// messages (one per result), which the suite merges.
	Messages []provider.Message
}

// SentTool is one tool as sent.
type SentTool struct {
	Name        string
	Description string
	Parameters  json.RawMessage
}

// Harness describes one provider to the suite.
type Harness struct {
	// Name is the provider, as Response.Provider says it.
	Name string
	// New builds the client for the fixture server at baseURL, with the suite's options
	// (API key, retry bounds, recorded sleeps) appended to the harness's own.
	New func(baseURL string, opts ...provider.Option) (provider.Model, error)
	// Path is where the client must POST.
	Path string
	// CheckHeaders asserts the provider's authentication and version headers.
	CheckHeaders func(t *testing.T, h http.Header)
	// Decode reads a request body in the provider's format.
	Decode func(t *testing.T, body []byte) Sent

	// Fixtures in the provider's format.
	Text, ToolCalls             Reply
	StreamText, StreamToolCalls Reply
	// BadRequest is a 400 whose error body carries WantErrorMessage.
	BadRequest Reply
	// RateLimited is a 429 body; the suite adds Retry-After.
	RateLimited Reply
	// ServerError is a 5xx body.
	ServerError Reply
	// StreamError is a successful stream that fails midway with an error carrying
	// WantStreamErrorMessage.
	StreamError Reply

	// Features of the provider's wire format.
	Features Features
}

// Features says what a provider's format carries, so the suite checks only that.
type Features struct {
	// NativeToolChoice: the request has a tool_choice field (not Ollama).
	NativeToolChoice bool
	// CallIDs: tool call and result ids travel in requests (not Ollama).
	CallIDs bool
	// ResultNames: tool results carry the tool's name (Ollama).
	ResultNames bool
	// ErrorFlag: tool results carry an error flag (Anthropic's is_error).
	ErrorFlag bool
}

// fixture is the suite's test server: it records requests and answers from a queue of
// replies, repeating the last.
type fixture struct {
	t       *testing.T
	srv     *httptest.Server
	mu      sync.Mutex
	replies []Reply
	bodies  [][]byte
	headers []http.Header
	paths   []string
	block   chan struct{} // when set, requests wait until the client gives up
	arrived chan struct{}
}

func newFixture(t *testing.T, replies ...Reply) *fixture {
	f := &fixture{t: t, replies: replies, arrived: make(chan struct{}, 16)}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fixture) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.bodies = append(f.bodies, body)
	f.headers = append(f.headers, r.Header.Clone())
	f.paths = append(f.paths, r.Method+" "+r.URL.Path)
	n := len(f.bodies)
	reply := f.replies[min(n, len(f.replies))-1]
	block := f.block
	f.mu.Unlock()
	f.arrived <- struct{}{}
	if block != nil {
		select {
		case <-r.Context().Done():
		case <-block:
		}
		return
	}
	for k, vs := range reply.Header {
		w.Header()[k] = vs
	}
	if reply.ContentType != "" {
		w.Header().Set("Content-Type", reply.ContentType)
	}
	w.WriteHeader(cmpOr(reply.Status, http.StatusOK))
	_, _ = io.WriteString(w, reply.Body)
}

func (f *fixture) attempts() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.bodies)
}

func (f *fixture) lastBody() []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.bodies) == 0 {
		f.t.Fatal("the client sent no request")
	}
	return f.bodies[len(f.bodies)-1]
}

// sleeps records the waits a client asks for instead of sleeping.
type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *sleeps) all() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.d...)
}

// suiteRetry are the retry bounds the suite builds clients with.
var suiteRetry = provider.Retry{MaxAttempts: 3, InitialBackoff: 100 * time.Millisecond, MaxBackoff: time.Second, MaxWait: time.Minute}

type bundle struct {
	f      *fixture
	model  provider.Model
	sleeps *sleeps
}

func (h Harness) setup(t *testing.T, extra []provider.Option, replies ...Reply) bundle {
	t.Helper()
	f := newFixture(t, replies...)
	s := &sleeps{}
	opts := append([]provider.Option{provider.WithAPIKey(APIKey), provider.WithRetry(suiteRetry),
		provider.WithSleep(s.sleep)}, extra...)
	m, err := h.New(f.srv.URL, opts...)
	if err != nil {
		t.Fatalf("new %s client: %v", h.Name, err)
	}
	return bundle{f: f, model: m, sleeps: s}
}

// request is the suite's standard request.
func request() provider.Request {
	temp := 0.2
	return provider.Request{System: System, Messages: Conversation(), Tools: Tools(), MaxTokens: 256, Temperature: &temp}
}

func cmpOr(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}

// SameArguments reports whether two argument values hold the same object, each given as
// an object or as a JSON string holding one.
func SameArguments(a, b json.RawMessage) bool {
	va, ea := argumentsValue(a)
	vb, eb := argumentsValue(b)
	return ea == nil && eb == nil && reflect.DeepEqual(va, vb)
}

func argumentsValue(raw json.RawMessage) (any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		raw = []byte(s)
	}
	var v any
	err := json.Unmarshal(raw, &v)
	return v, err
}

// Text returns the text form of a tool result's content, as a provider shows it: a JSON
// string's content, or the JSON text of any other value.
func Text(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	var s string
	if len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

func isAPIError(err error, status int) (*provider.APIError, bool) {
	var e *provider.APIError
	if !errors.As(err, &e) {
		return nil, false
	}
	return e, status == 0 || e.StatusCode == status
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
