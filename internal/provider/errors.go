package provider

import (
	"errors"
	"fmt"
	"time"
)

// Sentinels, matched with errors.Is.
var (
	// ErrInvalidRequest: the Request cannot be sent (a tool choice naming an absent tool,
	// arguments a provider cannot carry, ...). Nothing was sent.
	ErrInvalidRequest = errors.New("invalid model request")
	// ErrMalformedResponse: the provider answered with success but a body that is not its
	// documented format.
	ErrMalformedResponse = errors.New("malformed model response")
	// ErrConfig: a model spec, option or environment variable is wrong or missing.
	ErrConfig = errors.New("model configuration")
	// ErrNoModel: FromEnv found no TOOLFLEET_MODEL; callers may fall back to a default.
	ErrNoModel = fmt.Errorf("%w: TOOLFLEET_MODEL is not set", ErrConfig)
)

// APIError is an error the provider answered with: an HTTP error status, or an error
// event inside a stream (StatusCode 0). Message is the provider's own message.
type APIError struct {
	// Provider is "openai", "anthropic" or "ollama".
	Provider string
	// StatusCode is the HTTP status, or 0 for an error sent inside a stream.
	StatusCode int
	// Type is the provider's error type or code, when it gives one
	// ("invalid_request_error", "rate_limit_error", "overloaded_error", ...).
	Type string
	// Message is the provider's message, or the start of the body when it has none.
	Message string
	// RetryAfter is the wait the provider asked for (Retry-After), 0 if it said nothing.
	RetryAfter time.Duration
	// Attempts is how many requests were made before giving up.
	Attempts int
}

func (e *APIError) Error() string {
	s := e.Provider + ": "
	if e.StatusCode != 0 {
		s += fmt.Sprintf("HTTP %d", e.StatusCode)
	} else {
		s += "error in stream"
	}
	if e.Type != "" {
		s += " " + e.Type
	}
	s += ": " + e.Message
	if e.Attempts > 1 {
		s += fmt.Sprintf(" (after %d attempts)", e.Attempts)
	}
	return s
}

// Temporary reports whether trying again later could succeed: rate limits (429),
// server errors (5xx, Anthropic's 529 overloaded) and overload errors inside a stream.
func (e *APIError) Temporary() bool {
	if e.StatusCode == 0 {
		return e.Type == "overloaded_error" || e.Type == "rate_limit_error" || e.Type == "api_error"
	}
	return e.StatusCode == 429 || e.StatusCode >= 500
}

func malformed(provider string, format string, args ...any) error {
	return fmt.Errorf("%s: %w: %s", provider, ErrMalformedResponse, fmt.Sprintf(format, args...))
}

// snippet shortens a body for an error message.
func snippet(b []byte) string {
	const max = 300
	if len(b) > max {
		return string(b[:max]) + "…"
	}
	return string(b)
}
