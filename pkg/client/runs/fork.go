package runs

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
)

// ForkPoint names the run a fork was forked from, and the step it took anew.
type ForkPoint struct {
	Run  string `json:"run"`
	Step int    `json:"step"`
}

// ForkRequest is the body of POST /v1/runs/{id}/fork: the step to take anew, a
// resume's edits of the conversation up to it (indices of [Client.MessagesAt]), and
// the fork's model and tools (empty: the run's).
type ForkRequest struct {
	FromStep int `json:"fromStep"`
	ResumeRequest
	Model string   `json:"model,omitempty"`
	Tools []string `json:"tools,omitempty"`
}

// Fork starts a new run from step r.FromStep of the run id: its conversation is the
// run's up to that step, edited by r; the calls of earlier steps are not run again
// (their recorded results are reused). It runs with the caller's identity and rights.
// A step the run does not have is a 400 *[Error], another tenant's run a 404.
func (c *Client) Fork(ctx context.Context, id string, r ForkRequest) (*Run, error) {
	var run Run
	if err := c.do(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(id)+"/fork", r, &run); err != nil {
		return nil, err
	}
	return &run, nil
}

// MessagesAt returns the conversation the model of run id was asked at step: the
// indices a ForkRequest from that step names.
func (c *Client) MessagesAt(ctx context.Context, id string, step int) ([]json.RawMessage, error) {
	var msgs []json.RawMessage
	path := "/v1/runs/" + url.PathEscape(id) + "/messages?view=model&step=" + strconv.Itoa(step)
	if err := c.do(ctx, http.MethodGet, path, nil, &msgs); err != nil {
		return nil, err
	}
	return msgs, nil
}

// Diff compares runs a and b step by step (from the fork point when one is a fork of
// the other). Either run outside the caller's tenant is a 404 *[Error].
func (c *Client) Diff(ctx context.Context, a, b string) (*RunDiff, error) {
	var d RunDiff
	if err := c.do(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(a)+"/diff/"+url.PathEscape(b), nil, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// Events returns a page of the events of run id stored so far, oldest first, from the
// one after cursor (a previous page's Next; empty: from the first); limit 0 is the
// server's default page size.
func (c *Client) Events(ctx context.Context, id, cursor string, limit int) (*EventPage, error) {
	q := url.Values{}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var page EventPage
	if err := c.do(ctx, http.MethodGet, withQuery("/v1/runs/"+url.PathEscape(id)+"/events", q), nil, &page); err != nil {
		return nil, err
	}
	return &page, nil
}

// EventPage is a page of a run's stored events; Next is the cursor of the next page,
// empty on the last.
type EventPage struct {
	Events []StoredEvent `json:"events"`
	Next   string        `json:"next,omitempty"`
}

// StoredEvent is a run event as the events list gives it: its sequence (the SSE id),
// its kind and its data.
type StoredEvent struct {
	Seq  uint64          `json:"seq"`
	What string          `json:"what"`
	Data json.RawMessage `json:"data"`
}

// RunDiff is the comparison of runs A and B: their steps aligned (Shared counts the
// steps before the fork point, which a fork reused), with totals.
type RunDiff struct {
	A      DiffRun    `json:"a"`
	B      DiffRun    `json:"b"`
	Shared int        `json:"shared"`
	Steps  []StepDiff `json:"steps"`
	Totals DiffTotals `json:"totals"`
}

// DiffRun is one side of a diff; From is its step aligned with the other's first.
type DiffRun struct {
	ID          string     `json:"id"`
	Model       string     `json:"model"`
	Status      string     `json:"status"`
	Termination string     `json:"termination,omitempty"`
	Answer      string     `json:"answer,omitempty"`
	Steps       int        `json:"steps"`
	From        int        `json:"from"`
	ForkedFrom  *ForkPoint `json:"forkedFrom,omitempty"`
}

// StepDiff compares step A of one run with step B of the other (nil: that run has no
// such step).
type StepDiff struct {
	A           *int       `json:"a"`
	B           *int       `json:"b"`
	Changed     bool       `json:"changed"`
	TextChanged bool       `json:"textChanged"`
	TextA       string     `json:"textA,omitempty"`
	TextB       string     `json:"textB,omitempty"`
	Calls       []CallDiff `json:"calls"`
	DurationMS  Delta      `json:"durationMs"`
	Tokens      Delta      `json:"tokens"`
	Cost        Delta      `json:"cost"`
}

// CallDiff pairs the Index-th call of Tool in a step of each run; Arguments and
// Result are RFC 6902 operations from A's to B's (empty: the same).
type CallDiff struct {
	Tool          string    `json:"tool"`
	Index         int       `json:"index"`
	A             *CallSide `json:"a"`
	B             *CallSide `json:"b"`
	Arguments     []PatchOp `json:"arguments"`
	Result        []PatchOp `json:"result"`
	StatusChanged bool      `json:"statusChanged"`
	ErrorChanged  bool      `json:"errorChanged"`
	DurationMS    Delta     `json:"durationMs"`
}

// CallSide is one side's call of a CallDiff.
type CallSide struct {
	ID         string          `json:"id"`
	Status     string          `json:"status"`
	Error      string          `json:"error,omitempty"`
	Arguments  json.RawMessage `json:"arguments,omitempty"`
	Output     json.RawMessage `json:"output,omitempty"`
	DurationMS int64           `json:"durationMs"`
}

// PatchOp is one RFC 6902 JSON Patch operation.
type PatchOp struct {
	Op    string          `json:"op"`
	Path  string          `json:"path"`
	From  string          `json:"from,omitempty"`
	Value json.RawMessage `json:"value,omitempty"`
}

// Delta is a quantity of each side and B - A.
type Delta struct {
	A     float64 `json:"a"`
	B     float64 `json:"b"`
	Delta float64 `json:"delta"`
}

// DiffTotals sums a diff.
type DiffTotals struct {
	Steps        int   `json:"steps"`
	ChangedSteps int   `json:"changedSteps"`
	Calls        int   `json:"calls"`
	ChangedCalls int   `json:"changedCalls"`
	DurationMS   Delta `json:"durationMs"`
	Tokens       Delta `json:"tokens"`
	Cost         Delta `json:"cost"`
}
