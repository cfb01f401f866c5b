package provider

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/tick"
)

// Option configures a client. Options that do not apply to a client (an API key for the
// scripted model) are ignored by it.
type Option func(*options) error

type options struct {
	baseURL    string
	apiKey     string
	httpClient *http.Client
	retry      Retry
	sleep      func(ctx context.Context, d time.Duration) error
	logger     zerolog.Logger
	maxTokens  int
	headers    http.Header
}

// Retry bounds how a client retries rate limits (429), server errors (5xx) and dropped
// connections. The wait before retry n is InitialBackoff·2^(n-1), capped at MaxBackoff,
// varied by ±20% — unless the provider sent Retry-After, which is then honoured exactly.
// A Retry-After longer than MaxWait is not waited for: the error is returned at once.
type Retry struct {
	// MaxAttempts counts the first request; 1 disables retries. Default 4.
	MaxAttempts int
	// InitialBackoff is the first wait. Default 500ms.
	InitialBackoff time.Duration
	// MaxBackoff caps the computed waits. Default 20s.
	MaxBackoff time.Duration
	// MaxWait is the longest Retry-After honoured. Default 60s.
	MaxWait time.Duration
}

// DefaultRetry returns the default retry bounds.
func DefaultRetry() Retry {
	return Retry{MaxAttempts: 4, InitialBackoff: 500 * time.Millisecond, MaxBackoff: 20 * time.Second, MaxWait: time.Minute}
}

// DefaultMaxTokens is the answer length bound sent when a request sets none and the
// provider requires one (Anthropic).
const DefaultMaxTokens = 4096

func defaultOptions() options {
	return options{httpClient: http.DefaultClient, retry: DefaultRetry(), sleep: sleepCtx,
		logger: zerolog.Nop()}
}

func buildOptions(opts []Option) (options, error) {
	o := defaultOptions()
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return o, err
		}
	}
	return o, nil
}

// WithBaseURL sets the API's base URL, e.g. "http://localhost:8000/v1" for a vLLM server.
// Defaults: https://api.openai.com/v1, https://api.anthropic.com, http://localhost:11434.
func WithBaseURL(u string) Option {
	return func(o *options) error {
		if u == "" {
			return nil
		}
		if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			return fmt.Errorf("%w: base URL %q must start with http:// or https://", ErrConfig, u)
		}
		o.baseURL = strings.TrimRight(u, "/")
		return nil
	}
}

// WithAPIKey sets the API key (OpenAI: Authorization: Bearer; Anthropic: x-api-key;
// Ollama: Authorization: Bearer, for servers behind a proxy).
func WithAPIKey(key string) Option {
	return func(o *options) error { o.apiKey = key; return nil }
}

// WithHTTPClient sets the HTTP client. Defaults to http.DefaultClient; requests are bounded
// by their context, not by a client timeout, so that long streams are not cut.
func WithHTTPClient(c *http.Client) Option {
	return func(o *options) error {
		if c == nil {
			return fmt.Errorf("%w: nil HTTP client", ErrConfig)
		}
		o.httpClient = c
		return nil
	}
}

// WithRetry sets the retry bounds; zero fields keep their defaults.
func WithRetry(r Retry) Option {
	return func(o *options) error {
		if r.MaxAttempts < 0 || r.InitialBackoff < 0 || r.MaxBackoff < 0 || r.MaxWait < 0 {
			return fmt.Errorf("%w: retry bounds must not be negative: %+v", ErrConfig, r)
		}
		d := DefaultRetry()
		if r.MaxAttempts > 0 {
			d.MaxAttempts = r.MaxAttempts
		}
		if r.InitialBackoff > 0 {
			d.InitialBackoff = r.InitialBackoff
		}
		if r.MaxBackoff > 0 {
			d.MaxBackoff = r.MaxBackoff
		}
		if r.MaxWait > 0 {
			d.MaxWait = r.MaxWait
		}
		o.retry = d
		return nil
	}
}

// WithSleep replaces how a client waits between attempts. The function must return
// ctx.Err() if the context ends first. Tests use it to record waits instead of sleeping.
func WithSleep(sleep func(ctx context.Context, d time.Duration) error) Option {
	return func(o *options) error {
		if sleep == nil {
			return fmt.Errorf("%w: nil sleep function", ErrConfig)
		}
		o.sleep = sleep
		return nil
	}
}

// WithLogger sets the logger; retries are logged at warn level. Defaults to zerolog.Nop().
func WithLogger(l zerolog.Logger) Option {
	return func(o *options) error { o.logger = l; return nil }
}

// WithMaxTokens sets the answer length bound used when a request sets none. Defaults to
// DefaultMaxTokens for Anthropic; OpenAI and Ollama send no bound unless one is set.
func WithMaxTokens(n int) Option {
	return func(o *options) error {
		if n < 1 {
			return fmt.Errorf("%w: max tokens must be at least 1, got %d", ErrConfig, n)
		}
		o.maxTokens = n
		return nil
	}
}

// WithHeader adds a header to every request (an organization or project id, a proxy
// token).
func WithHeader(key, value string) Option {
	return func(o *options) error {
		if o.headers == nil {
			o.headers = http.Header{}
		}
		o.headers.Add(key, value)
		return nil
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if !tick.Sleep(ctx, d) {
		return ctx.Err()
	}
	return nil
}
