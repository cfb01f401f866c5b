package loadgen

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/pkg/events"
)

// Config says where the replies are and how hard to push.
type Config struct {
	// ReplyStreams are the streams that store the replies (several: a fleet's results
	// shards). Required.
	ReplyStreams []string
	// ReplyFilter limits the replies read to one subject filter, e.g. one run's
	// results. Default: the whole stream.
	ReplyFilter string
	// Window is the most calls in flight (published, not yet answered). Default 256.
	Window int
	// StallTimeout ends Wait when no reply has arrived for this long; the calls still
	// unanswered are then counted as lost. Default 10s.
	StallTimeout time.Duration
	// CallOf returns the id of the call a reply's subject answers; ok false ignores the
	// reply. Default: the call token of a toolfleet result subject
	// ([events.ParseResultSubject]), which is the call id for ids of [events.IDPattern].
	CallOf func(subject string) (id string, ok bool)
	// OnReply, when set, sees the first reply of each call (not the doubles), one at a
	// time from one goroutine; it must not block.
	OnReply func(id string, m jetstream.Msg)
}

// Report is what a load measured.
type Report struct {
	// Published is the number of calls JetStream accepted; PublishErrors those it did not
	// (they are neither waited for nor counted as lost).
	Published, PublishErrors int
	// Answered calls got a reply; Lost did not before the stall timeout; Doubled counts
	// replies beyond the first for one call, as read or (with a ReplyFilter) as stored,
	// whichever is more.
	Answered, Lost, Doubled int
	// Elapsed runs from the first publish to the last reply.
	Elapsed time.Duration
	// P50 and P99 are latencies from publish to stored reply.
	P50, P99 time.Duration
}

// CallsPerSec is the answered calls over the elapsed time.
func (r Report) CallsPerSec() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Answered) / r.Elapsed.Seconds()
}

// Generator publishes calls and gathers their replies. Publish and Wait are meant for one
// goroutine; Answered may be called from any.
type Generator struct {
	cfg   Config
	js    jetstream.JetStream
	ccs   []jetstream.ConsumeContext
	slots chan struct{}

	mu       sync.Mutex
	sent     map[string]time.Time // published, not yet answered
	answered map[string]struct{}
	lat      []time.Duration
	pubErrs  int
	doubled  int
	started  time.Time
	last     time.Time // the last reply
	changed  chan struct{}
	firstErr error
}

// Start subscribes to the replies; call Stop when done.
func Start(ctx context.Context, nc *nats.Conn, cfg Config) (*Generator, error) {
	if len(cfg.ReplyStreams) == 0 {
		return nil, errors.New("loadgen: a reply stream is required")
	}
	if cfg.Window <= 0 {
		cfg.Window = 256
	}
	if cfg.StallTimeout <= 0 {
		cfg.StallTimeout = 10 * time.Second
	}
	if cfg.CallOf == nil {
		cfg.CallOf = resultCall
	}
	g := &Generator{cfg: cfg, slots: make(chan struct{}, cfg.Window), sent: map[string]time.Time{},
		answered: map[string]struct{}{}, changed: make(chan struct{}, 1)}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(max(4096, cfg.Window)),
		jetstream.WithPublishAsyncErrHandler(g.publishFailed))
	if err != nil {
		return nil, fmt.Errorf("loadgen: %w", err)
	}
	g.js = js
	occ := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverNewPolicy}
	if cfg.ReplyFilter != "" {
		occ.FilterSubjects = []string{cfg.ReplyFilter}
	}
	for _, stream := range cfg.ReplyStreams {
		cons, err := js.OrderedConsumer(ctx, stream, occ)
		if err != nil {
			g.Stop()
			return nil, fmt.Errorf("loadgen: reply consumer on %s: %w", stream, err)
		}
		cc, err := cons.Consume(g.reply)
		if err != nil {
			g.Stop()
			return nil, fmt.Errorf("loadgen: consume %s: %w", stream, err)
		}
		g.ccs = append(g.ccs, cc)
	}
	return g, nil
}

// Publish sends one call, waiting for a free slot in the window. The call's id is its
// Nats-Msg-Id header, which is required.
func (g *Generator) Publish(ctx context.Context, m *nats.Msg) error {
	id := m.Header.Get(nats.MsgIdHdr)
	if id == "" {
		return errors.New("loadgen: a call needs a Nats-Msg-Id header (its id)")
	}
	select {
	case g.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	now := time.Now()
	g.mu.Lock()
	if g.started.IsZero() {
		g.started = now
	}
	g.sent[id] = now
	g.mu.Unlock()
	if _, err := g.js.PublishMsgAsync(m); err != nil {
		g.publishFailed(g.js, m, err)
		return fmt.Errorf("loadgen: publish %s: %w", id, err)
	}
	return nil
}

// publishFailed forgets a call JetStream did not take, so that Wait does not wait for it.
func (g *Generator) publishFailed(_ jetstream.JetStream, m *nats.Msg, err error) {
	id := m.Header.Get(nats.MsgIdHdr)
	g.mu.Lock()
	_, pending := g.sent[id]
	if pending {
		delete(g.sent, id)
		g.pubErrs++
		if g.firstErr == nil {
			g.firstErr = fmt.Errorf("publish %s to %s: %w", id, m.Subject, err)
		}
	}
	g.mu.Unlock()
	if pending {
		<-g.slots
		g.signal()
	}
}

func (g *Generator) reply(m jetstream.Msg) {
	id, ok := g.cfg.CallOf(m.Subject())
	if !ok {
		return
	}
	now := time.Now()
	g.mu.Lock()
	t0, pending := g.sent[id]
	if pending {
		delete(g.sent, id)
		g.answered[id] = struct{}{}
		g.lat = append(g.lat, now.Sub(t0))
		g.last = now
	} else if _, ok := g.answered[id]; ok {
		g.doubled++
	}
	g.mu.Unlock()
	if pending {
		<-g.slots
		if g.cfg.OnReply != nil {
			g.cfg.OnReply(id, m)
		}
		g.signal()
	}
}

func (g *Generator) signal() {
	select {
	case g.changed <- struct{}{}:
	default:
	}
}

// Answered is how many calls have their reply so far.
func (g *Generator) Answered() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.lat)
}

// FirstPublishError is the first call JetStream refused, if any.
func (g *Generator) FirstPublishError() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.firstErr
}

// Wait waits until every call published so far has its reply, or until no reply arrived
// for the stall timeout, and reports. It returns ctx's error if ctx ends first.
func (g *Generator) Wait(ctx context.Context) (Report, error) {
	// Wait for the PubAcks too: a refused publish is known only then.
	select {
	case <-g.js.PublishAsyncComplete():
	case <-ctx.Done():
		return Report{}, ctx.Err()
	case <-time.After(g.cfg.StallTimeout):
	}
	stall := time.NewTimer(g.cfg.StallTimeout)
	defer stall.Stop()
	for {
		g.mu.Lock()
		outstanding := len(g.sent)
		g.mu.Unlock()
		if outstanding == 0 {
			break
		}
		select {
		case <-g.changed:
			stall.Reset(g.cfg.StallTimeout)
			continue
		case <-stall.C:
		case <-ctx.Done():
			return Report{}, ctx.Err()
		}
		break
	}
	stored, err := g.storedPerCall(ctx)
	if err != nil {
		return Report{}, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	r := Report{Answered: len(g.lat), Lost: len(g.sent), Doubled: g.doubled, PublishErrors: g.pubErrs}
	if extra := storedDoubles(stored, g.answered, g.cfg.CallOf); extra > r.Doubled {
		r.Doubled = extra
	}
	r.Published = r.Answered + r.Lost
	if len(g.lat) > 0 {
		r.Elapsed = g.last.Sub(g.started)
		lat := slices.Clone(g.lat)
		slices.Sort(lat)
		r.P50 = lat[len(lat)/2]
		r.P99 = lat[min(len(lat)-1, len(lat)*99/100)]
	}
	return r, nil
}

// storedPerCall counts the replies the stream holds under the filter, per subject: the
// stored truth, which a late double could reach before the consumer reads it.
func (g *Generator) storedPerCall(ctx context.Context) (map[string]uint64, error) {
	if g.cfg.ReplyFilter == "" {
		return nil, nil
	}
	all := map[string]uint64{}
	for _, stream := range g.cfg.ReplyStreams {
		s, err := g.js.Stream(ctx, stream)
		if err != nil {
			return nil, fmt.Errorf("loadgen: stream %s: %w", stream, err)
		}
		info, err := s.Info(ctx, jetstream.WithSubjectFilter(g.cfg.ReplyFilter))
		if err != nil {
			return nil, fmt.Errorf("loadgen: stored replies under %s: %w", g.cfg.ReplyFilter, err)
		}
		for subj, n := range info.State.Subjects {
			all[subj] += n
		}
	}
	return all, nil
}

// storedDoubles is the number of stored replies beyond the first for the answered calls.
func storedDoubles(stored map[string]uint64, answered map[string]struct{}, callOf func(string) (string, bool)) int {
	n := 0
	for subj, count := range stored {
		id, ok := callOf(subj)
		if _, answered := answered[id]; ok && answered && count > 1 {
			n += int(count - 1)
		}
	}
	return n
}

// Stop stops reading replies.
func (g *Generator) Stop() {
	for _, cc := range g.ccs {
		cc.Stop()
	}
}

// resultCall is the default CallOf: the call token of a toolfleet result subject.
func resultCall(subject string) (string, bool) {
	_, call, _, ok := events.ParseResultSubject(subject)
	return call, ok
}
