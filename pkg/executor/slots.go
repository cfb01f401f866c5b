package executor

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/internal/tick"
)

// Pulling: a replica holds no call it does not keep in progress.
//
// nats.go's Consume keeps up to PullMaxMessages calls asked for or buffered in the
// client, pulls again when fewer than PullThresholdMessages (half) are left, and hands
// them to its callback one at a time. With a callback that blocks until a concurrency
// slot is free, the calls buffered behind it are the replica's (delivered, their ack
// timers running) yet invisible to it: nothing can send them an in-progress ack. A call
// of a tool slower than a third of the ack wait that waited there behind busy slots
// outlived its ack wait and was delivered again while it ran or waited here (measured:
// -concurrency 4, 20s calls, every time) — run twice, or answered interrupted while its
// first delivery still ran. A callback that never blocks shows every call at once but
// makes Consume pull without end, and Consume cannot be told to pull less.
//
// So each tool's consumers are pulled with Fetch, one pull at a time per consumer, and
// every call a pull brings is taken at once: it runs in a free place, or waits for one
// with in-progress acks from its delivery on. A pull asks for the free places (neither
// running a call, nor promised to a call that waits, nor asked for by another pull) plus
// a reserve, at most the consumer's share (most); a consumer that may ask for nothing
// and has no call waiting keeps one call in hand anyway, so that a tool with more
// consumers than places (approval answers, call shards) is served on all of them
// without waiting for another consumer's pull to expire. A call waiting for a
// fleet-wide limit lends its place meanwhile (limits.go). Every call held is kept in
// progress, however long it waits or runs.
//
// The reserve is what keeps throughput: measured with BenchmarkFleetConcurrency (256
// calls in flight, -concurrency 4, one replica, 2 cores), pulling for free places only
// made the fleet 0.22x the raw pattern where Consume had made it 0.35x — each freed
// place idled for a pull's round trip. The reserve is as many calls as finish in
// holdFor at the recent rate (at most the concurrency), so that the calls waiting here
// wait about holdFor: short calls keep the places busy as Consume's buffer did (0.34x),
// while a slow tool's calls are not held back from a replica that could start them (a
// tool finishing fewer than 100 calls a second pulls for its free places and one in
// hand). Pulls ask once at least half the reserve is free, so they come in batches that
// grow with the rate (a pull per call only where calls end slower than pulls could).
//
// Pulls expire after pullExpiry and are not cut short at shutdown (a cancelled Fetch
// drops the calls arriving at that moment, which would then wait out their ack wait):
// when the executor stops, each consumer's last pull ends within pullExpiry and the
// calls it still brings are handed back with a Nak, as are calls waiting for a slot.
const pullExpiry = time.Second

// slots are a tool's places on this replica and the pulls that fill them.
type slots struct {
	run chan struct{} // a place to run: every running call holds one (cap: the concurrency)

	mu      sync.Mutex
	asked   int // calls asked for by pulls outstanding, not delivered yet
	waiting int // calls delivered (or taking their place back) that wait for a place
	pullers []*puller

	// done counts the calls finished; rate is how many finish per second lately, as of
	// rateAt, when done was rateDone (under mu).
	done     atomic.Int64
	rate     float64
	rateAt   time.Time
	rateDone int64
}

// puller pulls one consumer of a tool: a calls stream's (shard's), or the approval
// answers'.
type puller struct {
	cons   jetstream.Consumer
	name   string // the consumer, for logs
	most   int    // the most calls one pull asks for
	handle func(context.Context, *worker, jetstream.Msg)
	wake   chan struct{} // a place was freed (1-buffered)
	// asked is what the pull outstanding still may bring, extra whether it asked for a
	// call beyond the places (see ask); waiting, the calls it brought that wait for a
	// place. Under slots.mu.
	asked, waiting int
	extra          bool
}

func newSlots(n int) *slots { return &slots{run: make(chan struct{}, n)} }

// add adds a consumer to pull, asking at most most calls at once (0: one call in hand
// beyond the places, see ask); before pulling starts.
func (s *slots) add(cons jetstream.Consumer, name string, most int, handle func(context.Context, *worker, jetstream.Msg)) *puller {
	p := &puller{cons: cons, name: name, most: most, handle: handle, wake: make(chan struct{}, 1)}
	s.pullers = append(s.pullers, p)
	return p
}

// free is the places neither running, nor promised to a waiting call, nor asked for;
// s.mu held.
func (s *slots) free() int { return cap(s.run) - len(s.run) - s.waiting - s.asked }

// ask reserves the places p's next pull asks for: the free ones plus the reserve, at
// most p.most, once they are at least half the reserve (so pulls come in batches while
// the reserve keeps the places busy); or, when p may ask for none and holds no call
// waiting, one call in hand beyond the places (extra: not counted as asked, so other
// consumers are not held back by it). 0: wait for a place to free.
func (s *slots) ask(p *puller) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.reserve(time.Now())
	n := min(p.most, s.free()+r)
	p.extra = n <= 0
	switch {
	case p.extra:
		if p.waiting > 0 {
			return 0
		}
		n = 1
	case n < min((r+1)/2, p.most): // (a consumer's share may be under half the reserve)
		return 0
	default:
		s.asked += n
	}
	p.asked = n
	return n
}

// reserve is how many calls may wait for a place here: as many as finish in holdFor at
// the rate calls finished lately, at most the concurrency; s.mu held. A call waits in
// hand about holdFor at most, a pull's round trip with room to spare: enough that the
// places never wait for a pull when calls are short, and so short that a call is not
// kept from another replica that could start it (a slow tool's calls do not wait here
// at all, but for the one in hand).
func (s *slots) reserve(now time.Time) int {
	if el := now.Sub(s.rateAt); el >= rateEvery {
		done := s.done.Load()
		r := float64(done-s.rateDone) / el.Seconds()
		if el < 10*rateEvery {
			r = (s.rate + r) / 2
		}
		s.rate, s.rateAt, s.rateDone = r, now, done
	}
	return min(cap(s.run), int(s.rate*holdFor.Seconds()))
}

const (
	holdFor   = 10 * time.Millisecond
	rateEvery = 100 * time.Millisecond
)

// unask gives back the places of p's pull whose calls did not come.
func (s *slots) unask(p *puller) {
	s.mu.Lock()
	n := p.asked
	p.asked = 0
	if !p.extra {
		s.asked -= n
	}
	s.mu.Unlock()
	if n > 0 {
		s.wakeAll()
	}
}

// take counts a call delivered to p as held: placed, it has a place to run; otherwise it
// waits for one (await).
func (s *slots) take(p *puller) (placed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p.asked--
	if !p.extra {
		s.asked--
	}
	select {
	case s.run <- struct{}{}:
		return true
	default:
		p.waiting++
		s.waiting++
		return false
	}
}

// skip counts a call delivered to p as not taken (a copy of a call held already).
func (s *slots) skip(p *puller) {
	s.mu.Lock()
	p.asked--
	if !p.extra {
		s.asked--
	}
	s.mu.Unlock()
	s.wakeAll()
}

// heldKey names a delivered message by its stream and stream sequence: every delivery of
// one message has the same.
type heldKey struct {
	stream string
	seq    uint64
}

func heldKeyOf(msg jetstream.Msg) (heldKey, bool) {
	meta, err := msg.Metadata()
	if err != nil {
		return heldKey{}, false
	}
	return heldKey{meta.Stream, meta.Sequence.Stream}, true
}

// await waits for a place for a call of p that take did not place; false when quit
// closed first (the call is not held any more then).
func (s *slots) await(p *puller, quit <-chan struct{}) (placed bool) {
	select {
	case s.run <- struct{}{}:
		placed = true
		select {
		case <-quit: // both at once: stopping wins, the call is not started
			<-s.run
			placed = false
		default:
		}
	case <-quit:
	}
	s.unwait(p)
	return placed
}

// unwait counts a call of p that waited for a place as not waiting any more.
func (s *slots) unwait(p *puller) {
	s.mu.Lock()
	p.waiting--
	s.waiting--
	s.mu.Unlock()
	s.wakeAll()
}

// finish gives the place of a call that finished back.
func (s *slots) finish() {
	s.done.Add(1)
	s.release()
}

// release gives a running call's place back.
func (s *slots) release() {
	<-s.run
	s.wakeAll()
}

// lend gives a running call's place back while it waits for something else (a limit,
// limits.go), so that other calls run meanwhile; the call takes a place again with
// reclaim, waiting for one if need be (the call is kept in progress meanwhile).
func (s *slots) lend() (reclaim func()) {
	s.release()
	return func() {
		s.mu.Lock()
		s.waiting++
		s.mu.Unlock()
		s.run <- struct{}{}
		s.mu.Lock()
		s.waiting--
		s.mu.Unlock()
		s.wakeAll()
	}
}

func (s *slots) wakeAll() {
	for _, p := range s.pullers {
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
}

// pull pulls p's calls for w's free places until ctx ends, then lets its last pull end
// (within pullExpiry) and hands back what it brings. Each call runs under runCtx.
func (ex *Executor) pull(ctx, runCtx context.Context, w *worker, p *puller) {
	report := jsutil.PullErrors(ex.consumeErr(p.name))
	for ctx.Err() == nil {
		n := w.slots.ask(p)
		if n == 0 {
			select {
			case <-p.wake:
			case <-ctx.Done():
			}
			continue
		}
		batch, err := p.cons.Fetch(n, jetstream.FetchMaxWait(pullExpiry), jetstream.FetchHeartbeat(jsutil.PullHeartbeat))
		if err != nil {
			w.slots.unask(p)
			report(err)
			tick.Sleep(ctx, jsutil.PullHeartbeat)
			continue
		}
		got := 0
		for msg := range batch.Messages() {
			got++
			ex.take(runCtx, w, p, msg)
		}
		w.slots.unask(p)
		if err := batch.Error(); err != nil {
			// A lost heartbeat (a consumer leader lost), no responders (no leader yet), a
			// leadership change: pull again, on the heartbeat's beat if nothing came.
			report(err)
			if got == 0 {
				tick.Sleep(ctx, jsutil.PullHeartbeat)
			}
		}
	}
}

// take runs a call p delivered on a goroutine of its own (which Run waits for): at once
// when it has a place, else once one is free, kept in progress while it waits. Once the
// executor stops, a call not started is handed back (Nak).
//
// A call this replica still holds that is delivered again is not taken twice: a server
// that fell behind took the holder's in-progress acks after the ack wait had run out.
// The copy is kept in progress and dropped; the holder's ack (by stream sequence, as
// every ack) settles the call. Taken twice, an idempotent call would run twice, and
// every such delivery counts toward the consumer's max deliver, past which the call is
// answered an error and set aside as a dead letter (giveUp) although it ran.
func (ex *Executor) take(ctx context.Context, w *worker, p *puller, msg jetstream.Msg) {
	key, ok := heldKeyOf(msg)
	if ok {
		if _, dup := ex.held.LoadOrStore(key, struct{}{}); dup {
			w.slots.skip(p)
			_ = msg.InProgress()
			ex.o.log.Debug().Str("stream", key.stream).Uint64("seq", key.seq).Msg("a call held here was delivered again (the server is behind); kept in progress")
			return
		}
	}
	release := func() {
		if ok {
			ex.held.Delete(key)
		}
	}
	placed := w.slots.take(p)
	if !ex.track() {
		if placed {
			w.slots.release()
		} else {
			w.slots.unwait(p)
		}
		_ = msg.Nak()
		release()
		return
	}
	ex.handlers.run(func() {
		defer ex.wg.Done()
		defer release()
		if !placed {
			stop := ex.keepAlive(msg)
			placed = w.slots.await(p, ex.quit)
			stop()
			if !placed {
				_ = msg.Nak()
				return
			}
		}
		defer w.slots.finish()
		p.handle(ctx, w, msg)
	})
}
