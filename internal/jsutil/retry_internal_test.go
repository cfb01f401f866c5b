package jsutil

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// A setup try whose request is never answered (a node that died holding it, a cluster
// still forming) ends after its own timeout and the next try starts: one lost request
// costs one try, not the caller's whole context, and RetrySetup returns only when a try
// succeeds.
func TestRetrySetupBoundsEachTry(t *testing.T) {
	defer func(d time.Duration) { setupTryTimeout = d }(setupTryTimeout)
	setupTryTimeout = 50 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tries, retries := 0, 0
	err := RetrySetup(ctx, func(ctx context.Context) error {
		tries++
		dl, ok := ctx.Deadline()
		if !ok || time.Until(dl) > setupTryTimeout {
			t.Errorf("try %d: deadline %v (set %v), want at most %s away", tries, dl, ok, setupTryTimeout)
		}
		if tries < 3 {
			<-ctx.Done() // the request is lost: only the try's own deadline ends it
			return fmt.Errorf("ensure stream %s: %w", events.StreamCalls, ctx.Err())
		}
		return nil
	}, func(err error, _ time.Duration) {
		retries++
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("retried %v, want the try's deadline", err)
		}
	})
	if err != nil || tries != 3 || retries != 2 {
		t.Fatalf("RetrySetup = %v after %d tries, %d retries; want nil after 3 and 2", err, tries, retries)
	}
}

// What a forming or electing cluster answers is retried; a request the server calls
// wrong, or a closed connection, is final; the caller's context ending ends it.
func TestRetrySetupRetriesWhatPasses(t *testing.T) {
	api := func(code, errCode int) error {
		return fmt.Errorf("ensure stream %s: %w", events.StreamCalls, &jetstream.APIError{Code: code, ErrorCode: jetstream.ErrorCode(errCode), Description: "x"})
	}
	for _, tt := range []struct {
		name  string
		err   error
		retry bool
	}{
		{"context deadline exceeded", fmt.Errorf("ensure stream %s: %w", events.StreamCalls, context.DeadlineExceeded), true},
		{"no responders", nats.ErrNoResponders, true},
		{"nats timeout", nats.ErrTimeout, true},
		{"jetstream not enabled yet", jetstream.ErrJetStreamNotEnabled, true},
		{"JetStream system temporarily unavailable", api(503, 10008), true},
		{"insufficient resources", api(503, 10023), true},
		{"no suitable peers for placement (nodes still joining)", api(400, errCodeNoPeers), true},
		{"cluster member change in progress", api(400, errCodeMemberChangeInPlay), true},
		{"peer not a member", api(400, errCodePeerNotMember), true},
		{"cluster can not handle request (no leader)", api(500, 10009), true},
		{"stream not found on the node that answered", api(404, 10059), true},
		{"request timeout", api(408, 0), true},
		{"stream name already in use with a different configuration", api(400, 10058), false},
		{"subjects overlap", api(400, 10065), false},
		{"replicas > 1 on a server without a cluster", api(500, errCodeReplicasNotSupported), false},
		{"connection closed", nats.ErrConnectionClosed, false},
	} {
		if got := retryable(tt.err); got != tt.retry {
			t.Errorf("%s: retryable = %v, want %v", tt.name, got, tt.retry)
		}
	}

	// The caller's context ending stops the retries with its error, even mid-wait.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := RetrySetup(ctx, func(context.Context) error { return nats.ErrNoResponders }, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("RetrySetup after ctx ended = %v, want ctx's error", err)
	}
	// A final failure is returned at once.
	final := api(400, 10058)
	if err := RetrySetup(context.Background(), func(context.Context) error { return final }, func(error, time.Duration) {
		t.Error("a final failure was retried")
	}); err != final {
		t.Fatalf("RetrySetup = %v, want %v", err, final)
	}
}

// The consume options: a heartbeat under half the expiry (nats.go refuses anything else),
// so that a pull lost with its consumer leader is renewed within two heartbeats; and
// consume errors reported at once, identical ones at most once per period with how many
// were held back.
func TestConsumeOptions(t *testing.T) {
	if PullHeartbeat*2 > PullExpiry || 2*PullHeartbeat > 2*time.Second || PullExpiry > 10*time.Second {
		t.Fatalf("heartbeat %s, expiry %s: a lost leader must be noticed within 2s, and the heartbeat be under half the expiry",
			PullHeartbeat, PullExpiry)
	}
	if n := len(ConsumeOptions(4, nil)); n != 4 {
		t.Fatalf("%d options, want 4 (max messages, expiry, heartbeat, error handler)", n)
	}
	l := &errLimiter{every: 10 * time.Second, seen: map[string]*errSeen{}}
	t0 := time.Now()
	steps := []struct {
		key     string
		at      time.Duration
		report  bool
		repeats int
	}{
		{"no heartbeat received", 0, true, 0},
		{"no heartbeat received", time.Second, false, 0},
		{"nats: no responders available for request", 1500 * time.Millisecond, true, 0},
		{"no heartbeat received", 2 * time.Second, false, 0},
		{"no heartbeat received", 11 * time.Second, true, 2},
		{"no heartbeat received", 12 * time.Second, false, 0},
	}
	for i, s := range steps {
		report, repeats := l.allow(s.key, t0.Add(s.at))
		if report != s.report || repeats != s.repeats {
			t.Errorf("step %d (%s at %s): report %v with %d repeats, want %v with %d", i, s.key, s.at, report, repeats, s.report, s.repeats)
		}
	}
}
