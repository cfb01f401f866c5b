package executor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/internal/tick"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// job is one call being handled: its message, decoded event and the result so far.
type job struct {
	msg jetstream.Msg
	ce  events.CallEvent
	// def is the served tool's definition (its worker's, shared: never changed).
	def   *tools.Definition
	start time.Time
	res   events.Result
	// seq is the call's sequence in the calls stream and deliveries how often it was
	// delivered (0 for a call the janitor read directly).
	seq, deliveries uint64
	// msg is nil for calls answered without a delivery (the janitor, an approval
	// expiring); afterStore, if set, runs once the answer is stored, before the ack.
	afterStore func()
	// trace is the call's trace context and its execute_tool span while recorded.
	trace traced
	// watch lets a cancel of the call reach it while it is handled (cancel.go); attempt
	// is the attempt running, as the run's followers see it (progress.go).
	watch   watch
	attempt attempt
}

// newJob starts the answer to a (possibly invalid) call of def: the result is addressed
// to the caller's ids as [events.ReplyID] gives them.
func (ex *Executor) newJob(msg jetstream.Msg, def *tools.Definition, ce events.CallEvent, start time.Time) *job {
	res := ce.Answer()
	res.Tool, res.Executor, res.Validated = def.Name, ex.o.id, def.Validated()
	res.NoSchemaMode = def.NoSchema()
	return &job{msg: msg, ce: ce, def: def, start: start, res: res, trace: traced{parent: ce.TraceParent, state: ce.TraceState}}
}

// handleCall takes one delivered call through decode → answered already? → hydrate →
// approval gate → run → result. Whatever happens, the caller gets one result or the
// message a dead letter; nothing is acked before its answer is stored.
func (ex *Executor) handleCall(ctx context.Context, w *worker, msg jetstream.Msg) {
	ce, decodeErr := events.DecodeCall(msg, int(ex.cfg.MaxMsgSize))
	j := ex.newJob(msg, &w.def, ce, time.Now())
	meta, err := msg.Metadata()
	if err != nil {
		ex.o.log.Error().Err(err).Msg("message without JetStream metadata")
		_ = msg.Nak()
		return
	}
	j.seq, j.deliveries = meta.Sequence.Stream, meta.NumDelivered
	if meta.NumDelivered > 1 {
		ex.m.redelivery(w.def.Name)
	} else {
		ex.m.queued(w.def.Name, meta.Timestamp) // a redelivery's wait holds earlier attempts'
	}
	if decodeErr != nil {
		ex.refuse(j, msg, decodeErr)
		return
	}
	var unknown error // why whether the call has a result could not be told
	if ex.mayBeAnswered(j) {
		var answered bool
		if answered, unknown = ex.lookUpResult(ctx, j); answered {
			_ = msg.Ack()
			return
		}
	}
	if ex.canceledBefore(ctx, j, false) {
		return
	}
	defer j.watch.release()
	ctx = ex.startSpan(ctx, j)
	if meta.NumDelivered >= uint64(ex.cfg.MaxDeliver) {
		if unknown != nil {
			// A server too slow to say whether the call has a result may hold one: a
			// call that ran is not answered an error for it. Asked again later.
			ex.o.log.Warn().Err(unknown).Str("call_id", j.res.CallID).Uint64("deliveries", j.deliveries).
				Msg("cannot tell whether a call delivered too often has a result; handing it back rather than giving up")
			ex.handBack(j)
			return
		}
		ex.giveUp(j, msg)
		return
	}
	if !ce.Deadline.IsZero() && time.Now().After(ce.Deadline) {
		ex.fail(j, tools.Errorf(tools.CodeTimeout, "the call's deadline %s passed before it started", ce.Deadline.Format(time.RFC3339)))
		return
	}
	// Who may call: the identity of the call's subject, never the caller's metadata.
	if f := w.def.Forbidden(ce.Caller.Tenant, ce.Caller.Role); f != nil {
		ex.fail(j, f)
		return
	}
	if !ex.resolveArguments(ctx, j) { // arguments_ref: read them (argsref.go)
		return
	}
	call, err := ex.hydrate(j, j.ce.Call.Arguments)
	if err != nil {
		ex.fail(j, tools.AsError(err, tools.CodeInvalidInput))
		return
	}
	if call = ex.askPolicy(ctx, j, call); call == nil { // answered: denied or refused (policy.go)
		return
	}
	if ex.needsApproval(w.def.Name) {
		ex.park(ctx, j)
		return
	}
	ex.runAndAnswer(ctx, j, call)
}

// answered reports whether the call already has a stored result: it ran (or was
// answered) before, and this delivery is a redelivery after its ack was lost, or a
// re-publication after the duplicate window. It is a direct get of the result's subject,
// coalesced with other calls' (see resultLookups); a failed look-up counts as "not
// answered", since the result's publish is refused anyway if one exists (see
// [events.NewResult]).
func (ex *Executor) answered(ctx context.Context, j *job) bool {
	found, _ := ex.lookUpResult(ctx, j)
	return found
}

// lookUpResult is answered, with the error of a look-up that could not tell.
func (ex *Executor) lookUpResult(ctx context.Context, j *job) (bool, error) {
	subj, err := events.ResultSubject(j.res.Caller.Tenant, j.res.RunID, j.res.CallID)
	if err != nil {
		return false, nil // no such subject can hold a result
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lookupTimeout)
	defer cancel()
	found, err := ex.lookups[ex.cfg.ResultShard(subj)].has(ctx, subj)
	if err != nil {
		ex.o.log.Debug().Err(err).Str("call_id", j.res.CallID).Msg("look for a stored result")
	}
	if !found {
		return false, err
	}
	ex.m.alreadyAnswered(j.def.Name)
	ex.o.log.Info().Str("tool", j.def.Name).Str("call_id", j.res.CallID).Str("run_id", j.res.RunID).
		Uint64("deliveries", j.deliveries).Msg("call already answered; not run again")
	return true, nil
}

// mayBeAnswered reports whether the call is worth looking up in the results stream
// before it runs: a redelivery (its result may be stored and its ack lost), a
// non-idempotent call (it must not run twice), one that needs approval (a human must
// not be asked twice), or any call when calls are sharded (a copy re-published within
// the duplicate window lands on another shard, whose stream never saw the first).
// Otherwise — an idempotent call's first delivery from one calls stream — the look-up
// would cost every call a request to catch only a call re-published after the
// duplicate window: such a call runs again (tools run at least once), its second
// result is refused (see [events.NewResult]): the call keeps one stored result.
func (ex *Executor) mayBeAnswered(j *job) bool {
	return j.deliveries > 1 || !j.def.IsIdempotent() || ex.needsApproval(j.def.Name) || ex.cfg.Sharded()
}

// runAndAnswer runs a hydrated call under ctx with its retries and publishes the result,
// or hands the call back when ctx ended (the executor's grace period ran out).
func (ex *Executor) runAndAnswer(ctx context.Context, j *job, call *tools.Call) {
	stop := ex.keepHeld(j) // in progress, and its cancels looked up again on each beat
	defer stop()
	// The tool's fleet-wide limits, if it has any (limits.go): wait, or answer rate_limited.
	hold, ok := ex.enterLimits(ctx, j)
	if !ok {
		return
	}
	defer hold.release()
	if !j.def.IsIdempotent() {
		first, err := ex.markStarted(ctx, j)
		if err != nil {
			ex.o.log.Warn().Err(err).Str("call_id", j.res.CallID).Msg("record start of non-idempotent call; handing it back")
			ex.handBack(j)
			return
		}
		if !first {
			ex.fail(j, tools.Errorf(tools.CodeInterrupted,
				"tool %q is not idempotent and call %s had already started (its executor stopped or crashed while running it, or could not store its result); it is not run again",
				j.def.Name, j.res.CallID))
			return
		}
	}
	out, attempts := ex.runWithRetries(ctx, j, call)
	hold.release()
	if out.Err != nil && out.Err.Code == tools.CodeCanceled && ctx.Err() != nil {
		// Cancelled by our own shutdown: hand it back for another replica.
		j.endSpan(nil)
		_ = j.msg.Nak()
		return
	}
	if f := j.watch.cancelOutcome(j, out); f != nil {
		out = tools.Outcome{Output: f.ForModel(), Err: f}
	}
	j.res.Attempts = attempts
	j.res.Output = out.Output
	ex.answer(j, out.Err)
}

// runWithRetries runs the call, retrying retryable failures with backoff and jitter per
// the tool's policy. Non-idempotent tools are never retried.
func (ex *Executor) runWithRetries(ctx context.Context, j *job, call *tools.Call) (tools.Outcome, int) {
	var policy *tools.RetryPolicy // read at the first failure: most calls never need it
	retries := 0
	ex.m.started(j.def.Name)
	defer ex.m.stopped(j.def.Name)
	j.res.StartedAt = time.Now().UTC()
	began := j.res.StartedAt
	for attempt := 1; ; attempt++ {
		if attempt > 1 {
			// A fresh instance per attempt: a typed tool may have changed its fields.
			c, err := ex.hydrate(j, call.Arguments())
			if err != nil {
				return tools.Outcome{Err: tools.AsError(err, tools.CodeInvalidInput)}, attempt - 1
			}
			call = c
			began = time.Now().UTC()
		}
		out := ex.runOnce(ctx, j, call, attempt)
		if attempt > 1 { // a retried call's every attempt is on its timeline
			j.res.AttemptSpans = appendSpan(j.res.AttemptSpans, began, out)
		}
		if out.Err == nil || ctx.Err() != nil {
			return out, attempt
		}
		if policy == nil {
			p := j.def.EffectiveRetry()
			policy = &p
			if j.def.IsIdempotent() {
				retries = policy.Retries()
			}
		}
		if attempt > retries || !policy.ShouldRetryError(out.Err) {
			return out, attempt
		}
		if attempt == 1 {
			j.res.AttemptSpans = appendSpan(nil, began, out)
		}
		delay := policy.BackoffJittered(attempt, rand.Float64())
		if !j.ce.Deadline.IsZero() && time.Now().Add(delay).After(j.ce.Deadline) {
			return out, attempt // no time left for another attempt
		}
		ex.m.retry(j.def.Name)
		ex.o.log.Debug().Str("tool", j.def.Name).Str("call_id", j.res.CallID).Int("attempt", attempt).
			Str("code", string(out.Err.Code)).Dur("backoff", delay).Msg("retrying")
		if !ex.backOff(ctx, j, delay) {
			return tools.Outcome{Err: tools.Errorf(tools.CodeCanceled, "executor stopping, or the call was canceled")}, attempt
		}
	}
}

// appendSpan adds the attempt that began then and ended now with out to spans.
func appendSpan(spans []events.AttemptSpan, began time.Time, out tools.Outcome) []events.AttemptSpan {
	span := events.AttemptSpan{StartedAt: began, FinishedAt: time.Now().UTC()}
	if out.Err != nil {
		span.Code = out.Err.Code
	}
	return append(spans, span)
}

func (ex *Executor) runOnce(ctx context.Context, j *job, call *tools.Call, attempt int) tools.Outcome {
	run, failure := ex.runContext(ctx, j) // only for a tool that asked for it (runcontext.go)
	if failure != nil {
		return tools.Outcome{Err: failure}
	}
	ctx = tools.WithCallInfo(ctx, tools.CallInfo{CallID: j.res.CallID, RunID: j.res.RunID, Tool: j.def.Name,
		Attempt: attempt, Deadline: j.ce.Deadline, Metadata: j.ce.Call.Metadata,
		Tenant: j.ce.Caller.Tenant, Role: j.ce.Caller.Role, Run: run})
	ctx = WithFleet(ctx, Fleet{Conn: ex.nc, Events: ex.cfg, Log: ex.o.log, Stopped: ex.runDone})
	if s := ex.secrets[j.def.Name]; len(s) > 0 {
		ctx = tools.WithSecrets(ctx, s)
	}
	ctx = ex.startAttempt(ctx, j, attempt)
	defer j.attempt.end()
	var cancel context.CancelFunc
	if deadline := ex.attemptDeadline(j); deadline.IsZero() {
		ctx, cancel = context.WithCancel(ctx)
	} else {
		ctx, cancel = context.WithDeadline(ctx, deadline)
	}
	defer cancel()
	j.watch.attach(cancel) // a cancel of the call ends the attempt
	defer j.watch.detach()
	return call.Run(ctx)
}

// attemptDeadline is when an attempt of j must end: the call's deadline, or sooner the
// executor's default timeout for a tool without its own (Call.Run sets that one); zero
// for none. One deadline makes one context and one timer per attempt.
func (ex *Executor) attemptDeadline(j *job) time.Time {
	deadline := j.ce.Deadline
	if j.def.Timeout == 0 {
		if d := time.Now().Add(ex.o.defaultTimeout); deadline.IsZero() || d.Before(deadline) {
			deadline = d
		}
	}
	return deadline
}

// fail answers the call with failure, without running it.
func (ex *Executor) fail(j *job, failure *tools.Error) {
	j.res.Output = failure.ForModel()
	ex.answer(j, failure)
}

// answer completes the result and publishes it; the call is acked once JetStream has
// stored the result.
func (ex *Executor) answer(j *job, failure *tools.Error) {
	failure = scrubSecrets(j, ex.secrets[j.def.Name], failure)
	failure = fitOutput(j, failure)
	rm, failure, err := ex.encodeResult(j, failure)
	if err != nil { // cannot happen for a decoded call; never lose the message silently
		ex.o.log.Error().Err(err).Str("call_id", j.res.CallID).Msg("encode result; handing the call back")
		ex.handBack(j)
		return
	}
	ex.m.finished(j.def.Name, j.res.Status, time.Since(j.start))
	log := ex.o.log.Debug()
	if failure != nil {
		log = ex.o.log.Info().Str("code", string(failure.Code)).Str("error", failure.Message)
	}
	log.Str("tool", j.def.Name).Str("call_id", j.res.CallID).Str("run_id", j.res.RunID).
		Int("attempt", j.res.Attempts).Int64("duration_ms", j.res.DurationMS).Bool("validated", j.res.Validated).
		Str("status", string(j.res.Status))
	if j.res.NoSchemaMode != "" {
		log = log.Str("no_schema_mode", string(j.res.NoSchemaMode))
	}
	if !j.res.Caller.IsZero() {
		log = log.Str("tenant", j.res.Caller.Tenant).Str("role", j.res.Caller.Role)
	}
	log.Msg("call answered")
	j.carryTrace(rm)
	j.endSpan(failure)
	ex.publishThenAck(j, rm)
}

// fitOutput makes the output one that every reader can take: valid UTF-8 (invalid bytes
// replaced, and the result says so) and nested no deeper than [tools.MaxDepth].
func fitOutput(j *job, failure *tools.Error) *tools.Error {
	if !utf8.Valid(j.res.Output) {
		j.res.Output = bytes.ToValidUTF8(j.res.Output, []byte("\uFFFD"))
		j.res.OutputUTF8Repaired = true
	}
	// Nesting deeper than MaxDepth takes two bytes a level; shorter outputs cannot.
	if len(j.res.Output) > 2*tools.MaxDepth {
		if d := tools.JSONDepth(j.res.Output); d > tools.MaxDepth {
			failure = tools.Errorf(tools.CodeInvalidOutput, "the output of %q is nested too deeply (%d levels; the limit is %d)",
				j.def.Name, d, tools.MaxDepth)
			j.res.Output = failure.ForModel()
		}
	}
	return failure
}

// encodeResult settles the result's status and encodes it. An output too large for a
// result is decided here, before anything is published: the result becomes an
// output_too_large error saying both sizes.
func (ex *Executor) encodeResult(j *job, failure *tools.Error) (*nats.Msg, *tools.Error, error) {
	settle(j, failure)
	failure = ex.claimCheck(j, failure)
	rm, err := events.NewResult(ex.source, j.res, j.res.Attempts)
	if err != nil {
		return nil, failure, err
	}
	if limit := ex.resultLimit(); len(rm.Data) > limit {
		failure = tools.Errorf(tools.CodeOutputTooLarge,
			"the output of %q is %d bytes; a result holds at most %d bytes (the stream's message limit, or the server's max payload less %d bytes for headers), so it was not kept",
			j.def.Name, len(j.res.Output), limit, events.HeaderAllowance)
		j.res.Output = failure.ForModel()
		j.res.OutputUTF8Repaired = false
		settle(j, failure)
		rm, err = events.NewResult(ex.source, j.res, j.res.Attempts)
	}
	if err == nil {
		rm.Subject = ex.cfg.ResultPublishSubject(rm.Subject) // its shard's, with several
	}
	return rm, failure, err
}

func settle(j *job, failure *tools.Error) {
	j.res.Status = events.StatusOf(failure)
	j.res.Error = failure
	now := time.Now()
	j.res.FinishedAt = now.UTC()
	j.res.DurationMS = now.Sub(j.start).Milliseconds()
}

// resultLimit is the largest result body that can be stored: the configured message
// size, or less when the server's max payload (headers included) is smaller.
func (ex *Executor) resultLimit() int {
	limit := int(ex.cfg.MaxMsgSize)
	if mp := int(ex.nc.MaxPayload()) - events.HeaderAllowance; mp > 0 && mp < limit {
		limit = mp
	}
	return limit
}

// publishThenAck publishes the result asynchronously and acks the call when the
// result's PubAck arrives — never before, so a crash in between means a redelivery, not
// a lost call. JetStream stores one result per call: a second one (a redelivered call
// that ran again) is refused, and the call counts as answered by the first. A result
// that cannot be stored yet is tried again (see publishResult) and only then is the call
// handed back for later.
func (ex *Executor) publishThenAck(j *job, rm *nats.Msg) {
	if err := ex.publishResult(j, rm); err != nil {
		if !jsutil.IsAlreadyAnswered(err) {
			ex.o.log.Warn().Err(err).Str("tool", j.def.Name).Str("call_id", j.res.CallID).
				Msg("result not stored; handing the call back")
			ex.handBack(j)
			return
		}
		ex.m.alreadyAnswered(j.def.Name)
		ex.o.log.Info().Str("tool", j.def.Name).Str("call_id", j.res.CallID).
			Msg("call already answered by an earlier result; this one is dropped")
	}
	if j.afterStore != nil {
		j.afterStore()
	}
	if j.msg != nil {
		_ = j.msg.Ack()
	}
}

// How a result that could not be stored is tried again: waits from resultFirstWait
// doubling up to resultMaxWait, for at least one ack wait and at most resultMaxWindow.
// A leader election of the results stream (or of its node's cluster) takes seconds, and
// a finished call's result is a fact that must not be lost to it: giving up hands the
// call back, and a non-idempotent call handed back can only be answered interrupted.
const (
	resultFirstWait = 100 * time.Millisecond
	resultMaxWait   = time.Second
	resultMaxWindow = 5 * time.Minute
	// publishTryTimeout is how long one publish waits for its PubAck (set on the
	// executor's JetStream context): a publish lost with a stream leader that died gets
	// no answer at all, and is tried again after this.
	publishTryTimeout = 3 * time.Second
)

// publishResult stores the result rm of j. A failure that may pass — no responders or
// no PubAck while the results stream elects a leader, a server restarting, a
// "temporarily unavailable" answer — is retried with the same message (same
// Nats-Msg-Id and expected subject sequence 0, so never stored twice) for as long as the
// call's own limits allow: one ack wait, or until the call's deadline when that is later
// (at most resultMaxWindow). A server that is only slow — connected, taking the writes
// late: the window of unacknowledged publishes full, a PubAck later than
// publishTryTimeout — is waited for resultMaxWindow whatever the call's limits: the call
// ran, and giving up would hand it back to run again, or to be answered interrupted.
// Meanwhile the call is kept alive with in-progress acks, so JetStream does not hand it
// to another replica, which would run an idempotent call again or answer a
// non-idempotent one interrupted. A refusal (the call answered already, a result too
// large) is returned at once; so is the last failure once the window is over or the
// executor's grace period ended.
func (ex *Executor) publishResult(j *job, rm *nats.Msg) error {
	err := ex.publishOnce(rm)
	if err == nil || !jsutil.MayPass(err) {
		return err
	}
	start := time.Now()
	until := start.Add(ex.cfg.AckWait.D())
	if dl := j.ce.Deadline; dl.After(until) {
		until = dl
		if most := start.Add(resultMaxWindow); most.Before(until) {
			until = most
		}
	}
	if j.msg != nil {
		_ = j.msg.InProgress()
		stop := ex.keepAlive(j.msg)
		defer stop()
	}
	ex.o.log.Warn().Err(err).Str("tool", j.def.Name).Str("call_id", j.res.CallID).Time("until", until).
		Msg("result not stored yet; trying again")
	b := tick.Backoff{First: resultFirstWait, Max: resultMaxWait}
	for tries := 2; ; tries++ {
		wait := b.Next()
		limit := until
		if ex.slow(err) {
			limit = start.Add(resultMaxWindow)
		}
		if time.Now().Add(wait).After(limit) {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ex.runDone:
			t.Stop()
			return fmt.Errorf("executor stopped: %w", err)
		}
		if err = ex.publishOnce(rm); err == nil || !jsutil.MayPass(err) {
			if err == nil {
				ex.o.log.Info().Str("tool", j.def.Name).Str("call_id", j.res.CallID).Int("tries", tries).
					Dur("after", time.Since(start)).Msg("result stored after retries")
			}
			return err
		}
	}
}

// slow reports whether err is a publish that failed because the server takes writes
// more slowly than they come, while it is connected: no room among the unacknowledged
// publishes, or no PubAck in time.
func (ex *Executor) slow(err error) bool {
	return ex.nc.IsConnected() &&
		(errors.Is(err, jetstream.ErrTooManyStalledMsgs) || errors.Is(err, jetstream.ErrAsyncPublishTimeout))
}

// publishOnce publishes m and waits for its PubAck (at most publishTryTimeout),
// waiting for room among the unacknowledged publishes within that time.
func (ex *Executor) publishOnce(m *nats.Msg) error {
	f, err := ex.js.PublishMsgAsync(m)
	if errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
		ctx, cancel := context.WithTimeout(context.Background(), publishTryTimeout)
		f, err = jsutil.PublishAsync(ctx, ex.js, m)
		cancel()
	}
	if err == nil {
		select {
		case <-f.Ok():
			return nil
		case err = <-f.Err():
		}
	}
	return fmt.Errorf("publish %s: %w", m.Subject, err)
}

// handBack returns the call to JetStream for a later delivery, waiting longer the more
// often it came back (1s, 2s, ... up to 30s).
func (ex *Executor) handBack(j *job) {
	j.endSpan(nil)
	if j.msg != nil {
		_ = j.msg.NakWithDelay(min(time.Duration(max(j.deliveries, 1))*time.Second, 30*time.Second))
	}
}

// publish stores m in JetStream, waiting for its PubAck; a failed publish is tried
// again (same Nats-Msg-Id, so never doubled) a few times. A refusal by the server
// (a JetStream API error, such as a result that already exists) is returned at once.
func (ex *Executor) publish(m *nats.Msg) error {
	var last error
	for try := range 3 {
		err := ex.publishOnce(m)
		if err == nil {
			return nil
		}
		last = err
		var apiErr *jetstream.APIError
		if errors.Is(err, nats.ErrConnectionClosed) || errors.As(err, &apiErr) {
			break
		}
		time.Sleep(time.Duration(try+1) * 200 * time.Millisecond)
	}
	return last
}

// refuse answers a message that is not a valid call. Without any caller id (no ce-id,
// no Nats-Msg-Id) nobody can be answered, so it is set aside as a dead letter.
func (ex *Executor) refuse(j *job, nm events.Message, err error) {
	failure := tools.AsError(err, tools.CodeInvalidEvent)
	j.untrustedTrace()
	if j.ce.ID == "" {
		ex.setAside(j, nm, failure)
		return
	}
	ex.fail(j, failure)
}

// giveUp answers a call delivered MaxDeliver times without completing (its executors
// crashed or lost their acks each time) with an error instead of running it again, and
// keeps a copy as a dead letter for inspection.
func (ex *Executor) giveUp(j *job, nm events.Message) {
	failure := tools.Errorf(tools.CodeInternal,
		"call %s was delivered %d times without completing (executor crashes or ack timeouts); it is not run again",
		j.res.CallID, j.deliveries)
	if err := ex.storeDeadLetter(j, nm, failure); err != nil {
		ex.o.log.Warn().Err(err).Str("call_id", j.res.CallID).Msg("dead-letter copy not stored; answering the caller anyway")
	}
	ex.fail(j, failure)
}
