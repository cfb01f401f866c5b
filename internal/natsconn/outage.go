package natsconn

import (
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
)

// The intervals between the reminders that NATS is still unreachable: the first after
// firstReminder, each next one twice as late, at most maxReminder apart.
const (
	firstReminder = 5 * time.Second
	maxReminder   = 5 * time.Minute
)

// outage logs NATS being away without flooding the log: nats.go reports every failed
// try (four a second with a 250 ms reconnect wait), and this logs the first, then a
// reminder at growing intervals (5s, 10s, 20s, … 5m) with the tries since the start,
// then the recovery with how long it took. A connection closed on purpose logs nothing.
type outage struct {
	log zerolog.Logger
	now func() time.Time

	mu       sync.Mutex
	since    time.Time // zero while connected
	tries    int
	nextLog  time.Time
	interval time.Duration
}

func newOutage(log zerolog.Logger) *outage { return &outage{log: log, now: time.Now} }

// begin starts an outage at now, once.
func (o *outage) begin() bool {
	if !o.since.IsZero() {
		return false
	}
	o.since, o.tries, o.interval = o.now(), 0, firstReminder
	o.nextLog = o.since.Add(o.interval)
	return true
}

// disconnected is the DisconnectErrHandler: a connection lost (not closed) starts an
// outage.
func (o *outage) disconnected(nc *nats.Conn, err error) {
	if nc != nil && nc.IsClosed() {
		return // closed by the program: a clean exit, nothing to warn about
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.begin() {
		o.log.Warn().Err(err).Msg("disconnected from NATS; reconnecting")
	}
}

// failed is the ReconnectErrHandler: one failed try, logged when it is the first of an
// outage or a reminder is due.
func (o *outage) failed(url string, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	first := o.begin()
	o.tries++
	now := o.now()
	switch {
	case first:
		o.log.Warn().Err(err).Str("url", url).Msg("cannot reach NATS; retrying")
	case !now.Before(o.nextLog):
		o.log.Warn().Err(err).Str("url", url).Int("tries", o.tries).Dur("down_for", now.Sub(o.since)).
			Msg("still cannot reach NATS; retrying")
		o.interval = min(2*o.interval, maxReminder)
		o.nextLog = now.Add(o.interval)
	}
}

// connected ends the outage, if any, and logs how it ended: msg ("connected to NATS",
// "reconnected to NATS") with the tries and time it took.
func (o *outage) connected(url, msg string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	ev := o.log.Info().Str("url", url)
	if !o.since.IsZero() {
		ev = ev.Int("tries", o.tries).Dur("down_for", o.now().Sub(o.since))
	}
	ev.Msg(msg)
	o.since = time.Time{}
}
