package provider

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		header http.Header
		want   time.Duration
	}{
		{"seconds", http.Header{"Retry-After": {"20"}}, 20 * time.Second},
		{"fractional seconds", http.Header{"Retry-After": {"1.5"}}, 1500 * time.Millisecond},
		{"http date", http.Header{"Retry-After": {"Sat, 01 Mar 2025 12:00:45 GMT"}}, 45 * time.Second},
		{"date in the past", http.Header{"Retry-After": {"Sat, 01 Mar 2025 11:00:00 GMT"}}, 0},
		{"milliseconds header wins", http.Header{"Retry-After-Ms": {"250"}, "Retry-After": {"1"}}, 250 * time.Millisecond},
		{"garbage", http.Header{"Retry-After": {"soon"}}, 0},
		{"negative", http.Header{"Retry-After": {"-3"}}, 0},
		{"absent", http.Header{}, 0},
	}
	for _, tt := range tests {
		if got := parseRetryAfter(tt.header, now); got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestBackoffGrowsAndIsCapped(t *testing.T) {
	t.Parallel()
	r := Retry{InitialBackoff: 100 * time.Millisecond, MaxBackoff: time.Second}
	for range 20 {
		b := retryBackoff(r)
		for n := 1; n <= 30; n++ {
			base := min(100*time.Millisecond<<(min(n, 5)-1), time.Second)
			if d := b.Next(); d < base*8/10 || d > base*12/10 {
				t.Fatalf("retry %d: wait %v outside %v ±20%%", n, d, base)
			}
		}
	}
}

func TestReadSSE(t *testing.T) {
	t.Parallel()
	in := ": comment\r\nevent: a\r\ndata: one\r\ndata:two\r\n\r\ndata: {\"x\":1}\n\nevent: ignored-without-data\n\ndata: last"
	var got []string
	err := readSSE(strings.NewReader(in), func(ev sseEvent) error {
		got = append(got, ev.Event+"|"+string(ev.Data))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a|one\ntwo", `|{"x":1}`, "|last"}
	if strings.Join(got, ";") != strings.Join(want, ";") {
		t.Errorf("events = %q, want %q", got, want)
	}
	stop := errors.New("stop")
	if err := readSSE(strings.NewReader("data: 1\n\ndata: 2\n\n"), func(sseEvent) error { return stop }); err != stop {
		t.Errorf("fn's error should end the read, got %v", err)
	}
}

func TestFromEnv(t *testing.T) {
	t.Parallel()
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	tests := []struct {
		name    string
		env     map[string]string
		want    string // Name(), or the error's text
		wantErr error
		base    string
	}{
		{"unset", nil, "TOOLFLEET_MODEL is not set", ErrNoModel, ""},
		{"ollama default host", map[string]string{"TOOLFLEET_MODEL": "ollama/llama3.1"}, "ollama/llama3.1", nil, "http://localhost:11434"},
		{"ollama host", map[string]string{"TOOLFLEET_MODEL": "ollama/llama3.1", "OLLAMA_HOST": "0.0.0.0:11500"}, "ollama/llama3.1", nil, "http://127.0.0.1:11500"},
		{"openai", map[string]string{"TOOLFLEET_MODEL": "openai/gpt-4o-mini", "OPENAI_API_KEY": "sk-1"}, "openai/gpt-4o-mini", nil, DefaultOpenAIBaseURL},
		{"openai no key", map[string]string{"TOOLFLEET_MODEL": "openai/gpt-4o-mini"}, "OPENAI_API_KEY", ErrConfig, ""},
		{"vllm", map[string]string{"TOOLFLEET_MODEL": "openai/meta-llama/Llama-3.1-8B-Instruct", "OPENAI_BASE_URL": "http://gpu:8000/v1/"},
			"openai/meta-llama/Llama-3.1-8B-Instruct", nil, "http://gpu:8000/v1"},
		{"anthropic", map[string]string{"TOOLFLEET_MODEL": "anthropic/claude-sonnet-4-5", "ANTHROPIC_API_KEY": "k"}, "anthropic/claude-sonnet-4-5", nil, DefaultAnthropicBaseURL},
		{"anthropic no key", map[string]string{"TOOLFLEET_MODEL": "anthropic/claude-sonnet-4-5"}, "ANTHROPIC_API_KEY", ErrConfig, ""},
		{"scripted", map[string]string{"TOOLFLEET_MODEL": "scripted/testdata/demo.yaml"}, "scripted/demo", nil, ""},
		{"unknown provider", map[string]string{"TOOLFLEET_MODEL": "gemini/flash"}, `unknown provider "gemini"`, ErrConfig, ""},
		{"no model part", map[string]string{"TOOLFLEET_MODEL": "ollama"}, "want <provider>/<model>", ErrConfig, ""},
		{"bad base URL", map[string]string{"TOOLFLEET_MODEL": "openai/x", "OPENAI_BASE_URL": "localhost:8000"}, "must start with http", ErrConfig, ""},
	}
	for _, tt := range tests {
		m, err := fromEnv(env(tt.env), nil)
		if tt.wantErr != nil {
			if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%s: err = %v, want %v containing %q", tt.name, err, tt.wantErr, tt.want)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if m.Name() != tt.want {
			t.Errorf("%s: name = %q, want %q", tt.name, m.Name(), tt.want)
		}
		var base string
		switch c := m.(type) {
		case *OpenAI:
			base = c.t.baseURL
		case *Anthropic:
			base = c.t.baseURL
		case *Ollama:
			base = c.t.baseURL
		}
		if base != tt.base {
			t.Errorf("%s: base URL = %q, want %q", tt.name, base, tt.base)
		}
	}
}

func TestParseToolChoice(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]ToolChoice{"": ToolChoiceAuto, "auto": ToolChoiceAuto, "required": ToolChoiceRequired,
		"none": ToolChoiceNone, "get_time": ToolChoiceFor("get_time"), "tool:auto": ToolChoiceFor("auto")} {
		got, err := ParseToolChoice(in)
		if err != nil || got != want {
			t.Errorf("ParseToolChoice(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		if again, _ := ParseToolChoice(got.String()); again != got {
			t.Errorf("%q does not survive String: %q", in, got.String())
		}
	}
	if _, err := ParseToolChoice("get time"); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("bad name: err = %v", err)
	}
	if err := ToolChoiceRequired.check(nil); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("required without tools: err = %v", err)
	}
}

func TestCheckRequest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		req  Request
		want string
	}{
		{"no messages", Request{}, "no messages"},
		{"empty user", Request{Messages: []Message{{Role: RoleUser}}}, "message 0 (user) is empty"},
		{"bad role", Request{Messages: []Message{{Role: "system", Text: "x"}}}, `role "system"`},
		{"tool without results", Request{Messages: []Message{{Role: RoleUser, Text: "x"}, {Role: RoleTool}}}, "has no tool results"},
		{"result without id", Request{Messages: []Message{{Role: RoleTool, ToolResults: []ToolResult{{Name: "f"}}}}}, "has no call id"},
		{"user with calls", Request{Messages: []Message{{Role: RoleUser, Text: "x", ToolCalls: []ToolCall{{ID: "1", Name: "f"}}}}}, "only assistant messages"},
	}
	for _, tt := range tests {
		err := checkRequest(tt.req)
		if !errors.Is(err, ErrInvalidRequest) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want %q", tt.name, err, tt.want)
		}
	}
}
