package runs_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/pkg/client/runs"
)

// busyPlanner answers the first busy requests with the planner's 429 (Retry-After:
// retryAfter seconds), then starts the run; it keeps what each request sent, and when.
type busyPlanner struct {
	busy, retryAfter int
	mu               sync.Mutex
	bodies           []string
	at               []time.Time
}

func (b *busyPlanner) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	b.mu.Lock()
	b.bodies, b.at = append(b.bodies, string(body)), append(b.at, time.Now())
	n := len(b.bodies)
	b.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if n <= b.busy {
		w.Header().Set("Retry-After", strconv.Itoa(b.retryAfter))
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, `{"error":{"status":429,"message":"the planner is saturated; try again after 1s","retryAfter":`+strconv.Itoa(b.retryAfter)+`}}`)
		return
	}
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, `{"id":"r1","status":"done","termination":"completed","answer":"hi"}`)
}

func (b *busyPlanner) requests() ([]string, []time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.bodies...), append([]time.Time(nil), b.at...)
}

// A start the planner refused as too busy (429) is sent again, the same, no sooner than
// its Retry-After, and the client returns the run it then got.
func TestStartRetriesWhenBusy(t *testing.T) {
	bp := &busyPlanner{busy: 1, retryAfter: 1}
	srv := httptest.NewServer(bp)
	defer srv.Close()
	c, _ := runs.New(srv.URL)
	run, err := c.Start(context.Background(), runs.StartRequest{Input: "hi", Wait: true})
	if err != nil || run.ID != "r1" || !run.Done() {
		t.Fatalf("start: %+v, %v; want the run the second answer gave", run, err)
	}
	bodies, at := bp.requests()
	if len(bodies) != 2 || bodies[0] != bodies[1] || bodies[0] != `{"input":"hi","wait":true}` {
		t.Fatalf("requests %q, want the same start twice", bodies)
	}
	if waited := at[1].Sub(at[0]); waited < time.Second {
		t.Errorf("asked again after %s, before the Retry-After of 1s", waited)
	}
}

// With retries off, a 429 is the caller's: an *Error that says busy and when to come
// back. A Retry-After past the client's longest wait is returned at once too, and the
// end of the caller's context ends a wait.
func TestBusyWithoutRetry(t *testing.T) {
	for _, tt := range []struct {
		name       string
		retryAfter int
		opts       []runs.Option
		timeout    time.Duration
		requests   int
		ctxErr     error
	}{
		{"retries off", 1, []runs.Option{runs.WithRetries(0)}, time.Minute, 1, nil},
		{"retry-after too long", 3600, nil, time.Minute, 1, nil},
		{"context ends first", 20, nil, 200 * time.Millisecond, 1, context.DeadlineExceeded},
	} {
		t.Run(tt.name, func(t *testing.T) {
			bp := &busyPlanner{busy: 100, retryAfter: tt.retryAfter}
			srv := httptest.NewServer(bp)
			defer srv.Close()
			c, _ := runs.New(srv.URL, tt.opts...)
			ctx, cancel := context.WithTimeout(context.Background(), tt.timeout)
			defer cancel()
			_, err := c.Start(ctx, runs.StartRequest{Input: "hi"})
			var apiErr *runs.Error
			if !runs.IsBusy(err) || !errors.As(err, &apiErr) || apiErr.RetryAfter != tt.retryAfter || apiErr.Message == "" {
				t.Fatalf("start: %v, want the 429 with its Retry-After", err)
			}
			if tt.ctxErr != nil && !errors.Is(err, tt.ctxErr) {
				t.Errorf("start: %v, want %v too", err, tt.ctxErr)
			}
			if bodies, _ := bp.requests(); len(bodies) != tt.requests {
				t.Errorf("%d requests, want %d", len(bodies), tt.requests)
			}
		})
	}
}
