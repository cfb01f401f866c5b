package plannerapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolfleet/toolfleet/internal/planner"
)

func TestAPIRefusesBadRequests(t *testing.T) {
	b := setup(t, map[string]string{"main": answerScript})
	srv := httptest.NewServer(Handler(b.p, Auth{Token: "tok"}))
	defer srv.Close()

	tests := []struct {
		name, method, path, body, token string
		status                          int
		want                            string
	}{
		{"no token", "POST", "/v1/runs", `{"input":"hi"}`, "", 401, "bearer token"},
		{"wrong token", "POST", "/v1/runs", `{"input":"hi"}`, "nope", 401, "bearer token"},
		{"malformed json", "POST", "/v1/runs", `{"input":`, "tok", 400, "malformed JSON"},
		{"unknown field", "POST", "/v1/runs", `{"input":"hi","temperature":2}`, "tok", 400, "unknown field"},
		{"empty body", "POST", "/v1/runs", ``, "tok", 400, "empty"},
		{"body over the limit", "POST", "/v1/runs", `{"input":"` + strings.Repeat("x", maxRequestBytes) + `"}`, "tok", 413, "larger than"},
		{"no input", "POST", "/v1/runs", `{}`, "tok", 400, "input or messages"},
		{"bad role", "POST", "/v1/runs", `{"messages":[{"role":"wizard","text":"x"}]}`, "tok", 400, "role"},
		{"unknown model", "POST", "/v1/runs", `{"input":"hi","model":"gpt-17"}`, "tok", 400, `unknown model "gpt-17"`},
		{"unknown tool", "POST", "/v1/runs", `{"input":"hi","tools":["add","teleport"]}`, "tok", 400, `unknown tool "teleport" in tools`},
		{"unknown active tool", "POST", "/v1/runs", `{"input":"hi","activeTools":["teleport"]}`, "tok", 400, `unknown tool "teleport" in activeTools`},
		{"active tool outside tools", "POST", "/v1/runs", `{"input":"hi","tools":["add"],"activeTools":["echo"]}`, "tok", 400, `"echo" in activeTools`},
		{"bad tool choice", "POST", "/v1/runs", `{"input":"hi","toolChoice":"some of them"}`, "tok", 400, "toolChoice"},
		{"tool choice outside tools", "POST", "/v1/runs", `{"input":"hi","tools":["add"],"toolChoice":"echo"}`, "tok", 400, "not in the run's tools"},
		{"max steps too big", "POST", "/v1/runs", `{"input":"hi","limits":{"maxSteps":1001}}`, "tok", 400, "limits.maxSteps"},
		{"bad loop action", "POST", "/v1/runs", `{"input":"hi","limits":{"loopAction":"panic"}}`, "tok", 400, "limits.loopAction"},
		{"negative budget", "POST", "/v1/runs", `{"input":"hi","limits":{"tokenBudget":-5}}`, "tok", 400, "limits.tokenBudget"},
		{"bad wait timeout", "POST", "/v1/runs", `{"input":"hi","wait":true,"waitTimeout":"forever"}`, "tok", 400, "waitTimeout"},
		{"unknown run", "GET", "/v1/runs/rNOPE", ``, "tok", 404, "no run"},
		{"unknown run events", "GET", "/v1/runs/rNOPE/events", ``, "tok", 404, "no run"},
		{"approval bad decision", "POST", "/v1/approvals/rX-0-0", `{"decision":"maybe"}`, "tok", 400, "decision"},
		{"approval unknown call", "POST", "/v1/approvals/rX-0-0", `{"decision":"approve"}`, "tok", 404, "no call"},
		{"unknown endpoint", "GET", "/v2/everything", ``, "tok", 404, "no such endpoint"},
		{"wrong content type", "POST", "/v1/runs", `input=hi`, "tok", 415, "JSON body"},
		{"probe needs no token", "GET", "/readyz", ``, "", 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, srv.URL+tt.path, strings.NewReader(tt.body))
			if tt.token != "" {
				req.Header.Set("Authorization", "Bearer "+tt.token)
			}
			if tt.name == "wrong content type" {
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status {
				t.Fatalf("status = %d, want %d; body %s", resp.StatusCode, tt.status, body)
			}
			if tt.status == 200 {
				return
			}
			var e struct {
				Error planner.APIError `json:"error"`
			}
			if err := json.Unmarshal(body, &e); err != nil {
				t.Fatalf("body is not a JSON error: %s", body)
			}
			if !strings.Contains(e.Error.Message, tt.want) {
				t.Fatalf("error message %q does not say %q", e.Error.Message, tt.want)
			}
		})
	}
}

// A run whose model answers at once completes, and the API shows its answer.
func TestAPIRunAndWait(t *testing.T) {
	b := setup(t, map[string]string{"main": answerScript})
	srv := httptest.NewServer(Handler(b.p, Auth{}))
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/v1/runs", "application/json", strings.NewReader(`{"input":"say hello","wait":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v planner.RunView
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || v.Status != planner.StatusDone || v.Termination != planner.TerminationCompleted || v.Answer != "hello there" {
		t.Fatalf("status %d, run %+v", resp.StatusCode, v)
	}
	if resp.Header.Get("Location") != "/v1/runs/"+v.ID {
		t.Fatalf("Location = %q", resp.Header.Get("Location"))
	}
	got, err := http.Get(srv.URL + "/v1/runs/" + v.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Body.Close()
	var v2 planner.RunView
	_ = json.NewDecoder(got.Body).Decode(&v2)
	if v2.Answer != "hello there" || v2.Steps != 1 || v2.Tokens == 0 {
		t.Fatalf("GET run = %+v", v2)
	}
}

// A request that failed because NATS did not answer in time (a server restarting, a
// stream electing its leader) is answered 503 with Retry-After, so a client knows to try
// again; other failures stay 500, and the API's own errors keep their status.
func TestUnavailableIs503(t *testing.T) {
	for _, c := range []struct {
		err    error
		status int
	}{
		{fmt.Errorf("store run r1: %w", context.DeadlineExceeded), http.StatusServiceUnavailable},
		{fmt.Errorf("publish: %w", nats.ErrNoResponders), http.StatusServiceUnavailable},
		{fmt.Errorf("publish: %w", jetstream.ErrAsyncPublishTimeout), http.StatusServiceUnavailable},
		{fmt.Errorf("publish: %w", &jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}), http.StatusServiceUnavailable},
		{fmt.Errorf("decode run r1: %w", errors.New("unexpected end of JSON input")), http.StatusInternalServerError},
		{fmt.Errorf("publish: %w", &jetstream.APIError{Code: 400, ErrorCode: 10054, Description: "message size exceeds maximum allowed"}), http.StatusInternalServerError},
		{&planner.APIError{Status: http.StatusConflict, Message: "run r1 ended canceled"}, http.StatusConflict},
	} {
		rec := httptest.NewRecorder()
		writeError(rec, c.err)
		if rec.Code != c.status {
			t.Errorf("%v: %d, want %d", c.err, rec.Code, c.status)
		}
		if retry := rec.Header().Get("Retry-After"); (retry != "") != (c.status == http.StatusServiceUnavailable) {
			t.Errorf("%v: Retry-After %q", c.err, retry)
		}
	}
}

// A caller's W3C trace context on POST /v1/runs is the run's: the run keeps its trace id
// (and passes it to its calls and events) with tracing off, as here.
func TestStartTakesTheCallersTraceContext(t *testing.T) {
	b := setup(t, map[string]string{"main": answerScript})
	srv := httptest.NewServer(Handler(b.p, Auth{}))
	defer srv.Close()
	req, _ := http.NewRequest("POST", srv.URL+"/v1/runs", strings.NewReader(`{"input":"say hello","wait":true}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	req.Header.Set("tracestate", "vendor=x")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v planner.RunView
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	run, err := b.p.Get(b.ctx, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(run.TraceParent, "4bf92f3577b34da6a3ce929d0e0e4736") || run.TraceState != "vendor=x" {
		t.Fatalf("the run's trace context %q / %q; want the caller's trace", run.TraceParent, run.TraceState)
	}
}
