package natsconn

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rs/zerolog"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/internal/testsupport/opstest"
)

// NATS away for ten minutes, tried four times a second: the first failure, reminders
// at 5s, 10s, 20s, … 5m apart, and the recovery with the tries and the time it took —
// a dozen lines instead of 2,400.
func TestOutageLogsAtGrowingIntervals(t *testing.T) {
	var out opstest.Log
	o := newOutage(zerolog.New(&out))
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	o.now = func() time.Time { return clock }
	refused := errors.New("connection refused")
	for range 4 * 600 {
		o.failed("nats://x:4222", refused)
		clock = clock.Add(250 * time.Millisecond)
	}
	o.connected("nats://x:4222", "reconnected to NATS")
	first, reminders, back := out.Lines(`"message":"cannot reach NATS; retrying"`), out.Lines("still cannot reach NATS"), out.Lines("reconnected to NATS")
	// Reminders at 5, 15, 35, 75, 155, 315, 615 s (the interval doubles up to 5m).
	if len(first) != 1 || len(reminders) != 6 || len(back) != 1 {
		t.Fatalf("%d first, %d reminders, %d recoveries:\n%s", len(first), len(reminders), len(back), out.String())
	}
	if !strings.Contains(reminders[0], `"tries":21`) || !strings.Contains(back[0], `"tries":2400`) || !strings.Contains(back[0], `"down_for":600000`) {
		t.Errorf("the tries and time: %s\n%s", reminders[0], back[0])
	}
	// The next outage starts over.
	o.failed("nats://x:4222", refused)
	if n := len(out.Lines(`"message":"cannot reach NATS; retrying"`)); n != 2 {
		t.Errorf("a second outage's first failure: %d lines", n)
	}
}

// A real server restart: one warning that the connection was lost, the recovery; then
// a clean close warns of nothing.
func TestReconnectAndCleanCloseLogs(t *testing.T) {
	s := natstest.Start(t)
	var out opstest.Log
	closed := make(chan struct{})
	nc, err := Config{URL: s.URL()}.Connect(zerolog.New(&out), nats.ReconnectWait(20*time.Millisecond),
		nats.ClosedHandler(func(*nats.Conn) { close(closed) }))
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 10*time.Second, "the connected line", func() bool { return len(out.Lines("connected to NATS")) > 0 })
	s.Restart()
	natstest.Eventually(t, 10*time.Second, "the reconnected line", func() bool { return len(out.Lines("reconnected to NATS")) > 0 })
	if n := len(out.Lines("disconnected from NATS")); n != 1 {
		t.Errorf("%d disconnect warnings, want 1:\n%s", n, out.String())
	}
	before := len(out.Lines(`"level":"warn"`))
	nc.Close()
	<-closed // nats.go runs the disconnect callback before the closed one
	if after := len(out.Lines(`"level":"warn"`)); after != before {
		t.Errorf("a clean close logged a warning:\n%s", out.String())
	}
}
