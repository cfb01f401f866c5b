package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/tick"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Cancels. A cancel of a call (events.NewCancel, on
// toolfleet.event.cancel.<tool>.<call token>[.<tenant>]) is stored in the events stream
// and reaches the executors two ways:
//
//   - Each replica holds a core subscription on toolfleet.event.cancel.<tool>.> for every
//     tool it serves (no queue group: every replica hears every cancel, since only the
//     replica running a call can stop it). A cancel heard for a call running here cancels
//     the call's context at once; one heard for a call parked for approval answers it.
//     A core subscription costs the server nothing per replica beyond an interest, and
//     it needs no history: what was published before is found in the stream (below). An
//     ordered consumer per tool per replica would replay the stream's cancels at every
//     start and keep server state per replica for nothing more.
//   - Before a delivered call runs (or a parked one is carried out), its cancel subject
//     is looked up in the events stream, coalesced with other calls' look-ups into one
//     multi-subject direct get like the results look-up (lookup.go). The look-up is
//     skipped for a tool no cancel was ever stored for (checked at start, and set when a
//     cancel is heard), so a fleet that never cancels pays nothing.
//
// The call is registered before the look-up, and every cancel heard is remembered for a
// while, so a cancel published while its call is being delivered is either in the stream
// by the time of the look-up or heard by the subscription: it is never missed.
//
// What the caller gets: canceled (status and code) when the cancel came before the tool
// started or the tool stopped because of it; interrupted when a non-idempotent tool was
// cut mid-run (its side effect may be half done); the normal result when the tool
// finished anyway (a cancel after completion changes nothing: the first stored result
// wins, see events.NewResult).

// maxHeard bounds the cancels a replica remembers having heard.
const maxHeard = 4096

// cancelKey names a call as its cancel subject does.
type cancelKey struct{ tool, call, tenant string }

func keyOfJob(j *job) cancelKey {
	return cancelKey{tool: j.def.Name, call: events.IDToken(j.ce.ID), tenant: j.ce.Caller.Tenant}
}

// cancels is a replica's view of cancels: the calls it is handling, the cancels it heard
// lately, and the tools whose cancels may be stored.
type cancels struct {
	ex      *Executor
	lookups *resultLookups // on the events stream

	mu      sync.Mutex
	running map[cancelKey]*watch // the calls handled here, chained by next (the same call twice is rare)
	heard   map[cancelKey]events.Cancel
	order   []cancelKey // heard, oldest first
	stored  map[string]bool
	// reconnects is the connection's reconnect count when the subscriptions were made.
	reconnects uint64
	nextStats  atomic.Int64                  // when to compare the reconnect count again (unix ns)
	subs       map[string]*nats.Subscription // by tool
	// parkable are the served tools whose calls may be parked for approval (read-only
	// once the subscriptions exist).
	parkable map[string]tools.Definition
}

// A cancel's handler (hear) runs on the subscription's goroutine; nats.go counts a
// message as pending until its handler has returned, which settle relies on.

// watch is one call being handled, as cancels see it; it lives in the call's job (no
// allocation of its own). Its fields are guarded by the cancels' mutex; c is nil until
// the call is registered.
type watch struct {
	c      *cancels
	key    cancelKey
	next   *watch         // another handling of the same call on this replica
	cancel *events.Cancel // the cancel heard or found, if any
	stop   context.CancelFunc
	// early is true when the cancel was known before the first attempt started; ran,
	// once an attempt has run.
	early, ran bool
}

// listenCancels subscribes to the cancels of every tool in defs and finds out which
// tools have cancels stored. It runs before any call is taken.
func (ex *Executor) listenCancels(ctx context.Context, defs []tools.Definition) (*cancels, error) {
	c := &cancels{ex: ex, lookups: newLookups(ex.nc, events.StreamEvents), running: map[cancelKey]*watch{},
		heard: map[cancelKey]events.Cancel{}, stored: map[string]bool{}, parkable: map[string]tools.Definition{},
		subs: map[string]*nats.Subscription{}, reconnects: ex.nc.Stats().Reconnects}
	for _, def := range defs { // filled before any subscription can call hear
		if ex.needsApproval(def.Name) {
			c.parkable[def.Name] = def
		}
	}
	for _, def := range defs {
		filter, err := events.CancelsFilter(def.Name)
		if err != nil {
			c.close()
			return nil, err
		}
		sub, err := ex.nc.Subscribe(filter, c.hear)
		if err != nil {
			c.close()
			return nil, fmt.Errorf("executor: subscribe to the cancels of %s: %w", def.Name, err)
		}
		c.subs[def.Name] = sub
	}
	// After subscribing: a cancel stored from now on is also heard.
	for _, def := range defs {
		filter, _ := events.CancelsFilter(def.Name)
		m, err := directLast(ctx, ex.nc, events.StreamEvents, filter)
		c.mu.Lock()
		c.stored[def.Name] = c.stored[def.Name] || m != nil || err != nil // unknown: look up
		c.mu.Unlock()
	}
	return c, nil
}

// close unsubscribes.
func (c *cancels) close() {
	for _, s := range c.subs {
		_ = s.Unsubscribe()
	}
}

// hear takes a cancel from the subscription: the call running here is stopped, a parked
// one answered, and the cancel remembered for a call about to start.
func (c *cancels) hear(m *nats.Msg) {
	tool, callToken, sender, ok := events.ParseCancelSubject(m.Subject)
	if !ok {
		return
	}
	tenant := sender.Tenant
	_, cn, err := events.DecodeCancel(events.CoreMsg(m), int(c.ex.cfg.MaxMsgSize))
	if err != nil {
		// A malformed cancel cancels nothing (it stays in the stream for the record).
		c.ex.o.log.Warn().Err(err).Str("tool", tool).Str("call_id", callToken).Msg("refused cancel")
		return
	}
	key := cancelKey{tool: tool, call: callToken, tenant: tenant}
	c.mu.Lock()
	c.stored[tool] = true
	if _, dup := c.heard[key]; !dup {
		if len(c.order) >= maxHeard {
			delete(c.heard, c.order[0])
			c.order = slices.Delete(c.order, 0, 1)
		}
		c.order = append(c.order, key)
	}
	c.heard[key] = cn
	var stops []context.CancelFunc
	for w := c.running[key]; w != nil; w = w.next {
		if w.cancel == nil {
			w.cancel = &cn
			if w.stop != nil {
				stops = append(stops, w.stop)
			}
		}
	}
	c.mu.Unlock()
	for _, stop := range stops {
		stop()
	}
	// A parked call is answered (a call being parked right now is, by park, once parked).
	if def, ok := c.parkable[tool]; ok {
		go c.ex.cancelParked(def, key, cn)
	}
}

// register makes w the watch of j's call: a cancel heard from now on reaches it.
func (w *watch) register(c *cancels, j *job) {
	w.c, w.key = c, keyOfJob(j)
	c.mu.Lock()
	w.next = c.running[w.key]
	c.running[w.key] = w
	if cn, ok := c.heard[w.key]; ok {
		known := cn // a copy made only when found: &cn would allocate on every call
		w.cancel = &known
	}
	c.mu.Unlock()
}

// release unregisters the call.
func (w *watch) release() {
	c := w.c
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch head := c.running[w.key]; {
	case head == w && w.next == nil:
		delete(c.running, w.key)
	case head == w:
		c.running[w.key] = w.next
	default:
		for p := head; p != nil; p = p.next {
			if p.next == w {
				p.next = w.next
				break
			}
		}
	}
	w.c, w.next = nil, nil
}

// canceled returns the cancel heard or found for the call, if any.
func (w *watch) canceled() *events.Cancel {
	if w.c == nil {
		return nil
	}
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	return w.cancel
}

// attach makes stop (which ends an attempt's context) run when a cancel of the call is
// heard; at once when one is known already. detach undoes it when the attempt ends.
func (w *watch) attach(stop context.CancelFunc) {
	if w.c == nil {
		return
	}
	w.c.mu.Lock()
	w.stop = stop
	known := w.cancel != nil
	if known && !w.early {
		w.early = !w.ran
	}
	w.c.mu.Unlock()
	if known {
		stop()
	}
}

func (w *watch) detach() {
	if w.c == nil {
		return
	}
	w.c.mu.Lock()
	w.stop = nil
	w.ran = true
	w.c.mu.Unlock()
}

// backOff waits delay before the next attempt of j; false when ctx ended or a cancel of
// the call was heard meanwhile.
func (ex *Executor) backOff(ctx context.Context, j *job, delay time.Duration) bool {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	j.watch.attach(stop)
	defer j.watch.detach()
	return tick.Sleep(ctx, delay)
}

// mayBeStored reports whether a cancel of tool may be stored in the events stream: one
// was found at start or heard since, or the connection was lost since the start (a
// cancel published meanwhile was not heard).
func (c *cancels) mayBeStored(tool string) bool {
	c.mu.Lock()
	stored := c.stored[tool]
	c.mu.Unlock()
	if stored {
		return true
	}
	// Stats takes the connection's lock: asked every 50ms at most.
	now := time.Now().UnixNano()
	if next := c.nextStats.Load(); now < next || !c.nextStats.CompareAndSwap(next, now+int64(50*time.Millisecond)) {
		return false
	}
	if c.ex.nc.Stats().Reconnects != c.reconnects {
		c.mu.Lock()
		for t := range c.stored {
			c.stored[t] = true
		}
		c.mu.Unlock()
		return true
	}
	return false
}

// settle waits until the cancels of tool this replica received so far are handled
// (hear has returned for each): a cancel published before a call was reaches this
// replica before the call does (one connection, in order), so once settled it is in
// heard. It waits a second at most; pending is zero almost always.
func (c *cancels) settle(tool string) {
	sub := c.subs[tool]
	for range 1000 {
		if n, _, err := sub.Pending(); err != nil || n == 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// canceledBefore registers j's call (j.watch; the caller releases it) and reports
// whether a cancel of it was heard or is stored: then the call is answered canceled,
// without running, and the watch is released.
func (ex *Executor) canceledBefore(ctx context.Context, j *job) bool {
	if ex.cancels == nil {
		return false
	}
	j.watch.register(ex.cancels, j)
	ex.cancels.settle(j.def.Name)
	cn := j.watch.canceled()
	if cn == nil && ex.cancels.mayBeStored(j.def.Name) {
		cn = ex.storedCancel(ctx, j)
	}
	if cn == nil {
		return false
	}
	j.watch.release()
	ex.o.log.Info().Str("tool", j.def.Name).Str("call_id", j.res.CallID).Str("run_id", j.res.RunID).
		Msg("call canceled before it ran")
	ex.fail(j, canceledError(j, *cn))
	return true
}

// cancelLookupTimeout bounds the look-up of a stored cancel; one that times out reads
// as "none".
const cancelLookupTimeout = time.Second

// storedCancel looks up the call's cancel in the events stream; nil when there is none
// or the look-up failed (a cancel published meanwhile is heard by the subscription).
func (ex *Executor) storedCancel(ctx context.Context, j *job) *events.Cancel {
	subj, err := events.CancelSubject(j.ce.Caller, j.def.Name, j.ce.ID)
	if err != nil {
		return nil
	}
	// A short wait: the look-up only covers cancels published while this replica was not
	// listening, and an events stream electing a leader must not hold every call up.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelLookupTimeout)
	defer cancel()
	found, err := ex.cancels.lookups.has(ctx, subj)
	if err != nil {
		ex.o.log.Debug().Err(err).Str("call_id", j.res.CallID).Msg("look for a stored cancel")
	}
	if !found {
		return nil
	}
	cn := events.Cancel{Tool: j.def.Name, CallID: j.res.CallID}
	// The details (reason, who) are read only for a call that is canceled.
	if m, err := directLast(ctx, ex.nc, events.StreamEvents, subj); err == nil && m != nil {
		if _, c, err := events.DecodeCancel(events.CoreMsg(m), int(ex.cfg.MaxMsgSize)); err == nil {
			cn = c
		}
	}
	return &cn
}

// cancelOutcome is what the caller is told when a cancel reached a call that ran: nil
// (the outcome stands) when no cancel came or the tool finished anyway; canceled when
// the tool stopped because of it, or never started; interrupted when a non-idempotent
// tool was cut mid-run.
func (w *watch) cancelOutcome(j *job, out tools.Outcome) *tools.Error {
	cn := w.canceled()
	if cn == nil || out.Err == nil || out.Err.Code != tools.CodeCanceled {
		return nil
	}
	w.c.mu.Lock()
	early := w.early
	w.c.mu.Unlock()
	if !early && !j.def.IsIdempotent() {
		return tools.Errorf(tools.CodeInterrupted,
			"tool %q is not idempotent and call %s was stopped mid-run by a cancel%s; its effect may be partly done",
			j.def.Name, j.res.CallID, cancelWords(*cn))
	}
	return canceledError(j, *cn)
}

func canceledError(j *job, cn events.Cancel) *tools.Error {
	return tools.Errorf(tools.CodeCanceled, "call %s of %q was canceled%s", j.res.CallID, j.def.Name, cancelWords(cn))
}

func cancelWords(cn events.Cancel) string {
	s := ""
	if cn.By != "" {
		s += " by " + cn.By
	}
	if cn.Reason != "" {
		s += ": " + cn.Reason
	}
	return s
}

// cancelParked answers a call parked for approval that a cancel names: it claims the
// parked entry as an answer does (so an approval arriving now cannot run it) and
// answers canceled.
func (ex *Executor) cancelParked(def tools.Definition, key cancelKey, cn events.Cancel) {
	if !ex.track() {
		return // stopping: the cancel is in the stream for the replica that carries it out
	}
	defer ex.wg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	akey := approvalKey(key.tool, key.call, key.tenant)
	entry, err := ex.approvals.Get(ctx, akey)
	if err != nil {
		return // not parked (or no longer)
	}
	var p parked
	if json.Unmarshal(entry.Value(), &p) != nil || p.State != statePending {
		return
	}
	p.State = stateRunning
	v, _ := json.Marshal(p)
	rev, err := ex.approvals.Update(ctx, akey, v, entry.Revision())
	if err != nil {
		return // answered or expired meanwhile
	}
	ce, _ := events.DecodeCall(p.call(), 0)
	j := ex.newJob(nil, &def, ce, p.ParkedAt)
	j.afterStore = func() { _ = ex.approvals.Delete(ctx, akey, jetstream.LastRevision(rev)) }
	ex.o.log.Info().Str("tool", def.Name).Str("call_id", j.res.CallID).Msg("parked call canceled")
	ex.fail(j, canceledError(j, cn))
}

// directLast returns the last message stored on subject (a filter may hold wildcards)
// in stream, with its original headers; nil when there is none.
func directLast(ctx context.Context, nc *nats.Conn, stream, subject string) (*nats.Msg, error) {
	body, _ := json.Marshal(struct {
		LastBySubject string `json:"last_by_subj"`
	}{subject})
	r, err := nc.RequestWithContext(ctx, "$JS.API.DIRECT.GET."+stream, body)
	if err != nil {
		return nil, err
	}
	switch r.Header.Get("Status") {
	case "":
		return &nats.Msg{Subject: r.Header.Get("Nats-Subject"), Header: r.Header, Data: r.Data}, nil
	case "404":
		return nil, nil
	default:
		return nil, fmt.Errorf("direct get on %s: %s %s", stream, r.Header.Get("Status"), r.Header.Get("Description"))
	}
}
