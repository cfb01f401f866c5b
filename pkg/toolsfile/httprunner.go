package toolsfile

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// envRef matches ${NAME} in a header value, secretRef ${secret:NAME}, and headerRef
// either, so that a header is expanded in one pass (a value is never expanded again).
var (
	envRef    = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)
	secretRef = regexp.MustCompile(`\$\{secret:([A-Za-z_][A-Za-z0-9_]*)\}`)
	headerRef = regexp.MustCompile(`\$\{(secret:)?([A-Za-z_][A-Za-z0-9_]*)\}`)
)

// StatusError is the cause (reachable with errors.As) of the error an endpoint's non-2xx
// answer produces.
type StatusError struct {
	Status int
	// Body is the start of the response body, at most 512 bytes.
	Body string
}

// HTTPStatus is the status, for retry rules ([tools.HTTPStatusOf]).
func (e *StatusError) HTTPStatus() int { return e.Status }

func (e *StatusError) Error() string {
	if e.Body == "" {
		return fmt.Sprintf("status %d", e.Status)
	}
	return fmt.Sprintf("status %d: %s", e.Status, e.Body)
}

func (h *HTTP) httpClient() *http.Client {
	h.once.Do(func() {
		h.client = &http.Client{
			// A configured endpoint that redirects is misconfigured; following it would
			// resend the arguments somewhere nobody declared.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	})
	return h.client
}

// run sends the arguments (POST by default) and maps the answer:
//
//	2xx                      the body is the output (the same rule as a command's stdout)
//	408, 429, 5xx            tool_error: retried by the default policy
//	other 4xx, 3xx           tool_error_permanent: the request itself is wrong or misrouted
//	no answer in time        timeout
//	network failure          tool_error
func (h *HTTP) run(ctx context.Context, tool string, args json.RawMessage) (any, error) {
	ctx, cancel := context.WithTimeout(ctx, timeoutOr(h.Timeout))
	defer cancel()
	req, err := h.request(ctx, args)
	if err != nil {
		return nil, tools.Wrap(tools.CodeInvalidInput, err, fmt.Sprintf("tool %s: %v", tool, err))
	}
	req.Header.Set("Accept", "application/json")
	for k, v := range h.Headers {
		v, err := expandHeader(ctx, v)
		if err != nil {
			return nil, tools.Wrap(tools.CodeInvalidDefinition, err, fmt.Sprintf("tool %s: header %s: %v", tool, k, err))
		}
		req.Header.Set(k, v)
	}
	// The call's identity lets the endpoint make its side effects idempotent.
	req.Header.Set("Toolfleet-Tool", tool)
	if info, ok := tools.CallInfoFrom(ctx); ok {
		req.Header.Set("Toolfleet-Call-Id", info.CallID)
		req.Header.Set("Toolfleet-Run-Id", info.RunID)
		req.Header.Set("Toolfleet-Attempt", strconv.Itoa(info.Attempt))
	}

	resp, err := h.httpClient().Do(req)
	if err != nil {
		return nil, requestError(ctx, tool, err)
	}
	defer resp.Body.Close()
	limit := limitOr(h.MaxResponseBytes)
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, requestError(ctx, tool, err)
	}
	if int64(len(body)) > limit {
		return nil, tools.Errorf(tools.CodeToolFailedPermanent, "tool %s: the endpoint's response is larger than %d bytes", tool, limit)
	}

	code := resp.StatusCode
	if code >= 200 && code < 300 {
		return outputValue(body), nil
	}
	se := &StatusError{Status: code, Body: snippet(body)}
	msg := fmt.Sprintf("tool %s: the endpoint answered %s", tool, resp.Status)
	if se.Body != "" {
		msg += ": " + se.Body
	}
	switch {
	case code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500:
		return nil, &tools.Error{Code: tools.CodeToolFailed, Message: msg, Err: se}
	default:
		return nil, &tools.Error{Code: tools.CodeToolFailedPermanent, Message: msg, Err: se}
	}
}

func (h *HTTP) method() string {
	if h.Method == "" {
		return http.MethodPost
	}
	return h.Method
}

// request is the request that carries args: as the JSON body, or for GET and HEAD as
// query parameters added to the URL's own (see queryOf).
func (h *HTTP) request(ctx context.Context, args json.RawMessage) (*http.Request, error) {
	method := h.method()
	if method != http.MethodGet && method != http.MethodHead {
		body, err := withRunContext(ctx, args) // only for a tool that asked (runcontext.go)
		if err != nil {
			return nil, err
		}
		req, err := http.NewRequestWithContext(ctx, method, h.URL, bytes.NewReader(body))
		if err == nil {
			req.Header.Set("Content-Type", "application/json")
		}
		return req, err
	}
	u, err := url.Parse(h.URL)
	if err != nil {
		return nil, err
	}
	q := u.Query()
	if err := queryOf(args, q); err != nil {
		return nil, err
	}
	u.RawQuery = q.Encode()
	return http.NewRequestWithContext(ctx, method, u.String(), nil)
}

// queryOf adds the members of the arguments object to q: a string as it is, a number or
// a boolean as its JSON text, an array as one parameter per element (by the same rule),
// an object as its JSON text; null adds nothing.
func queryOf(args json.RawMessage, q url.Values) error {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(args, &members); err != nil {
		return fmt.Errorf("a GET or HEAD tool takes a JSON object of query parameters: %w", err)
	}
	add := func(k string, v json.RawMessage) {
		var s string
		switch {
		case string(v) == "null":
		case json.Unmarshal(v, &s) == nil:
			q.Add(k, s)
		default:
			q.Add(k, string(bytes.TrimSpace(v)))
		}
	}
	for k, v := range members {
		var list []json.RawMessage
		if json.Unmarshal(v, &list) == nil {
			for _, e := range list {
				add(k, e)
			}
			continue
		}
		add(k, v)
	}
	return nil
}

// expandHeader replaces each ${NAME} in a header value with the executor's variable and
// each ${secret:NAME} with the secret's value from ctx, where the executor put the tool's
// secrets.
func expandHeader(ctx context.Context, v string) (string, error) {
	var missing string
	v = headerRef.ReplaceAllStringFunc(v, func(ref string) string {
		m := headerRef.FindStringSubmatch(ref)
		if m[1] == "" {
			return os.Getenv(m[2])
		}
		s, ok := tools.SecretFrom(ctx, m[2])
		if !ok && missing == "" {
			missing = m[2]
		}
		return s
	})
	if missing != "" {
		return "", fmt.Errorf("secret %s is not available (the executor resolves the secrets a tool declares)", missing)
	}
	return v, nil
}

func requestError(ctx context.Context, tool string, err error) *tools.Error {
	if ctx.Err() != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return tools.Wrap(tools.CodeTimeout, err, fmt.Sprintf("tool %s: the endpoint did not answer in time", tool))
		}
		return tools.Wrap(tools.CodeCanceled, err, fmt.Sprintf("tool %s: canceled", tool))
	}
	return tools.Wrap(tools.CodeToolFailed, err, fmt.Sprintf("tool %s: %v", tool, err))
}

// snippet is the start of a response body, as valid UTF-8, for an error message.
func snippet(b []byte) string {
	b = bytes.TrimSpace(b)
	cut := len(b) > responseSnippetBytes
	if cut {
		b = b[:responseSnippetBytes]
	}
	s := string(bytes.ToValidUTF8(b, []byte("\uFFFD")))
	if cut {
		s += "…"
	}
	return s
}
