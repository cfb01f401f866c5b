package toolsfile

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// seen is what the endpoint received.
type seen struct {
	mu      sync.Mutex
	method  string
	body    string
	headers http.Header
}

func endpoint(t *testing.T) (*httptest.Server, *seen) {
	t.Helper()
	s := &seen{}
	mux := http.NewServeMux()
	record := func(r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.method, s.body, s.headers = r.Method, string(b), r.Header.Clone()
		s.mu.Unlock()
	}
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {
		record(r)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"sum": 3}`))
	})
	mux.HandleFunc("/text", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("plain answer\n")) })
	mux.HandleFunc("/empty", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("/bad", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":"field x is required"}`, http.StatusUnprocessableEntity)
	})
	mux.HandleFunc("/busy", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "slow down", http.StatusTooManyRequests) })
	mux.HandleFunc("/down", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "database down", http.StatusServiceUnavailable)
	})
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ok", http.StatusTemporaryRedirect) })
	mux.HandleFunc("/huge", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(strings.Repeat("x", 1000))) })
	stop := make(chan struct{})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		// Reading the body first lets the server notice when the client hangs up.
		_, _ = io.ReadAll(r.Body)
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stop) }) // runs first: no handler outlives the test
	return srv, s
}

func httpSpec(h *HTTP) *Spec { return &Spec{Definition: tools.Definition{Name: "remote"}, HTTP: h} }

func TestHTTPRunnerPostsTheArguments(t *testing.T) {
	t.Setenv("TF_TOKEN", "s3cret")
	t.Setenv("TF_OTHER", "not referenced")
	srv, s := endpoint(t)
	spec := httpSpec(&HTTP{URL: srv.URL + "/ok", PassEnv: []string{"TF_TOKEN"},
		Headers: map[string]string{"Authorization": "Bearer ${TF_TOKEN}", "X-Fixed": "1"}})
	ctx := tools.WithCallInfo(context.Background(), tools.CallInfo{CallID: "c-9", RunID: "r-1", Attempt: 1})
	out, err := spec.Run(ctx, json.RawMessage(`{"a":1,"b":2}`))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if string(out.(json.RawMessage)) != `{"sum": 3}` {
		t.Fatalf("output = %s", out)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.method != "POST" || s.body != `{"a":1,"b":2}` {
		t.Fatalf("endpoint saw %s %s", s.method, s.body)
	}
	for k, want := range map[string]string{"Content-Type": "application/json", "Authorization": "Bearer s3cret",
		"X-Fixed": "1", "Toolfleet-Call-Id": "c-9", "Toolfleet-Run-Id": "r-1", "Toolfleet-Attempt": "1", "Toolfleet-Tool": "remote"} {
		if got := s.headers.Get(k); got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
}

func TestHTTPRunnerMapsStatuses(t *testing.T) {
	t.Parallel()
	srv, _ := endpoint(t)
	tests := []struct {
		path     string
		want     string // the output, when the call succeeds
		code     tools.Code
		fragment string
		status   int
	}{
		{path: "/text", want: `"plain answer"`},
		{path: "/empty", want: `null`},
		{path: "/bad", code: tools.CodeToolFailedPermanent, fragment: "422 Unprocessable Entity: {\"error\":\"field x is required\"}", status: 422},
		{path: "/busy", code: tools.CodeToolFailed, fragment: "429 Too Many Requests: slow down", status: 429},
		{path: "/down", code: tools.CodeToolFailed, fragment: "503 Service Unavailable: database down", status: 503},
		{path: "/moved", code: tools.CodeToolFailedPermanent, fragment: "307 Temporary Redirect", status: 307},
		{path: "/huge", code: tools.CodeToolFailedPermanent, fragment: "larger than 100 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			t.Parallel()
			out, err := httpSpec(&HTTP{URL: srv.URL + tt.path, MaxResponseBytes: 100}).Run(context.Background(), json.RawMessage(`{}`))
			if tt.code == "" {
				if err != nil || string(out.(json.RawMessage)) != tt.want {
					t.Fatalf("Run = %s, %v; want %s", out, err, tt.want)
				}
				return
			}
			wantToolError(t, err, tt.code, tt.fragment)
			if tt.status != 0 {
				var se *StatusError
				if !errors.As(err, &se) || se.Status != tt.status {
					t.Fatalf("cause = %v, want StatusError %d", se, tt.status)
				}
			}
			if tt.code.Retryable() != (tt.code == tools.CodeToolFailed) {
				t.Fatalf("code %s retryable = %v", tt.code, tt.code.Retryable())
			}
		})
	}
}

func TestHTTPRunnerTimeoutAndNetworkFailure(t *testing.T) {
	t.Parallel()
	srv, _ := endpoint(t)
	_, err := httpSpec(&HTTP{URL: srv.URL + "/slow", Timeout: tools.Duration(50 * time.Millisecond)}).
		Run(context.Background(), json.RawMessage(`{}`))
	wantToolError(t, err, tools.CodeTimeout, "did not answer in time")

	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	_, err = httpSpec(&HTTP{URL: closed.URL}).Run(context.Background(), json.RawMessage(`{}`))
	wantToolError(t, err, tools.CodeToolFailed, "remote")
}
