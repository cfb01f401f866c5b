package builtin

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

//go:embed schemas/http_get.json
var httpGetSchema []byte

// Defaults of http_get, used when the Config leaves them zero.
const (
	DefaultHTTPTimeout  = 10 * time.Second
	DefaultHTTPMaxBytes = 1 << 20 // the body returned is cut here, flagged truncated
	maxRedirects        = 5
)

// responseHeaders are the headers http_get passes on: what helps reading the body, none
// that carries cookies or credentials.
var responseHeaders = []string{"Content-Type", "Content-Length", "Content-Language",
	"Last-Modified", "ETag", "Cache-Control", "Location", "Retry-After"}

// HTTPGet is the tool http_get: one GET request to an allowlisted host. It is safe (it
// only reads) and idempotent. Every redirect is checked against the allowlist again.
// Any HTTP status is a successful call: a 404 is information for the model, not a
// failure of the tool.
type HTTPGet struct {
	URL string `json:"url"`

	g *httpGetter // set by Register; nil refuses every call
}

// HTTPResult is the output of [HTTPGet].
type HTTPResult struct {
	URL       string            `json:"url"` // after redirects
	Status    int               `json:"status"`
	Headers   map[string]string `json:"headers"`
	Body      string            `json:"body"`
	Encoding  string            `json:"encoding"` // "text" or "base64"
	Truncated bool              `json:"truncated"`
}

// httpGetter is http_get's configuration and client, shared by its calls.
type httpGetter struct {
	allow    Allowlist
	timeout  time.Duration
	maxBytes int64
	client   *http.Client
}

// redirectRefused is the CheckRedirect error for a redirect the allowlist refuses.
type redirectRefused struct{ to, why string }

func (e *redirectRefused) Error() string { return "redirect to " + e.to + " refused: " + e.why }

func newHTTPGetter(allow Allowlist, timeout time.Duration, maxBytes int64) *httpGetter {
	if timeout <= 0 {
		timeout = DefaultHTTPTimeout
	}
	if maxBytes <= 0 {
		maxBytes = DefaultHTTPMaxBytes
	}
	g := &httpGetter{allow: allow, timeout: timeout, maxBytes: maxBytes}
	g.client = &http.Client{
		Transport: http.DefaultTransport.(*http.Transport).Clone(),
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > maxRedirects {
				return &redirectRefused{to: req.URL.Redacted(), why: fmt.Sprintf("more than %d redirects", maxRedirects)}
			}
			if !g.allow.Allows(req.URL) {
				return &redirectRefused{to: req.URL.Redacted(), why: "not in this executor's allowlist"}
			}
			return nil
		},
	}
	return g
}

// Definition describes http_get.
func (HTTPGet) Definition() tools.Definition {
	return tools.Definition{
		Type:        "function",
		Name:        "http_get",
		Description: "Fetch a URL with an HTTP GET request and return the status, main headers and body.",
		Parameters:  httpGetSchema,
		Safe:        true,
		Tags:        []string{"web"},
	}
}

// Run fetches the URL.
func (h *HTTPGet) Run(ctx context.Context) (any, error) {
	if h.g == nil {
		return nil, notConfigured("http_get")
	}
	u, err := url.Parse(h.URL)
	if err != nil {
		return nil, invalidArg("/url", fmt.Sprintf("%q is not a URL: %v", h.URL, err))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, invalidArg("/url", fmt.Sprintf("%q: only http and https URLs are fetched", h.URL))
	}
	if u.Host == "" {
		return nil, invalidArg("/url", fmt.Sprintf("%q has no host", h.URL))
	}
	if u.User != nil {
		return nil, invalidArg("/url", "credentials in a URL are refused")
	}
	if h.g.allow.Empty() {
		return nil, permanent("http_get: this executor allows no host (its allowlist is empty)")
	}
	if !h.g.allow.Allows(u) {
		return nil, permanent("http_get: host %q is not in this executor's allowlist", u.Host)
	}
	ctx, cancel := context.WithTimeout(ctx, h.g.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, invalidArg("/url", fmt.Sprintf("%q: %v", h.URL, err))
	}
	req.Header.Set("User-Agent", "toolfleet-http_get/1")
	resp, err := h.g.client.Do(req)
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, h.g.maxBytes+1))
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	truncated := int64(len(body)) > h.g.maxBytes
	if truncated {
		body = body[:h.g.maxBytes]
	}
	res := HTTPResult{URL: resp.Request.URL.Redacted(), Status: resp.StatusCode,
		Headers: make(map[string]string), Truncated: truncated}
	for _, name := range responseHeaders {
		if v := resp.Header.Get(name); v != "" {
			res.Headers[name] = v
		}
	}
	res.Body, res.Encoding = encodeContent(body, truncated)
	return res, nil
}

// fail classifies a failed request: a refused redirect is permanent, the end of the
// context a timeout, anything else (refused connection, reset, DNS) may pass on a retry.
func (h *HTTPGet) fail(ctx context.Context, err error) *tools.Error {
	var refused *redirectRefused
	if errors.As(err, &refused) {
		return tools.Wrap(tools.CodeToolFailedPermanent, err,
			fmt.Sprintf("http_get: %s redirected to %s: %s", h.URL, refused.to, refused.why))
	}
	if ctx.Err() != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return tools.Wrap(tools.CodeTimeout, err, fmt.Sprintf("http_get: %s did not answer in time", h.URL))
		}
		return tools.Wrap(tools.CodeCanceled, err, "http_get: canceled")
	}
	return tools.Wrap(tools.CodeToolFailed, err, fmt.Sprintf("http_get: %v", err))
}
