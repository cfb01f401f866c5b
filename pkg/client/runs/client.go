package runs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// DefaultURL is where `toolfleet dev` serves the planner's API.
const DefaultURL = "http://127.0.0.1:8080"

// Client drives runs over one planner's HTTP API. It is safe for concurrent use.
type Client struct {
	base    *url.URL
	token   string
	http    *http.Client
	retries int
}

// DefaultRetries is how many times a request the planner refused as too busy (429) is
// sent again by default ([WithRetries]).
const DefaultRetries = 10

// maxRetryWait is the longest Retry-After a client waits: a planner that asks for more
// gets its 429 *[Error] back at once.
const maxRetryWait = 30 * time.Second

// Option configures a [Client].
type Option func(*Client)

// WithToken sends token as the bearer token of every request: the planner acts with its
// tenant and role.
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithHTTPClient sends the requests with hc instead of a client of this package's own.
// Its Timeout, if any, also bounds a followed run's event stream: prefer contexts.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// WithRetries sets how many times a request the planner refused with 429 (saturated by
// a server that falls behind; nothing of the request was stored) is sent again, each
// after the wait its Retry-After asks (at most 30s, plus up to a quarter more so that
// refused clients do not all come back at once), within the request's context. 0
// turns retrying off: the 429 is returned as an *[Error]. Default [DefaultRetries].
func WithRetries(n int) Option { return func(c *Client) { c.retries = max(n, 0) } }

// New returns a client of the planner API at baseURL (e.g. [DefaultURL]).
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil {
		return nil, fmt.Errorf("runs: the API URL %q: %w", baseURL, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("runs: the API URL %q: want http://host:port or https://host", baseURL)
	}
	c := &Client{base: u, http: &http.Client{Transport: http.DefaultTransport}, retries: DefaultRetries}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// URL returns the API's base URL.
func (c *Client) URL() string { return c.base.String() }

// Error is the planner's answer to a request it refused, or could not serve.
type Error struct {
	// Status is the HTTP status: 400 a bad request (Message says what), 401 a missing or
	// wrong token, 403 not allowed, 404 not found (also another tenant's run), 409 a
	// conflict with the run's state or an approval's first answer, 429 a planner too
	// busy to start a run now (retried by the client: [WithRetries]), 503 try again.
	Status     int               `json:"status"`
	Message    string            `json:"message"`
	Violations []json.RawMessage `json:"violations,omitempty"`
	// Approval is the decision that stood, for an answer refused as late (409).
	Approval json.RawMessage `json:"approval,omitempty"`
	// RetryAfter is how many seconds the planner asked to wait before trying again
	// (429).
	RetryAfter int `json:"retryAfter,omitempty"`
	// Run is the run as it stands, beside a control request refused for its state.
	Run *Run `json:"-"`
}

func (e *Error) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Status, http.StatusText(e.Status), e.Message)
}

// IsBusy reports whether err is the planner's 429: it was too busy to take the request
// (a new run) and stored nothing of it; the same request may be sent again later.
func IsBusy(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == http.StatusTooManyRequests
}

// IsNotFound reports whether err is the planner's 404.
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == http.StatusNotFound
}

// Start starts a run and returns it as stored, running; follow it with [Client.Follow]
// or [Client.Wait]. With req.Wait, the planner answers once the run is done or paused
// (or with the run as it is after req.WaitTimeout): one request for a short run. A
// planner too busy to start it answers 429, and the client asks again ([WithRetries]).
func (c *Client) Start(ctx context.Context, req StartRequest) (*Run, error) {
	var run Run
	if err := c.do(ctx, http.MethodPost, "/v1/runs", req, &run); err != nil {
		return nil, err
	}
	return &run, nil
}

// Get returns the run id: status, answer, and every call with its timeline.
func (c *Client) Get(ctx context.Context, id string) (*Run, error) {
	var run Run
	if err := c.do(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(id), nil, &run); err != nil {
		return nil, err
	}
	return &run, nil
}

// Wait returns the run id once it is done or paused, following its events until its
// last done event or a pause it is still in (a long run costs one open stream, not
// polling). A run waiting for an approval waits with it. ctx bounds the wait.
func (c *Client) Wait(ctx context.Context, id string) (*Run, error) {
	for e, err := range c.Follow(ctx, id, 0) {
		if err != nil {
			return nil, err
		}
		if e.What == "paused" { // an earlier pause, replayed, is over: go on
			if run, err := c.Get(ctx, id); err != nil || run.Status == StatusPaused {
				return run, err
			}
		}
	}
	return c.Get(ctx, id)
}

// Pause asks the run id to pause at its next step boundary (once its current step's
// calls have their results, before the model is asked again), with reason (may be
// empty). A run that ended, or a nested run, is a 409 *[Error] with the run beside it.
func (c *Client) Pause(ctx context.Context, id, reason string) (*Run, error) {
	var run Run
	body := map[string]string{}
	if reason != "" {
		body["reason"] = reason
	}
	if err := c.do(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(id)+"/pause", body, &run); err != nil {
		return nil, err
	}
	return &run, nil
}

// Resume resumes the paused run id, first applying r's edits and changes (the zero
// ResumeRequest resumes it as it is). A run that is not paused is a 409 *[Error]; an
// edit that does not fit the conversation a 400.
func (c *Client) Resume(ctx context.Context, id string, r ResumeRequest) (*Run, error) {
	var run Run
	if err := c.do(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(id)+"/resume", r, &run); err != nil {
		return nil, err
	}
	return &run, nil
}

// ModelMessages returns the conversation of the paused run id as its model will be
// asked it, resume edits applied: the indices a ResumeRequest names.
func (c *Client) ModelMessages(ctx context.Context, id string) ([]json.RawMessage, error) {
	var msgs []json.RawMessage
	if err := c.do(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(id)+"/messages?view=model", nil, &msgs); err != nil {
		return nil, err
	}
	return msgs, nil
}

// Messages returns the conversation of the run id in view: [ViewRun] (its record, the
// default when empty) or [ViewModel] (a paused run's conversation as its model will be
// asked it: the indices a ResumeRequest names; 409 for a run that is not paused).
func (c *Client) Messages(ctx context.Context, id, view string) ([]Message, error) {
	path := "/v1/runs/" + url.PathEscape(id) + "/messages"
	if view != "" {
		path += "?view=" + url.QueryEscape(view)
	}
	var msgs []Message
	if err := c.do(ctx, http.MethodGet, path, nil, &msgs); err != nil {
		return nil, err
	}
	return msgs, nil
}

// FollowUp adds a message to the run id and continues it (a run that ended is
// reopened). It returns the run as it stands.
func (c *Client) FollowUp(ctx context.Context, id string, f FollowUp) (*Run, error) {
	var run Run
	if err := c.do(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(id)+"/messages", f, &run); err != nil {
		return nil, err
	}
	return &run, nil
}

// ChangeTools enables and disables tools of the run id for its next steps, and
// returns the run as it stands. A tool the caller may not call is a 403 *[Error].
func (c *Client) ChangeTools(ctx context.Context, id string, ch ToolsChange) (*Run, error) {
	var run Run
	if err := c.do(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(id)+"/tools", ch, &run); err != nil {
		return nil, err
	}
	return &run, nil
}

// Cancel ends the run id, canceled, with reason (may be empty): calls without a result
// are canceled, calls waiting for approval answered canceled. A run that has ended
// already is a 409 *[Error] with the run beside it.
func (c *Client) Cancel(ctx context.Context, id, reason string) (*Run, error) {
	var run Run
	body := map[string]string{}
	if reason != "" {
		body["reason"] = reason
	}
	if err := c.do(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(id)+"/cancel", body, &run); err != nil {
		return nil, err
	}
	return &run, nil
}

// ListRuns returns a page of the caller's tenant's runs, newest first.
func (c *Client) ListRuns(ctx context.Context, f RunFilter) (*RunPage, error) {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("status", f.Status)
	set("termination", f.Termination)
	set("outcome", f.Outcome)
	for k, v := range f.Metadata {
		q.Set("metadata."+k, v)
	}
	set("tool", f.Tool)
	set("parent", f.Parent)
	set("forkedFrom", f.ForkedFrom)
	set("q", f.Query)
	set("cursor", f.Cursor)
	if !f.Since.IsZero() {
		q.Set("since", f.Since.UTC().Format(time.RFC3339))
	}
	if !f.Until.IsZero() {
		q.Set("until", f.Until.UTC().Format(time.RFC3339))
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	var page RunPage
	if err := c.do(ctx, http.MethodGet, withQuery("/v1/runs", q), nil, &page); err != nil {
		return nil, err
	}
	return &page, nil
}

// ListApprovals returns a page of the approvals of the caller's tenant's calls.
func (c *Client) ListApprovals(ctx context.Context, f ApprovalFilter) (*ApprovalPage, error) {
	q := url.Values{}
	if f.Status != "" {
		q.Set("status", f.Status)
	}
	if f.Cursor != "" {
		q.Set("cursor", f.Cursor)
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	var page ApprovalPage
	if err := c.do(ctx, http.MethodGet, withQuery("/v1/approvals", q), nil, &page); err != nil {
		return nil, err
	}
	return &page, nil
}

// Answer answers the approval of call callID. The first answer wins; a later one is a
// 409 *[Error] whose Approval is the decision that stood.
func (c *Client) Answer(ctx context.Context, callID string, a Answer) error {
	return c.do(ctx, http.MethodPost, "/v1/approvals/"+url.PathEscape(callID), a, nil)
}

// Approve approves the call callID as it is.
func (c *Client) Approve(ctx context.Context, callID, reason string) error {
	return c.Answer(ctx, callID, Answer{Decision: "approve", Reason: reason})
}

// Deny denies the call callID: it does not run, and its result says denied with reason.
func (c *Client) Deny(ctx context.Context, callID, reason string) error {
	return c.Answer(ctx, callID, Answer{Decision: "deny", Reason: reason})
}

// Modify approves the call callID with arguments in place of the model's (checked
// against the tool's schema: a 400 *[Error] with the violations when they break it).
func (c *Client) Modify(ctx context.Context, callID string, arguments json.RawMessage, reason string) error {
	return c.Answer(ctx, callID, Answer{Decision: "approve", Arguments: arguments, Reason: reason})
}

// Tools returns the tools the caller may call, sorted by name, with the fleet's state
// of each.
func (c *Client) Tools(ctx context.Context) ([]Tool, error) {
	var body toolList
	if err := c.do(ctx, http.MethodGet, "/v1/tools", nil, &body); err != nil {
		return nil, err
	}
	return body.Tools, nil
}

func withQuery(path string, q url.Values) string {
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}

// newRequest builds a request to path (with its query) with the token.
func (c *Client) newRequest(ctx context.Context, method, path string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base.String()+path, body)
	if err != nil {
		return nil, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	return req, nil
}

// do sends in as JSON (none when nil) and decodes a 2xx answer into out (when not nil);
// any other answer is an *Error. A 429 is sent again after its Retry-After, up to
// c.retries times.
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body []byte
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = b
	}
	for retry := 0; ; retry++ {
		err := c.doOnce(ctx, method, path, body, in != nil, out)
		var e *Error
		if retry >= c.retries || !errors.As(err, &e) || e.Status != http.StatusTooManyRequests {
			return err
		}
		wait := time.Duration(e.RetryAfter) * time.Second
		if wait <= 0 {
			wait = time.Second
		}
		if wait > maxRetryWait {
			return err
		}
		t := time.NewTimer(wait + rand.N(wait/4+1))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("runs: %s %s: %w (after %w)", method, path, ctx.Err(), err)
		}
	}
}

// doOnce sends one request with body (JSON, when hasBody) and decodes a 2xx answer into
// out (when not nil); any other answer is an *Error.
func (c *Client) doOnce(ctx context.Context, method, path string, body []byte, hasBody bool, out any) error {
	var rd io.Reader
	if hasBody {
		rd = bytes.NewReader(body)
	}
	req, err := c.newRequest(ctx, method, path, rd)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return readError(resp)
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body) // read out for the connection's reuse; the answer is in already
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("runs: %s %s: decode the answer: %w", method, path, err)
	}
	return nil
}

// readError reads the planner's {"error":{...},"run":{...}}; an answer in another shape
// (a proxy's page) is an *Error with the status and the start of the body. A
// Retry-After header is the error's RetryAfter.
func readError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20)) // what could be read; the status says the rest
	var body struct {
		Error *Error `json:"error"`
		Run   *Run   `json:"run"`
	}
	if json.Unmarshal(b, &body) != nil || body.Error == nil {
		msg := strings.TrimSpace(string(b))
		if len(msg) > 200 {
			msg = msg[:200] + "…"
		}
		if msg == "" {
			msg = "no message"
		}
		body.Error = &Error{Status: resp.StatusCode, Message: msg}
	}
	if body.Error.Status == 0 {
		body.Error.Status = resp.StatusCode
	}
	if s := retryAfter(resp.Header.Get("Retry-After"), time.Now()); s > 0 {
		body.Error.RetryAfter = s
	}
	body.Error.Run = body.Run
	return body.Error
}

// retryAfter reads a Retry-After header, in seconds or as an HTTP date, as whole
// seconds from now (rounded up); 0 when there is none or it cannot be read.
func retryAfter(v string, now time.Time) int {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil {
		return max(s, 0)
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return int((t.Sub(now) + time.Second - 1) / time.Second)
	}
	return 0
}
