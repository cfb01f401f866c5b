package jsutil

import (
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// How every toolfleet pull consumer (an executor's calls and approval answers, the
// planner's steps, results and approval requests) pulls, chosen so that a consumer
// whose leader is lost — its node was killed, so the waiting pull request died with it
// and no error ever comes back — is noticed within a second and pulled from again:
//
//   - PullHeartbeat (500ms): the server sends an idle heartbeat on a waiting pull this
//     often; nats.go counts a pull as lost after two missed heartbeats (1s) and sends a
//     new one. A pull that finds no leader (no responders, a leader election under
//     way) is tried again on the same 1s beat, so calls flow again at most about 1s
//     after the new leader is elected. nats.go's default (half of a 30s expiry, 15s)
//     left a tool without calls for 30s after its consumer leader died.
//   - PullExpiry (5s): how long the server holds one pull request; the heartbeat must be
//     under half of it (nats.go refuses otherwise). Short enough that a pull parked on
//     a node that lost its leadership without telling us is renewed soon anyway, long
//     enough that an idle consumer costs one request per 5s and two heartbeats a second.
const (
	PullExpiry    = 5 * time.Second
	PullHeartbeat = 500 * time.Millisecond
	// consumeErrEvery is how often one kind of consume error is reported; repeats in
	// between are counted and reported with the next.
	consumeErrEvery = 10 * time.Second
)

// ConsumeOptions returns the options of a toolfleet consumer's Consume: at most
// maxMessages buffered, [PullExpiry], [PullHeartbeat], and onErr told of consume errors
// (a lost heartbeat, no responders, a leadership change, a refused pull). An error is
// reported at once, then identical ones at most every 10s, each report saying how many
// were left out since the one before (repeats): a consumer waiting out an election
// would otherwise report twice a second. Report them at warn: they are why a tool takes
// no calls.
func ConsumeOptions(maxMessages int, onErr func(err error, repeats int)) []jetstream.PullConsumeOpt {
	report := PullErrors(onErr)
	return []jetstream.PullConsumeOpt{
		jetstream.PullMaxMessages(maxMessages),
		jetstream.PullExpiry(PullExpiry),
		jetstream.PullHeartbeat(PullHeartbeat),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) { report(err) }),
	}
}

// PullErrors returns a reporter of a consumer's pull errors that tells onErr of each as
// [ConsumeOptions] does (identical ones at most every 10s, with the count of repeats),
// for a consumer pulled with Fetch rather than Consume.
func PullErrors(onErr func(err error, repeats int)) func(error) {
	r := &errLimiter{every: consumeErrEvery, seen: map[string]*errSeen{}}
	return func(err error) {
		if err == nil || onErr == nil {
			return
		}
		if report, repeats := r.allow(err.Error(), time.Now()); report {
			onErr(err, repeats)
		}
	}
}

// errLimiter lets one report of each distinct error through per period.
type errLimiter struct {
	mu    sync.Mutex
	every time.Duration
	seen  map[string]*errSeen
}

type errSeen struct {
	at      time.Time
	repeats int
}

// allow reports whether the error with text key is to be reported at now, and how many
// identical ones were held back since its last report.
func (l *errLimiter) allow(key string, now time.Time) (report bool, repeats int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s, ok := l.seen[key]
	if ok && now.Sub(s.at) < l.every {
		s.repeats++
		return false, 0
	}
	if !ok {
		if len(l.seen) >= 64 { // errors carrying ids: keep the map small
			clear(l.seen)
		}
		s = &errSeen{}
		l.seen[key] = s
	}
	repeats, s.at, s.repeats = s.repeats, now, 0
	return true, repeats
}
