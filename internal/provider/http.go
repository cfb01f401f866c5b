package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/toolfleet/toolfleet/internal/tick"
)

// transport posts JSON to a provider with the retry rules of Retry. It is shared by the
// HTTP clients; each supplies its provider name and authentication headers.
type transport struct {
	provider string
	baseURL  string
	o        options
	auth     func(h http.Header)
}

// post sends body to path and returns a response with a 2xx status, whose body the
// caller must close. Error statuses become *APIError; 429, 5xx and transport failures are
// retried up to MaxAttempts, waiting Retry-After when the provider sent one.
func (t *transport) post(ctx context.Context, path string, body []byte, stream bool) (*http.Response, error) {
	r := t.o.retry
	url := t.baseURL + path
	b := retryBackoff(r)
	for attempt := 1; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return nil, fmt.Errorf("%s: %w: %v", t.provider, ErrConfig, err)
		}
		req.Header.Set("Content-Type", "application/json")
		if stream {
			req.Header.Set("Accept", "text/event-stream, application/x-ndjson")
		} else {
			req.Header.Set("Accept", "application/json")
		}
		t.auth(req.Header)
		for k, vs := range t.o.headers {
			req.Header[k] = append([]string(nil), vs...)
		}

		var lastErr error
		var retryAfter time.Duration
		resp, err := t.o.httpClient.Do(req)
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return nil, fmt.Errorf("%s: %w", t.provider, ctx.Err())
			}
			lastErr = fmt.Errorf("%s: POST %s (attempt %d): %w", t.provider, url, attempt, err)
		case resp.StatusCode >= 200 && resp.StatusCode < 300:
			return resp, nil
		default:
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20)) // what could be read; the status says the rest
			resp.Body.Close()
			apiErr := t.apiError(resp.StatusCode, b)
			apiErr.Attempts = attempt
			apiErr.RetryAfter = parseRetryAfter(resp.Header, time.Now())
			if !apiErr.Temporary() {
				return nil, apiErr
			}
			if apiErr.RetryAfter > r.MaxWait {
				apiErr.Message += fmt.Sprintf(" (the provider asked to retry after %s, longer than the %s this client waits)",
					apiErr.RetryAfter, r.MaxWait)
				return nil, apiErr
			}
			lastErr, retryAfter = apiErr, apiErr.RetryAfter
		}
		if attempt >= r.MaxAttempts {
			return nil, lastErr
		}
		wait := b.Next() // drawn on every retry, so that retry n waits its own backoff
		if retryAfter > 0 {
			wait = retryAfter
		}
		t.o.logger.Warn().Str("provider", t.provider).Int("attempt", attempt).
			Dur("wait", wait).Err(lastErr).Msg("model request failed; retrying")
		if err := t.o.sleep(ctx, wait); err != nil {
			return nil, fmt.Errorf("%s: waiting to retry after %v: %w", t.provider, lastErr, err)
		}
	}
}

// postJSON posts body and decodes a 2xx JSON answer into out.
func (t *transport) postJSON(ctx context.Context, path string, body []byte, out any) error {
	resp, err := t.post(ctx, path, body, false)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w", t.provider, ctx.Err())
		}
		return fmt.Errorf("%s: read response: %w", t.provider, err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return malformed(t.provider, "decode response: %v; body: %s", err, snippet(b))
	}
	return nil
}

// apiError reads the provider's error body. The three providers use
// {"error":{"message","type","code"}} (OpenAI), {"type":"error","error":{"type","message"}}
// (Anthropic) and {"error":"message"} (Ollama).
func (t *transport) apiError(status int, body []byte) *APIError {
	e := &APIError{Provider: t.provider, StatusCode: status}
	e.Type, e.Message = parseErrorBody(body)
	if e.Message == "" {
		e.Message = strings.TrimSpace(snippet(body))
	}
	if e.Message == "" {
		e.Message = http.StatusText(status)
	}
	return e
}

func parseErrorBody(body []byte) (typ, message string) {
	var env struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &env) != nil || len(env.Error) == 0 {
		return "", ""
	}
	var s string
	if json.Unmarshal(env.Error, &s) == nil {
		return "", s
	}
	var obj struct {
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"`
	}
	if json.Unmarshal(env.Error, &obj) != nil {
		return "", ""
	}
	typ = obj.Type
	if typ == "" && len(obj.Code) > 0 {
		var code string
		if json.Unmarshal(obj.Code, &code) == nil {
			typ = code
		}
	}
	return typ, obj.Message
}

// parseRetryAfter reads retry-after-ms (OpenAI) or Retry-After, in seconds or as an HTTP
// date. It returns 0 when neither is present or readable.
func parseRetryAfter(h http.Header, now time.Time) time.Duration {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		return time.Duration(secs * float64(time.Second))
	}
	if at, err := http.ParseTime(v); err == nil {
		if d := at.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

// retryBackoff returns the waits between the attempts of r: InitialBackoff doubling up to
// MaxBackoff, each ±20%.
func retryBackoff(r Retry) tick.Backoff {
	return tick.Backoff{First: r.InitialBackoff, Max: r.MaxBackoff, Jitter: 0.2}
}

// readErr turns an error while reading a stream into the error to return.
func readErr(ctx context.Context, provider string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", provider, ctx.Err())
	}
	var apiErr *APIError
	if errors.As(err, &apiErr) || errors.Is(err, ErrMalformedResponse) {
		return err
	}
	return fmt.Errorf("%s: read stream: %w", provider, err)
}
