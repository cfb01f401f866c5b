package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Limits of a tool across the fleet (tools.Definition.RateLimit and
// MaxInFlightPerTenant) are kept in the toolfleet-limits bucket ([events.BucketLimits]),
// which only executors serving a tool with a limit create. A tool without limits never
// touches it: its calls pass one nil check.
//
//   - Rate: the key r.<tool> holds the fleet's next free start time (the generic cell
//     rate algorithm's "theoretical arrival time"). A call reserves its start by
//     compare-and-set: start = max(now, TAT' - burst/rate) with TAT' = max(TAT, now) +
//     1/rate, and waits until then without holding its concurrency slot (so the tool's
//     other calls run meanwhile), kept alive with in-progress acks. A start further away than the
//     tool's LimitWait is not reserved: the call is answered rate_limited with
//     retry_after_ms = how far the start was. So at most burst + rate x LimitWait calls
//     wait fleet-wide, and the consumer's max ack pending bounds them too.
//   - Tenant cap: the key t.<tool>[.<tenant>] (anonymous callers share t.<tool>) holds
//     the leases of the calls of that tenant running anywhere in the fleet, each with its
//     expiry. A call adds its lease by compare-and-set when fewer than the cap are live,
//     renews it every lease/3 while it runs and removes it when the tool returns. The
//     lease of a replica that crashed runs out (within the lease, 15s by default) and is
//     dropped by the next call that reads the key. A call that finds no room waits
//     without holding its concurrency slot, so other tenants' calls go on; at most
//     maxWaitingPerTool(concurrency) wait on one replica, and a call beyond that, or one
//     that waited LimitWait, is answered rate_limited.
//
// Times are the replicas' clocks: limits assume they agree within a small part of a
// second (NTP), and precision is traded for correctness of the sum: a reservation or a
// lease whose call never ran (a crash) only leaves capacity unused for a while.

// defaultLimitLease is how long a tenant slot stays taken without a renewal.
const defaultLimitLease = 15 * time.Second

// limitRetryHint is the retry_after_ms of a call refused for its tenant's cap: when the
// slots free up depends on the running calls, so this is only a hint.
const limitRetryHint = time.Second

// maxWaitingPerTool bounds the calls of one tool waiting for a tenant slot on one
// replica, for a tool run concurrency at a time.
func maxWaitingPerTool(concurrency int) int { return max(16, 4*concurrency) }

// WithLimitLease sets how long a tenant slot of a tool with MaxInFlightPerTenant stays
// taken without a renewal: the time after which the slot of a replica that crashed
// mid-call is free again. Running calls renew theirs every third of it. Defaults to 15s;
// at least 1s.
func WithLimitLease(d time.Duration) Option {
	return func(o *options) error {
		if d < time.Second {
			return invalid("limit lease must be at least 1s, got %s", d)
		}
		o.limitLease = d
		return nil
	}
}

// limiter is the executor's view of the limits bucket, one toolLimits per tool that
// declares a limit. The map is built before any worker starts and only read after.
type limiter struct {
	kv    jetstream.KeyValue
	lease time.Duration
	tools map[string]*toolLimits
}

type toolLimits struct {
	def tools.Definition
	// slots are the tool's places on this replica (set before its consumers are
	// pulled); a call waiting for a limit lends its place meanwhile.
	slots      *slots
	maxWaiting int32
	waiting    atomic.Int32

	mu    sync.Mutex
	wakes map[string]chan struct{} // by key: closed when this replica frees a slot
}

// setUpLimits opens the limits bucket when a served tool declares a limit.
func (ex *Executor) setUpLimits(ctx context.Context) error {
	var limited []tools.Definition
	for _, d := range ex.reg.Definitions() {
		if d.HasLimits() {
			limited = append(limited, d)
		}
	}
	if len(limited) == 0 {
		return nil
	}
	kv, err := jsutil.EnsureLimits(ctx, ex.js, ex.cfg)
	if err != nil {
		return err
	}
	l := &limiter{kv: kv, lease: ex.o.limitLease, tools: make(map[string]*toolLimits, len(limited))}
	if l.lease == 0 {
		l.lease = defaultLimitLease
	}
	for _, d := range limited {
		l.tools[d.Name] = &toolLimits{def: d, wakes: map[string]chan struct{}{}}
	}
	ex.limits = l
	return nil
}

// bindLimits gives the limits of a tool its worker's places; nothing for a tool without
// limits.
func (ex *Executor) bindLimits(def tools.Definition, s *slots) {
	if ex.limits == nil {
		return
	}
	if tl := ex.limits.tools[def.Name]; tl != nil {
		tl.slots = s
		tl.maxWaiting = int32(maxWaitingPerTool(cap(s.run)))
	}
}

// limitHold is what a call holds of its tool's limits while it runs.
type limitHold struct {
	ex      *Executor
	tl      *toolLimits
	key     string // the tenant key; "" without a tenant cap
	holder  string
	stopRen func()
	once    sync.Once
}

// release frees the call's tenant slot (once; nil-safe).
func (h *limitHold) release() {
	if h == nil || h.key == "" {
		return
	}
	h.once.Do(func() {
		h.stopRen()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := h.ex.limits.update(ctx, h.key, func(leases map[string]int64, _ int64) (bool, error) {
			_, had := leases[h.holder]
			delete(leases, h.holder)
			return had, nil
		})
		if err != nil {
			h.ex.o.log.Warn().Err(err).Str("key", h.key).Msg("limits: free a tenant slot (it frees itself when its lease runs out)")
		}
		h.tl.wake(h.key)
	})
}

// enterLimits lets j run once its tool's limits allow it, waiting as they say. It
// returns ok=false when j was answered (rate_limited) or handed back instead (the
// executor is stopping, the limits bucket cannot be reached); the returned hold must be
// released once the tool has run.
func (ex *Executor) enterLimits(ctx context.Context, j *job) (h *limitHold, ok bool) {
	if ex.limits == nil {
		return nil, true
	}
	tl := ex.limits.tools[j.def.Name]
	if tl == nil {
		return nil, true
	}
	start := time.Now()
	until := start.Add(j.def.EffectiveLimitWait())
	if dl := j.ce.Deadline; !dl.IsZero() && dl.Before(until) {
		until = dl
	}
	defer func() { j.res.LimitWaitMS = time.Since(start).Milliseconds() }()
	if n := j.def.MaxInFlightPerTenant; n > 0 {
		var refused *tools.Error
		var err error
		h, refused, err = ex.takeTenantSlot(ctx, tl, j, n, until)
		if err != nil || refused != nil {
			ex.leaveLimits(j, refused, err)
			return nil, false
		}
	}
	if r := j.def.RateLimit; r != nil {
		refused, err := ex.reserveStart(ctx, tl, *r, until)
		if err != nil || refused != nil {
			h.release()
			ex.leaveLimits(j, refused, err)
			return nil, false
		}
	}
	return h, true
}

// leaveLimits answers a call its limits refused, or hands it back.
func (ex *Executor) leaveLimits(j *job, refused *tools.Error, err error) {
	if refused != nil {
		ex.o.log.Info().Str("tool", j.def.Name).Str("call_id", j.res.CallID).Int64("retry_after_ms", refused.RetryAfterMS).
			Msg("limits: call refused rate_limited")
		ex.fail(j, refused)
		return
	}
	if errors.Is(err, errStopping) || errors.Is(err, context.Canceled) {
		j.endSpan(nil)
		if j.msg != nil {
			_ = j.msg.Nak()
		}
		return
	}
	ex.o.log.Warn().Err(err).Str("tool", j.def.Name).Str("call_id", j.res.CallID).Msg("limits: cannot reach the limits bucket; handing the call back")
	ex.handBack(j)
}

var errStopping = errors.New("executor stopping")

// stoppingNow reports whether the executor is stopping (Run's context ended).
func (ex *Executor) stoppingNow() bool {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	return ex.stopping
}

// takeTenantSlot adds the call's lease to its tenant's key once fewer than n are live,
// waiting until until. While it waits it lends its place among the tool's slots,
// so that other tenants' calls run, and takes it again before returning.
func (ex *Executor) takeTenantSlot(ctx context.Context, tl *toolLimits, j *job, n int, until time.Time) (*limitHold, *tools.Error, error) {
	key := "t." + j.def.Name
	if t := j.ce.Caller.Tenant; t != "" {
		key += "." + t
	}
	h := &limitHold{ex: ex, tl: tl, key: key, holder: ex.o.id + "-" + nuid.Next()}
	l := ex.limits
	try := func() (bool, error) {
		taken := false
		err := l.update(ctx, key, func(leases map[string]int64, now int64) (bool, error) {
			// f runs again after a conflict: only its last run counts.
			taken = len(leases) < n
			if taken {
				leases[h.holder] = now + int64(l.lease)
			}
			return taken, nil
		})
		return taken, err
	}
	taken, err := try()
	if err == nil && !taken {
		if tl.waiting.Add(1) > tl.maxWaiting {
			tl.waiting.Add(-1)
			return nil, &tools.Error{Code: tools.CodeRateLimited, RetryAfterMS: limitRetryHint.Milliseconds(),
				Message: fmt.Sprintf("tool %q runs at most %d calls of one tenant at once across the fleet, and %d more already wait on this executor; try again later",
					j.def.Name, n, tl.maxWaiting)}, nil
		}
		taken, err = ex.waitTenantSlot(tl, key, until, try)
		tl.waiting.Add(-1)
	}
	if err != nil {
		return nil, nil, err
	}
	if !taken {
		return nil, &tools.Error{Code: tools.CodeRateLimited, RetryAfterMS: limitRetryHint.Milliseconds(),
			Message: fmt.Sprintf("tool %q runs at most %d calls of one tenant at once across the fleet, and none ended within %s; try again later",
				j.def.Name, n, j.def.EffectiveLimitWait())}, nil
	}
	h.stopRen = ex.renewLease(h)
	return h, nil, nil
}

// waitTenantSlot tries again whenever this replica frees a slot of key and at least
// every 100-300ms (slots freed elsewhere), without holding a place among tl's slots.
func (ex *Executor) waitTenantSlot(tl *toolLimits, key string, until time.Time, try func() (bool, error)) (taken bool, err error) {
	defer tl.slots.lend()()
	for {
		wake := tl.wakeChan(key)
		left := time.Until(until)
		if left <= 0 {
			return false, nil
		}
		t := time.NewTimer(min(left, 100*time.Millisecond+rand.N(200*time.Millisecond)))
		select {
		case <-wake:
		case <-t.C:
		}
		t.Stop()
		if ex.stoppingNow() {
			return false, errStopping
		}
		taken, err = try()
		if taken || err != nil {
			return taken, err
		}
	}
}

func (tl *toolLimits) wakeChan(key string) chan struct{} {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	c := tl.wakes[key]
	if c == nil {
		c = make(chan struct{})
		tl.wakes[key] = c
	}
	return c
}

func (tl *toolLimits) wake(key string) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if c := tl.wakes[key]; c != nil {
		close(c)
		delete(tl.wakes, key)
	}
}

// renewLease keeps h's lease alive every third of the lease until the returned stop.
func (ex *Executor) renewLease(h *limitHold) (stop func()) {
	l := ex.limits
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(l.lease / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), l.lease/3)
			lost := false
			err := l.update(ctx, h.key, func(leases map[string]int64, now int64) (bool, error) {
				_, ok := leases[h.holder]
				if lost = !ok; lost {
					return false, nil
				}
				leases[h.holder] = now + int64(l.lease)
				return true, nil
			})
			cancel()
			if err != nil || lost {
				ex.o.log.Warn().Err(err).Bool("lost", lost).Str("key", h.key).Msg("limits: renew a tenant slot")
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// update changes the leases of key by compare-and-set: f gets the live leases (expired
// ones dropped) and the time, changes them and says whether to write. Conflicts with
// other replicas are tried again.
func (l *limiter) update(ctx context.Context, key string, f func(leases map[string]int64, now int64) (bool, error)) error {
	for {
		var rev uint64
		leases := map[string]int64{}
		e, err := l.kv.Get(ctx, key)
		switch {
		case err == nil:
			rev = e.Revision()
			if err := json.Unmarshal(e.Value(), &leases); err != nil {
				leases = map[string]int64{} // not ours to keep: overwrite it
			}
		case errors.Is(err, jetstream.ErrKeyNotFound):
		default:
			return err
		}
		now := time.Now().UnixNano()
		for k, exp := range leases {
			if exp <= now {
				delete(leases, k)
			}
		}
		write, err := f(leases, now)
		if err != nil || !write {
			return err
		}
		v, err := json.Marshal(leases)
		if err != nil {
			return err
		}
		if rev == 0 {
			_, err = l.kv.Create(ctx, key, v)
		} else {
			_, err = l.kv.Update(ctx, key, v, rev)
		}
		if err == nil || !isConflict(err) {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

func isConflict(err error) bool {
	return errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch)
}

// reserveStart reserves the call's start in its tool's rate (r.<tool>) and waits for it,
// holding the call's place in the semaphore. A start later than until is not reserved:
// the call is refused with the wait as retry_after_ms.
func (ex *Executor) reserveStart(ctx context.Context, tl *toolLimits, r tools.RateLimit, until time.Time) (*tools.Error, error) {
	key := "r." + tl.def.Name
	interval := int64(float64(time.Second) / r.PerSecond)
	burst := int64(r.EffectiveBurst())
	var start int64
	for {
		var rev uint64
		var tat int64
		e, err := ex.limits.kv.Get(ctx, key)
		switch {
		case err == nil:
			rev = e.Revision()
			tat, _ = strconv.ParseInt(string(e.Value()), 10, 64) // not a time: 0, overwritten below
		case errors.Is(err, jetstream.ErrKeyNotFound):
		default:
			return nil, err
		}
		now := time.Now().UnixNano()
		next := max(tat, now) + interval
		start = max(now, next-burst*interval)
		if wait := time.Duration(start - now); now+int64(wait) > until.UnixNano() {
			return &tools.Error{Code: tools.CodeRateLimited, RetryAfterMS: max(wait.Milliseconds(), 1),
				Message: fmt.Sprintf("tool %q starts at most %g calls per second across the fleet (burst %d); its next start is %s away, more than this call may wait; try again later",
					tl.def.Name, r.PerSecond, burst, wait.Round(time.Millisecond))}, nil
		}
		v := []byte(strconv.FormatInt(next, 10))
		if rev == 0 {
			_, err = ex.limits.kv.Create(ctx, key, v)
		} else {
			_, err = ex.limits.kv.Update(ctx, key, v, rev)
		}
		if err == nil {
			break
		}
		if !isConflict(err) {
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	if time.Until(time.Unix(0, start)) <= 0 {
		return nil, nil
	}
	// Wait without a place among the slots, so that the tool's other calls run meanwhile.
	defer tl.slots.lend()()
	for {
		left := time.Until(time.Unix(0, start))
		if left <= 0 {
			return nil, nil
		}
		// The reservation is spent either way; a stop hands the call back.
		if ex.stoppingNow() {
			return nil, errStopping
		}
		time.Sleep(min(left, 200*time.Millisecond))
	}
}
