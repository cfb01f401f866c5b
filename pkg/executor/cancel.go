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

	"github.com/toolfleet/toolfleet/internal/tick"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Cancels. A cancel of a call (events.NewCancel, on
// toolfleet.event.cancel.<tool>.<call token>[.<tenant>.<role>]) names its sender in its
// subject, and an executor acts on it only when the sender may act on the call
// (events.MayAct: the call's owner's role, or an operator role of its tenant,
// WithOperatorRoles). A cancel it refuses leaves the call as it was; the refusal is
// logged at warn, counted (refused_acts_total) and recorded as an act_refused run event
// (refuseAct). A cancel is stored in the events stream and reaches the executors three
// ways:
//
//   - Each replica holds a core subscription on toolfleet.event.cancel.<tool>.> for every
//     tool it serves (no queue group: every replica hears every cancel, since only the
//     replica running a call can stop it). A cancel heard for a call running here cancels
//     the call's context at once; one heard for a call parked for approval answers it.
//     A core subscription costs the server nothing per replica beyond an interest, and
//     it needs no history: what was published before is found in the stream (below). An
//     ordered consumer per tool per replica would replay the stream's cancels at every
//     start and keep server state per replica for nothing more.
//   - Before a delivered call runs (or a parked one is carried out), its cancels are
//     looked up in the events stream (every sender's subject of the call), coalesced with
//     other calls' look-ups into one multi-subject direct get like the results look-up
//     (lookup.go). The look-up is skipped for a tool no cancel was ever stored for
//     (checked at start, and set when a cancel is heard), so a fleet that never cancels
//     pays nothing; a parked call's is never skipped.
//   - While a call is held (running, or waiting to be retried), every in-progress beat
//     (a third of the ack wait) looks its cancels up again. A core message is delivered
//     at most once, and only to a subscription the server knows at that moment: a cancel
//     published while the replica's connection was down or reconnecting (a server
//     restart, a network blip, a slow-consumer disconnect), or lost on its way, was
//     missed for good by a running call, which ran to its normal end. So the bound on a
//     cancel is: heard, it acts at once; missed, at the call's next beat (10s with the
//     default 30s ack wait).
//   - A call parked for approval is held by nobody: each sweep of the approvals
//     (sweepApprovals, a quarter of the approval timeout, between 100ms and 5s) looks up
//     the cancels of every parked call of the tool at once (one coalesced look-up), for
//     a tool whose cancels may be stored, and answers canceled the calls a sender that
//     may cancel them canceled; an answer that comes first looks its call's cancels up
//     too. So a parked call's missed cancel acts within one sweep (5s by default).
//
// The call is registered before the look-up, and every cancel heard is remembered for a
// while, so a cancel published while its call is being delivered is either in the stream
// by the time of the look-up or heard by the subscription.
//
// What the caller gets: canceled (status and code) when the cancel came before the tool
// started or the tool stopped because of it; interrupted when a non-idempotent tool was
// cut mid-run (its side effect may be half done); the normal result when the tool
// finished anyway (a cancel after completion changes nothing: the first stored result
// wins, see events.NewResult). The result names the sender of the cancel's subject
// (events.Identity.Describe), never the name a cancel's data gives.

// maxHeard bounds the calls whose cancels a replica remembers having heard, and
// maxSenders the senders remembered for one call.
const (
	maxHeard   = 4096
	maxSenders = 8
)

// cancelKey names a call as its cancel subjects do: tool, call token, and the tenant of
// the call (a sender of another tenant names another call).
type cancelKey struct{ tool, call, tenant string }

func keyOfJob(j *job) cancelKey {
	return cancelKey{tool: j.def.Name, call: events.IDToken(j.ce.ID), tenant: j.ce.Caller.Tenant}
}

// heardCancel is a cancel heard, with its sender.
type heardCancel struct {
	sender events.Identity
	cancel events.Cancel
}

// cancels is a replica's view of cancels: the calls it is handling, the cancels it heard
// lately, and the tools whose cancels may be stored.
type cancels struct {
	ex      *Executor
	lookups *resultLookups // on the events stream

	mu      sync.Mutex
	running map[cancelKey]*watch // the calls handled here, chained by next (the same call twice is rare)
	heard   map[cancelKey][]heardCancel
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
	j      *job         // the call's, whose owner (j.ce.Caller) a sender must be allowed to act for
	next   *watch       // another handling of the same call on this replica
	cancel *heardCancel // the cancel heard or found, if any (from a sender the rule allows)
	stop   context.CancelFunc
	// refused are the senders whose cancels of the call were refused already (each is
	// recorded once).
	refused []events.Identity
	// early is true when the cancel was known before the first attempt started; ran,
	// once an attempt has run.
	early, ran bool
}

// listenCancels subscribes to the cancels of every tool in defs and finds out which
// tools have cancels stored. It runs before any call is taken.
func (ex *Executor) listenCancels(ctx context.Context, defs []tools.Definition) (*cancels, error) {
	c := &cancels{ex: ex, lookups: newLookups(ex.nc, events.StreamEvents), running: map[cancelKey]*watch{},
		heard: map[cancelKey][]heardCancel{}, stored: map[string]bool{}, parkable: map[string]tools.Definition{},
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
		filter, _ := events.CancelsFilter(def.Name) // valid: checked when subscribing above
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

// mayCancel decides whether sender may cancel the call of w (events.MayAct).
func (c *cancels) mayCancel(sender events.Identity, w *watch) *events.Refusal {
	return c.ex.mayCancel(sender, w.j.ce)
}

// mayCancel decides whether sender may cancel call ce (events.MayAct).
func (ex *Executor) mayCancel(sender events.Identity, ce events.CallEvent) *events.Refusal {
	return events.MayAct(events.Act{Actor: sender, Owner: ce.Caller, What: "cancel", Kind: "call", ID: ce.ID},
		ex.o.operatorRoles, nil)
}

// refusedAct is a refusal to record once the cancels' lock is released.
type refusedAct struct {
	def    *tools.Definition
	ce     events.CallEvent
	sender events.Identity
	why    *events.Refusal
}

// hear takes a cancel from the subscription: the call running here is stopped, a parked
// one answered, and the cancel remembered for a call about to start — each only when the
// sender may cancel it.
func (c *cancels) hear(m *nats.Msg) {
	tool, callToken, sender, ok := events.ParseCancelSubject(m.Subject)
	if !ok {
		// Of the shape before roles, or no cancel at all: nobody can say who sent it.
		c.ex.o.log.Warn().Str("subject", m.Subject).Str("reason", events.NotCancelSubject(m.Subject)).Msg("refused cancel")
		return
	}
	_, cn, err := events.DecodeCancel(events.CoreMsg(m), int(c.ex.cfg.MaxMsgSize))
	if err != nil {
		// A malformed cancel cancels nothing (it stays in the stream for the record).
		c.ex.o.log.Warn().Err(err).Str("tool", tool).Str("call_id", callToken).Msg("refused cancel")
		return
	}
	cn.By = sender.Describe() // the result names the subject's sender, not what the data says
	key := cancelKey{tool: tool, call: callToken, tenant: sender.Tenant}
	var stops []context.CancelFunc
	var refused []refusedAct
	c.mu.Lock()
	c.stored[tool] = true
	c.rememberLocked(key, sender, cn)
	for w := c.running[key]; w != nil; w = w.next {
		if w.cancel != nil || slices.Contains(w.refused, sender) {
			continue
		}
		if why := c.mayCancel(sender, w); why != nil {
			w.refused = append(w.refused, sender)
			refused = append(refused, refusedAct{def: w.j.def, ce: w.j.ce, sender: sender, why: why})
			continue
		}
		w.cancel = &heardCancel{sender, cn}
		if w.stop != nil {
			stops = append(stops, w.stop)
		}
	}
	c.mu.Unlock()
	for _, stop := range stops {
		stop()
	}
	if len(refused) > 0 {
		// Recorded off the subscription's goroutine: the event is stored before it is done.
		c.ex.goTracked(func() {
			for _, r := range refused {
				c.ex.refuseAct(r.def, r.ce, events.ActCancel, r.sender, r.why)
			}
		})
	}
	// A parked call is answered (a call being parked right now is, by park, once parked).
	if def, ok := c.parkable[tool]; ok {
		c.ex.goTracked(func() { c.ex.cancelParked(def, key, sender, cn) })
	}
}

// rememberLocked keeps sender's cancel cn of the call key names for a call that starts
// later here; c.mu is held.
func (c *cancels) rememberLocked(key cancelKey, sender events.Identity, cn events.Cancel) {
	heard, known := c.heard[key]
	if !known {
		if len(c.order) >= maxHeard {
			delete(c.heard, c.order[0])
			c.order = slices.Delete(c.order, 0, 1)
		}
		c.order = append(c.order, key)
	}
	i := slices.IndexFunc(heard, func(h heardCancel) bool { return h.sender == sender })
	switch {
	case i >= 0:
		heard[i].cancel = cn
	case len(heard) >= maxSenders:
		heard = append(heard[1:], heardCancel{sender, cn})
	default:
		heard = append(heard, heardCancel{sender, cn})
	}
	c.heard[key] = heard
}

// register makes w the watch of j's call: a cancel heard from now on reaches it, and one
// heard before from a sender that may cancel it is its cancel.
func (w *watch) register(c *cancels, j *job) {
	w.c, w.key, w.j = c, keyOfJob(j), j
	var refused []refusedAct
	c.mu.Lock()
	w.next = c.running[w.key]
	c.running[w.key] = w
	for _, h := range c.heard[w.key] {
		if why := c.mayCancel(h.sender, w); why != nil {
			w.refused = append(w.refused, h.sender)
			refused = append(refused, refusedAct{def: j.def, ce: j.ce, sender: h.sender, why: why})
			continue
		}
		known := h // a copy made only when found: &h would allocate on every call
		w.cancel = &known
		break
	}
	c.mu.Unlock()
	for _, r := range refused {
		c.ex.refuseAct(r.def, r.ce, events.ActCancel, r.sender, r.why)
	}
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
	if h := w.heard(); h != nil {
		return &h.cancel
	}
	return nil
}

// heard returns the cancel heard or found for the call, with its sender, if any.
func (w *watch) heard() *heardCancel {
	if w.c == nil {
		return nil
	}
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	return w.cancel
}

// found makes h, a cancel found in the stream while the call is held, the call's
// cancel: the attempt running ends (or the wait before the next), as if it was heard.
func (w *watch) found(h heardCancel) {
	if w.c == nil {
		return
	}
	w.c.mu.Lock()
	if w.cancel != nil {
		w.c.mu.Unlock()
		return
	}
	w.cancel = &h
	stop := w.stop
	w.c.mu.Unlock()
	if stop != nil {
		stop()
	}
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
// whether a cancel of it was heard or is stored, from a sender that may cancel it: then
// the call is answered canceled, without running, and the watch is released. always
// looks the stream up even for a tool no cancel was heard for (a parked call: its cancel
// may have been published long before, while no replica listened).
func (ex *Executor) canceledBefore(ctx context.Context, j *job, always bool) bool {
	if ex.cancels == nil {
		return false
	}
	j.watch.register(ex.cancels, j)
	ex.cancels.settle(j.def.Name)
	h := j.watch.heard()
	if h == nil && (always || ex.cancels.mayBeStored(j.def.Name)) {
		h = ex.storedCancel(ctx, j)
	}
	if h == nil {
		return false
	}
	j.watch.release()
	ex.o.log.Info().Str("tool", j.def.Name).Str("call_id", j.res.CallID).Str("run_id", j.res.RunID).
		Str("by", h.cancel.By).Msg("call canceled before it ran")
	ex.fail(j, canceledError(j, h.cancel))
	return true
}

// cancelLookupTimeout bounds the look-up of a stored cancel; one that times out reads
// as "none".
const cancelLookupTimeout = time.Second

// storedCancel looks up the call's cancels in the events stream, of every sender, and
// returns the one of a sender that may cancel the call, with it; nil when there is none or the
// look-up failed (a cancel published meanwhile is heard by the subscription, or found at
// the next look-up). A stored cancel from a sender the rule refuses is recorded, once
// for the call.
func (ex *Executor) storedCancel(ctx context.Context, j *job) *heardCancel {
	filter, err := events.CallCancelsFilter(j.ce.Caller, j.def.Name, j.ce.ID)
	if err != nil {
		return nil
	}
	// A short wait: the look-up only covers cancels published while this replica was not
	// listening, and an events stream electing a leader must not hold every call up.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelLookupTimeout)
	defer cancel()
	found, err := ex.cancels.lookups.find(ctx, filter)
	if err != nil {
		ex.o.log.Debug().Err(err).Str("call_id", j.res.CallID).Msg("look for a stored cancel")
	}
	w := &j.watch
	return ex.cancelAmong(ctx, j.def, j.ce, found, func(sender events.Identity) bool {
		ex.cancels.mu.Lock()
		defer ex.cancels.mu.Unlock()
		if slices.Contains(w.refused, sender) {
			return false
		}
		w.refused = append(w.refused, sender)
		return true
	})
}

// cancelAmong returns, of found (the subjects of stored cancels of call ce of def), the
// cancel of a sender that may cancel the call, its details read from the stream; nil
// when no sender may. A refused sender's cancel is recorded when firstRefusal says it
// was not before.
func (ex *Executor) cancelAmong(ctx context.Context, def *tools.Definition, ce events.CallEvent, found []string,
	firstRefusal func(events.Identity) bool) *heardCancel {
	for _, subj := range found {
		_, _, sender, ok := events.ParseCancelSubject(subj)
		if !ok {
			continue
		}
		why := ex.mayCancel(sender, ce)
		if why == nil {
			cn := events.Cancel{Tool: def.Name, CallID: events.ReplyID(ce.ID)}
			// The details (reason, who) are read only for a call that is canceled.
			if m, err := directLast(ctx, ex.nc, events.StreamEvents, subj); err == nil && m != nil {
				if _, c, err := events.DecodeCancel(events.CoreMsg(m), int(ex.cfg.MaxMsgSize)); err == nil {
					cn = c
				}
			}
			cn.By = sender.Describe() // the result names the subject's sender, not what the data says
			return &heardCancel{sender, cn}
		}
		if firstRefusal(sender) {
			ex.refuseAct(def, ce, events.ActCancel, sender, why)
		}
	}
	return nil
}

// keepHeld keeps j's message in progress while the call is held (see keepAlive) and, on
// each beat, looks the call's cancels up again: a cancel whose core message this replica
// missed stops the call at the next beat. It returns the stop.
func (ex *Executor) keepHeld(j *job) (stop func()) {
	if ex.cancels == nil || j.watch.c == nil {
		return ex.keepAlive(j.msg)
	}
	return tick.Repeat(ex.cfg.AckWait.D()/3, func() {
		_ = j.msg.InProgress()
		if j.watch.canceled() != nil {
			return
		}
		if h := ex.storedCancel(context.Background(), j); h != nil {
			ex.o.log.Info().Str("tool", j.def.Name).Str("call_id", j.res.CallID).Str("by", h.cancel.By).
				Msg("cancel found in the stream while the call was held (its message was missed here)")
			j.watch.found(*h)
		}
	})
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

// cancelParked answers a call parked for approval that sender's cancel cn names, when
// sender may cancel it: it claims the parked entry as an answer does (so an approval
// arriving now cannot run it) and answers canceled. A refused cancel leaves the call
// parked, and is recorded.
func (ex *Executor) cancelParked(def tools.Definition, key cancelKey, sender events.Identity, cn events.Cancel) {
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
	ce, err := events.DecodeCall(p.call(), 0)
	if err != nil {
		return // it decoded when it was parked
	}
	if why := ex.mayCancel(sender, ce); why != nil {
		ex.refuseAct(&def, ce, events.ActCancel, sender, why)
		return
	}
	p.State = stateRunning
	v, err := json.Marshal(p)
	if err != nil {
		return
	}
	rev, err := ex.approvals.Update(ctx, akey, v, entry.Revision())
	if err != nil {
		return // answered or expired meanwhile
	}
	j := ex.newJob(nil, &def, ce, p.ParkedAt)
	j.afterStore = ex.forgetParked(ctx, akey, rev)
	ex.o.log.Info().Str("tool", def.Name).Str("call_id", j.res.CallID).Str("by", cn.By).Msg("parked call canceled")
	ex.fail(j, canceledError(j, cn))
}

// refuseAct records that the act of actor (an approval answer or a cancel) on call ce
// of def was refused, as why says: a warning naming actor and owner, the
// refused_acts_total metric, and an act_refused run event on the call's run
// (events.RunActRefused), stored before it returns. Its id names the call, the act and
// the actor, so the replicas that each refuse one cancel store one event.
func (ex *Executor) refuseAct(def *tools.Definition, ce events.CallEvent, act string, actor events.Identity, why *events.Refusal) {
	ex.m.refusedAct(def.Name, act)
	res := ce.Answer() // the call's ids as its answers carry them
	ex.o.log.Warn().Str("tool", def.Name).Str("call_id", res.CallID).Str("run_id", res.RunID).Str("act", act).
		Str("actor", actor.Describe()).Str("owner", ce.Caller.Describe()).Str("reason", why.Message).
		Msg("refused an act on a call: its sender may not act on it")
	detail, err := json.Marshal(events.RefusedAct{Act: act, Actor: actor, Owner: ce.Caller, Message: why.Message})
	if err != nil {
		return
	}
	id := res.RunID + "-" + events.RunActRefused + "-" + events.IDToken(res.CallID) + "-" + act + "-" + actor.Tenant + "-" + actor.Role
	m, err := events.NewRunEventID(ex.source, events.RunActRefused, id, events.RunEvent{RunID: res.RunID, Tenant: ce.Caller.Tenant,
		Tool: def.Name, CallID: res.CallID, Executor: ex.o.id, Detail: detail}, time.Now())
	if err == nil {
		err = ex.publish(m)
	}
	if err != nil {
		ex.o.log.Warn().Err(err).Str("call_id", res.CallID).Msg("the record of a refused act was not stored")
	}
}

// goTracked runs f on a goroutine Run waits for; not at all once the executor is
// stopping (what f would do is in the stream for the replica that carries it out).
func (ex *Executor) goTracked(f func()) {
	if !ex.track() {
		return
	}
	go func() {
		defer ex.wg.Done()
		f()
	}()
}

// directLast returns the last message stored on subject (a filter may hold wildcards)
// in stream, with its original headers; nil when there is none.
func directLast(ctx context.Context, nc *nats.Conn, stream, subject string) (*nats.Msg, error) {
	body, err := json.Marshal(struct {
		LastBySubject string `json:"last_by_subj"`
	}{subject})
	if err != nil {
		return nil, err
	}
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
