package executor

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// job is one call being handled: its message, decoded event and the result so far.
type job struct {
	msg   jetstream.Msg
	ce    events.CallEvent
	def   tools.Definition
	start time.Time
	res   events.Result
	// msg is nil for calls answered without a delivery (the janitor, an approval
	// expiring); afterStore, if set, runs once the result is stored, before the ack.
	afterStore func()
}

// handleCall takes one delivered call through decode → hydrate → approval gate → run
// → result. Whatever happens, the caller gets a result or the message a dead letter;
// nothing is acked before its answer is stored.
func (ex *Executor) handleCall(w *worker, msg jetstream.Msg) {
	j := &job{msg: msg, def: w.def, start: time.Now()}
	nm := &nats.Msg{Subject: msg.Subject(), Header: msg.Headers(), Data: msg.Data()}
	ce, err := events.DecodeCall(nm, int(ex.cfg.MaxMsgSize))
	j.ce = ce
	j.res = events.Result{Tool: w.def.Name, CallID: ce.ID, RunID: ce.RunIDOrSelf(), Executor: ex.o.id,
		Validated: w.def.Validated()}
	if err != nil {
		ex.refuse(j, nm, err)
		return
	}
	meta, err := msg.Metadata()
	if err != nil {
		ex.o.log.Error().Err(err).Msg("message without JetStream metadata")
		_ = msg.Nak()
		return
	}
	if meta.NumDelivered > 1 {
		ex.m.redelivery(w.def.Name)
	}
	if meta.NumDelivered >= uint64(ex.cfg.MaxDeliver) {
		ex.deadLetter(j, nm, meta.NumDelivered, tools.Errorf(tools.CodeInternal,
			"call %s was delivered %d times without completing (executor crashes or ack timeouts); it is dead-lettered and not run again",
			ce.ID, meta.NumDelivered))
		return
	}
	if !ce.Deadline.IsZero() && time.Now().After(ce.Deadline) {
		ex.fail(j, tools.Errorf(tools.CodeTimeout, "the call's deadline %s passed before it started", ce.Deadline.Format(time.RFC3339)))
		return
	}
	call, err := ex.reg.Hydrate(w.def.Name, ce.Call.Arguments)
	if err != nil {
		ex.fail(j, tools.AsError(err, tools.CodeInvalidInput))
		return
	}
	if w.def.NeedsApproval() {
		ex.park(j)
		return
	}
	ex.runAndAnswer(j, call)
}

// runAndAnswer runs a hydrated call with its retries and publishes the result, or hands
// the call back when the executor is shutting down.
func (ex *Executor) runAndAnswer(j *job, call *tools.Call) {
	stop := ex.keepAlive(j.msg)
	defer stop()
	if !j.def.IsIdempotent() {
		first, err := ex.markStarted(j)
		if err != nil {
			ex.o.log.Warn().Err(err).Str("call_id", j.ce.ID).Msg("record start of non-idempotent call; handing it back")
			_ = j.msg.NakWithDelay(time.Second)
			return
		}
		if !first {
			ex.fail(j, tools.Errorf(tools.CodeInterrupted,
				"tool %q is not idempotent and call %s had already started (an executor stopped or crashed while running it); it is not run again",
				j.def.Name, j.ce.ID))
			return
		}
	}
	out, attempts := ex.runWithRetries(j, call)
	if out.Err != nil && out.Err.Code == tools.CodeCanceled && ex.shuttingDown() {
		// Cancelled by our own shutdown: hand it back for another replica.
		_ = j.msg.Nak()
		return
	}
	j.res.Attempts = attempts
	j.res.Output = out.Output
	ex.answer(j, out.Err)
}

// runWithRetries runs the call, retrying retryable failures with backoff and jitter per
// the tool's policy. Non-idempotent tools are never retried.
func (ex *Executor) runWithRetries(j *job, call *tools.Call) (tools.Outcome, int) {
	policy := j.def.EffectiveRetry()
	retries := policy.Retries()
	if !j.def.IsIdempotent() {
		retries = 0
	}
	ex.m.started(j.def.Name)
	defer ex.m.stopped(j.def.Name)
	j.res.StartedAt = time.Now().UTC()
	for attempt := 1; ; attempt++ {
		if attempt > 1 {
			// A fresh instance per attempt: a typed tool may have changed its fields.
			c, err := ex.reg.Hydrate(j.def.Name, call.Arguments())
			if err != nil {
				return tools.Outcome{Err: tools.AsError(err, tools.CodeInvalidInput)}, attempt - 1
			}
			call = c
		}
		out := ex.runOnce(j, call, attempt)
		if out.Err == nil || attempt > retries || !policy.ShouldRetry(out.Err.Code) || ex.shuttingDown() {
			return out, attempt
		}
		delay := policy.BackoffJittered(attempt, rand.Float64())
		if !j.ce.Deadline.IsZero() && time.Now().Add(delay).After(j.ce.Deadline) {
			return out, attempt // no time left for another attempt
		}
		ex.m.retry(j.def.Name)
		ex.o.log.Debug().Str("tool", j.def.Name).Str("call_id", j.ce.ID).Int("attempt", attempt).
			Str("code", string(out.Err.Code)).Dur("backoff", delay).Msg("retrying")
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ex.runCtx.Done():
			t.Stop()
			return tools.Outcome{Err: tools.Errorf(tools.CodeCanceled, "executor stopping")}, attempt
		}
	}
}

func (ex *Executor) runOnce(j *job, call *tools.Call, attempt int) tools.Outcome {
	ctx := tools.WithCallInfo(ex.runCtx, tools.CallInfo{CallID: j.ce.ID, RunID: j.res.RunID, Tool: j.def.Name,
		Attempt: attempt, Deadline: j.ce.Deadline, Metadata: j.ce.Call.Metadata})
	var cancel context.CancelFunc
	if j.def.Timeout == 0 {
		ctx, cancel = context.WithTimeout(ctx, ex.o.defaultTimeout)
		defer cancel()
	}
	if !j.ce.Deadline.IsZero() {
		ctx, cancel = context.WithDeadline(ctx, j.ce.Deadline)
		defer cancel()
	}
	return call.Run(ctx)
}

// fail answers the call with failure, without running it.
func (ex *Executor) fail(j *job, failure *tools.Error) {
	j.res.Output = failure.ForModel()
	ex.answer(j, failure)
}

// answer completes the result and publishes it; the call is acked once JetStream has
// stored the result.
func (ex *Executor) answer(j *job, failure *tools.Error) {
	j.res.Status = events.StatusOf(failure)
	j.res.Error = failure
	now := time.Now()
	j.res.FinishedAt = now.UTC()
	j.res.DurationMS = now.Sub(j.start).Milliseconds()
	ex.m.finished(j.def.Name, j.res.Status, now.Sub(j.start))
	log := ex.o.log.Debug()
	if failure != nil {
		log = ex.o.log.Info().Str("code", string(failure.Code)).Str("error", failure.Message)
	}
	log.Str("tool", j.def.Name).Str("call_id", j.res.CallID).Str("run_id", j.res.RunID).
		Int("attempt", j.res.Attempts).Int64("duration_ms", j.res.DurationMS).Bool("validated", j.res.Validated).
		Str("status", string(j.res.Status)).Msg("call answered")
	ex.publishThenAck(j)
}

// publishThenAck publishes the result asynchronously and acks the call when the
// result's PubAck arrives — never before, so a crash in between means a redelivery, not
// a lost call. The result's Nats-Msg-Id is the call id, so a result published twice is
// stored once. If the result cannot be stored, the call is handed back for later.
func (ex *Executor) publishThenAck(j *job) {
	msg, r := j.msg, j.res
	rm, err := events.NewResult(ex.source, r, r.Attempts)
	if err != nil { // cannot happen for a decoded call; never lose the message silently
		ex.o.log.Error().Err(err).Str("call_id", r.CallID).Msg("encode result; terminating the call")
		if msg != nil {
			_ = msg.TermWithReason("result cannot be encoded: " + err.Error())
		}
		return
	}
	if err := ex.publish(rm); err != nil {
		ex.o.log.Warn().Err(err).Str("call_id", r.CallID).Msg("result not stored; handing the call back")
		if msg != nil {
			_ = msg.NakWithDelay(time.Second)
		}
		return
	}
	if j.afterStore != nil {
		j.afterStore()
	}
	if msg != nil {
		_ = msg.Ack()
	}
}

// publish stores m in JetStream, waiting for its PubAck; a failed publish is tried
// again (same Nats-Msg-Id, so never doubled) a few times.
func (ex *Executor) publish(m *nats.Msg) error {
	var last error
	for try := range 3 {
		f, err := ex.js.PublishMsgAsync(m)
		if err == nil {
			select {
			case <-f.Ok():
				return nil
			case err = <-f.Err():
			}
		}
		last = err
		if errors.Is(err, nats.ErrConnectionClosed) {
			break
		}
		time.Sleep(time.Duration(try+1) * 200 * time.Millisecond)
	}
	return fmt.Errorf("publish %s: %w", m.Subject, last)
}

// refuse answers a message that is not a valid call. Without a usable call id nobody can
// be answered, so it is dead-lettered and terminated.
func (ex *Executor) refuse(j *job, nm *nats.Msg, err error) {
	failure := tools.AsError(err, tools.CodeInvalidEvent)
	if j.ce.ID == "" {
		ex.deadLetter(j, nm, 0, failure)
		return
	}
	ex.fail(j, failure)
}
