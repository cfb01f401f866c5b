package natstest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// JetStream is what most toolfleet tests start with: an embedded server, a client
// connection, its JetStream context, and the fleet's streams and buckets ensured with Cfg.
type JetStream struct {
	Srv *Server
	NC  *nats.Conn
	JS  jetstream.JetStream
	// Cfg is the configuration the streams and buckets were ensured with, as given (its
	// zero fields mean the defaults); pass it on to the parts under test.
	Cfg events.Config
}

// StartJetStream starts a server (see [Start]), connects to it and runs [jsutil.Ensure]
// with cfg; with several shards, the server maps calls to them first ([Server.MapCalls]). Everything is closed when the test ends.
func StartJetStream(tb testing.TB, cfg events.Config) *JetStream {
	tb.Helper()
	return JetStreamOn(tb, Start(tb), cfg)
}

// JetStreamOn is StartJetStream on a server the test started (e.g. with [StartWith]).
func JetStreamOn(tb testing.TB, srv *Server, cfg events.Config) *JetStream {
	tb.Helper()
	if cfg.Shards == 0 {
		cfg.Shards = TestShards()
	}
	if cfg.Sharded() {
		srv.MapCalls(cfg)
	}
	nc := srv.Connect()
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatalf("natstest: jetstream: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := jsutil.Ensure(ctx, js, cfg); err != nil {
		tb.Fatalf("natstest: ensure streams and buckets: %v", err)
	}
	return &JetStream{Srv: srv, NC: nc, JS: js, Cfg: cfg}
}

// Eventually polls cond every 10ms until it holds, failing the test with what when
// timeout passes first. With [EventuallyNil] it is the tests' only way to wait for
// something that sends no signal of its own (a signal is a channel or a message the
// test receives): timeout bounds a wait that should never take it, and is never what
// a test waits for. cond runs on the test's goroutine, so it may fail the test at once
// (a process that exited, an answer that can only get worse).
func Eventually(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	EventuallyNil(tb, timeout, what, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}

// errNotYet is what Eventually's cond says while it does not hold.
var errNotYet = errors.New("not yet")

// EventuallyNil is Eventually for a check that says why it does not hold yet: it polls
// check every 10ms until it returns nil, and a test that times out fails with check's
// last error, what the test saw instead.
func EventuallyNil(tb testing.TB, timeout time.Duration, what string, check func() error) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			if errors.Is(err, errNotYet) {
				tb.Fatalf("timed out after %s waiting for %s", timeout, what)
			}
			tb.Fatalf("timed out after %s waiting for %s: %v", timeout, what, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestShards is the shard count TOOLFLEET_TEST_SHARDS asks tests to run on (0 when unset):
// with it, every suite that starts with [StartJetStream] runs on sharded streams, which
// callers must not notice.
func TestShards() int {
	n, _ := strconv.Atoi(os.Getenv("TOOLFLEET_TEST_SHARDS"))
	return n
}

// RerunOnShards runs the tests of this test binary that match pattern again, in a child
// process with TOOLFLEET_TEST_SHARDS=shards, and fails with the child's output if they
// fail: a suite proves on every run that sharding changes nothing callers see. It does
// nothing in a child that already runs sharded, and under -short.
func RerunOnShards(t *testing.T, shards int, pattern string) {
	t.Helper()
	if TestShards() != 0 {
		t.Skip("already running on shards")
	}
	if testing.Short() {
		t.Skip("-short")
	}
	cmd := exec.Command(os.Args[0], "-test.run", pattern, "-test.count", "1", "-test.timeout", "5m", "-test.v")
	cmd.Env = append(os.Environ(), "TOOLFLEET_TEST_SHARDS="+strconv.Itoa(shards))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("on %d shards, tests %s failed: %v\n%s", shards, pattern, err, out)
	}
	if !strings.Contains(string(out), "--- PASS") {
		t.Fatalf("on %d shards, tests %s ran nothing:\n%s", shards, pattern, out)
	}
}
