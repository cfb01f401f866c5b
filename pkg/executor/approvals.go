package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/internal/tick"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Approvals park calls instead of holding them: a call of a tool that needs approval is
// stored in the toolfleet-approvals bucket (key <tool>.<call token>, and .<tenant> for a
// call of a tenant), an approval request event is published, and the call message is
// acked — so no slot and no message is held while a human thinks, and an executor
// restart loses nothing. The answer arrives on
// toolfleet.event.approval.answered.<tool>.<call>[.<tenant>.<role>], through a durable
// consumer shared by the replicas serving the tool, so any of them resumes the call. The
// tenant of the answer's subject is part of the key it looks up, so an answer on another
// tenant's subject finds nothing to answer; its tenant and role must be allowed to act
// on the call by events.MayAct — the call's owner's role, or an operator role
// (WithOperatorRoles) that may call the tool itself (an approval never lets a caller run
// a tool it may not call itself). A refused answer leaves the call waiting and is
// recorded (refuseAct). The result's approval names the answerer of the subject
// (tenant/role), never the by the answer wrote (kept as ClaimedBy). Each replica sweeps
// the bucket and denies calls whose approval expired.

const (
	statePending = "pending"
	stateRunning = "running"
)

// parked is a call waiting for its approval, as stored in the approvals bucket.
type parked struct {
	Subject   string      `json:"subject"`
	Headers   nats.Header `json:"headers"`
	Data      []byte      `json:"data"`
	ParkedAt  time.Time   `json:"parked_at"`
	ExpiresAt time.Time   `json:"expires_at"`
	State     string      `json:"state"`
	// AnswerSeq is the stream sequence of the answer being carried out, so a second
	// answer to the same call is ignored while a redelivery of the first proceeds.
	AnswerSeq uint64 `json:"answer_seq,omitempty"`
	// Policy is the decision of the tool's policy hook, taken before the call was
	// parked: its arguments, when it modified them, are the ones to approve and run.
	Policy *events.PolicyRecord `json:"policy,omitempty"`
}

// call returns the parked call message.
func (p parked) call() events.Message {
	return events.CoreMsg(&nats.Msg{Subject: p.Subject, Header: p.Headers, Data: p.Data})
}

// forgetParked returns the removal of the parked call at key (at revision rev), for
// once its answer is stored. A removal that fails is logged and leaves the entry.
func (ex *Executor) forgetParked(ctx context.Context, key string, rev uint64) func() {
	return func() {
		if err := ex.approvals.Delete(context.WithoutCancel(ctx), key, jetstream.LastRevision(rev)); err != nil {
			ex.o.log.Debug().Err(err).Str("key", key).Msg("remove answered approval")
		}
	}
}

// approvalKey is the bucket key of a parked call: <tool>.<call token>, followed by
// .<tenant> for a call of a tenant.
func approvalKey(tool, callToken, tenant string) string {
	if tenant == "" {
		return tool + "." + callToken
	}
	return tool + "." + callToken + "." + tenant
}

// park stores the call, announces the approval request and acks the call.
func (ex *Executor) park(ctx context.Context, j *job) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	now := time.Now().UTC()
	exp := now.Add(ex.o.approvalTimeout)
	if !j.ce.Deadline.IsZero() && j.ce.Deadline.Before(exp) {
		exp = j.ce.Deadline
	}
	p := parked{Subject: j.msg.Subject(), Headers: j.msg.Headers(), Data: j.msg.Data(), ParkedAt: now,
		ExpiresAt: exp, State: statePending, Policy: j.res.Policy}
	v, err := json.Marshal(p)
	key := approvalKey(j.def.Name, events.IDToken(j.ce.ID), j.ce.Caller.Tenant)
	if err == nil { // else handed back below
		_, err = ex.approvals.Create(ctx, key, v)
	}
	// A replicated bucket still storing the call's other delivery's record answers
	// "exists" before it is: wait until it is, or until that write failed and this one
	// can be stored.
	b := tick.Backoff{First: time.Millisecond, Max: 100 * time.Millisecond}
	for jsutil.IsWriteInProgress(err) && b.Sleep(ctx) {
		_, err = ex.approvals.Create(ctx, key, v)
	}
	if err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		ex.o.log.Warn().Err(err).Str("call_id", j.res.CallID).Msg("park call for approval; handing it back")
		ex.handBack(j)
		return
	} else if err == nil {
		ex.m.parkedCall(j.def.Name)
	}
	// Published again on a redelivery (deduplicated by the call id): the request must
	// exist once the call is acked.
	reason := ex.waits[j.def.Name]
	req := events.ApprovalRequest{Tool: j.def.Name, CallID: j.res.CallID, RunID: j.res.RunID, Arguments: j.ce.Call.Arguments,
		Metadata: j.ce.Call.Metadata, Reason: reason, Validated: j.def.Validated(), ExpiresAt: exp, Caller: j.ce.Caller}
	if ref := j.ce.Call.ArgumentsRef; ref != nil { // the approver reads them by reference too
		req.Arguments, req.ArgumentsRef = nil, ref
	}
	m, err := events.NewApprovalRequest(ex.source, req, "")
	if err == nil {
		j.carryTrace(m)
		err = ex.publish(m)
	}
	if err != nil {
		ex.o.log.Warn().Err(err).Str("call_id", j.res.CallID).Msg("publish approval request; handing the call back")
		ex.handBack(j)
		return
	}
	ex.o.log.Info().Str("tool", j.def.Name).Str("call_id", j.res.CallID).Str("run_id", j.res.RunID).
		Time("expires_at", exp).Msg("call waits for approval")
	j.endSpan(nil)
	_ = j.msg.Ack()
	if h := j.watch.heard(); h != nil { // heard while it was being parked
		def, key := *j.def, keyOfJob(j)
		ex.goTracked(func() { ex.cancelParked(def, key, h.sender, h.cancel) })
	}
}

// handleAnswer carries out an approval answer: deny, approve, or approve with new
// arguments (validated again). Only an answerer that may act on the call carries it
// out (events.MayAct: the call's owner's role or an operator role of its tenant, that
// may call the tool itself); any other answer is refused before it touches the parked
// call, which keeps waiting for an answer it may carry out (or its expiry).
func (ex *Executor) handleAnswer(runCtx context.Context, w *worker, msg jetstream.Msg) {
	tool, callID, answerer, ok := events.ParseApprovalAnswerSubject(msg.Subject())
	if !ok || tool != w.def.Name { // the consumer's filter makes this impossible; never act on a guess
		_ = msg.TermWithReason("not an approval answer subject of tool " + w.def.Name)
		return
	}
	ae, ans, err := events.DecodeApprovalAnswer(msg, int(ex.cfg.MaxMsgSize))
	if err != nil {
		// A malformed answer answers nothing; it stays in the events stream for the record
		// and the call keeps waiting for a valid answer or its expiry.
		ex.o.log.Warn().Err(err).Str("tool", tool).Str("call_id", callID).Msg("refused approval answer")
		_ = msg.TermWithReason(err.Error())
		return
	}
	meta, err := msg.Metadata()
	if err != nil {
		_ = msg.Nak()
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(runCtx), 10*time.Second)
	defer cancel()
	// The answerer's tenant is part of the key: an answer on another tenant's subject
	// finds nothing to answer.
	key := approvalKey(tool, callID, answerer.Tenant)
	entry, err := ex.approvals.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		_ = msg.Ack() // answered before, or expired: nothing left to do
		return
	}
	if err != nil {
		_ = msg.NakWithDelay(time.Second)
		return
	}
	var p parked
	if err := json.Unmarshal(entry.Value(), &p); err != nil {
		_ = msg.TermWithReason("parked call is unreadable: " + err.Error())
		return
	}
	ce, err := events.DecodeCall(p.call(), 0)
	if err != nil { // it decoded when it was parked
		_ = msg.TermWithReason("parked call does not decode: " + err.Error())
		return
	}
	// An approval lets the call run: the rule of who may act on a call, and the tool's
	// own roles (an approval never lets a caller run what it may not call itself).
	if why := events.MayAct(events.Act{Actor: answerer, Owner: ce.Caller, What: "answer the approvals of", Kind: "call", ID: ce.ID},
		ex.o.operatorRoles, &w.def); why != nil {
		ex.refuseAct(&w.def, ce, events.ActApprovalAnswer, answerer, why)
		_ = msg.TermWithReason(why.Message)
		return
	}
	if p.State == stateRunning && p.AnswerSeq != meta.Sequence.Stream {
		// Another answer is being carried out: the first answer wins. Once its result is
		// stored the entry is gone, and a later answer finds no entry (acked above).
		_ = msg.Ack()
		return
	}
	p.State, p.AnswerSeq = stateRunning, meta.Sequence.Stream
	v, err := json.Marshal(p)
	if err != nil {
		_ = msg.TermWithReason("parked call cannot be stored: " + err.Error())
		return
	}
	rev, err := ex.approvals.Update(ctx, key, v, entry.Revision())
	if err != nil {
		_ = msg.Ack() // lost the race to an expiry or to another answer
		return
	}

	j := ex.newJob(msg, &w.def, ce, p.ParkedAt)
	applyParkedPolicy(j, p.Policy)
	j.afterStore = ex.forgetParked(ctx, key, rev)
	if ex.answered(runCtx, j) { // answered before (an earlier answer's result, stored before its entry was removed)
		j.afterStore()
		_ = msg.Ack()
		return
	}
	// Canceled while it waited: answered canceled, whatever the answer. Its cancel may
	// have been published while no replica listened, so the stream is always looked up.
	if ex.canceledBefore(runCtx, j, true) {
		return
	}
	defer j.watch.release()
	j.res.Approval = approvalRecord(ae, ans, answerer, j.ce.Call) // the policy hook's arguments, if it modified them
	runCtx = ex.startSpan(runCtx, j)
	by := answerer.Describe()
	ex.o.log.Info().Str("tool", tool).Str("call_id", j.res.CallID).Str("decision", string(ans.Decision)).Str("by", by).
		Bool("modified", len(ans.Arguments) > 0).Msg("approval answered")
	if ans.Decision == events.DecisionDeny {
		msgText := fmt.Sprintf("call of %q was denied by %s", tool, by)
		if ans.Reason != "" {
			msgText += ": " + ans.Reason
		}
		ex.fail(j, &tools.Error{Code: tools.CodeDenied, Message: msgText})
		return
	}
	if len(ans.Arguments) > 0 {
		j.ce.Call.Arguments, j.ce.Call.ArgumentsRef = ans.Arguments, nil
	} else if !ex.resolveArguments(runCtx, j) { // the call's own, perhaps by reference
		return
	}
	hc, err := ex.hydrate(j, j.ce.Call.Arguments)
	if err != nil {
		ex.fail(j, tools.AsError(err, tools.CodeInvalidInput))
		return
	}
	ex.runAndAnswer(runCtx, j, hc)
}

// needsApproval reports whether the calls of tool wait for an approval: it is not safe,
// takes unvalidated arguments under human-approval, or declares itself read-only where
// its runner cannot confine it (tools.Registry.ApprovalReason).
func (ex *Executor) needsApproval(tool string) bool { return ex.waits[tool] != "" }

// approvalRecord is the audit record of answerer's answer ans (event e) to call c,
// carried in the call's result: By is the answerer the subject names, ClaimedBy what the
// answer's by said; original arguments that went by reference are recorded by it.
func approvalRecord(e events.Event, ans events.ApprovalAnswer, answerer events.Identity, c events.Call) *events.Approval {
	a := &events.Approval{Decision: ans.Decision, By: answerer.Describe(), ClaimedBy: ans.By, Reason: ans.Reason, At: e.Time.UTC()}
	if a.At.IsZero() {
		a.At = time.Now().UTC()
	}
	if ans.Decision == events.DecisionApprove && len(ans.Arguments) > 0 {
		a.ArgumentsOriginal, a.ArgumentsOriginalRef, a.ArgumentsApproved = c.Arguments, c.ArgumentsRef, ans.Arguments
	}
	return a
}

// sweepApprovals, every little while (sweepEvery), denies the parked calls of w's tool
// whose approval expired, and answers canceled those whose cancel is stored from a
// sender that may cancel them: a cancel heard is acted on at once (hear), but one whose
// core message this replica missed (published while its connection was down) would
// otherwise wait for an answer or the expiry. Replicas sweep concurrently; the result
// is deduplicated by call id and the bucket entry removed only at the revision that was
// read.
func (ex *Executor) sweepApprovals(ctx context.Context, w *worker) {
	// refused are, by approval key, the senders whose stored cancels of the parked call
	// this sweep refused (each recorded once); kept for the keys still parked.
	refused := map[string][]events.Identity{}
	tick.Every(ctx, ex.sweepEvery(), func(ctx context.Context) {
		keys, err := jsutil.ListKeys(ctx, ex.approvals, w.def.Name+".>")
		if err != nil {
			return
		}
		var waiting []waitingCall
		var shown waitingApprovals // for the metrics
		for _, key := range keys {
			if p, ok := ex.expireIfDue(ctx, w, key); ok {
				waiting = append(waiting, waitingCall{key: key, p: p})
				shown.saw(p)
			}
		}
		ex.m.approvalsSwept(w.def.Name, shown)
		for key := range refused {
			if !slices.Contains(keys, key) {
				delete(refused, key)
			}
		}
		ex.cancelMissed(ctx, &w.def, waiting, refused)
	})
}

// sweepEvery is how often the approvals are swept: a quarter of the approval timeout,
// between 100ms and 5s. It bounds how late a parked call's cancel whose message was
// missed is acted on.
func (ex *Executor) sweepEvery() time.Duration {
	return min(max(ex.o.approvalTimeout/4, 100*time.Millisecond), 5*time.Second)
}

// waitingCall is a parked call still waiting for its answer, as a sweep read it.
type waitingCall struct {
	key string
	p   parked
}

// expireIfDue denies the call parked under key when its approval expired; it returns
// the parked call when it still waits for an answer.
func (ex *Executor) expireIfDue(ctx context.Context, w *worker, key string) (parked, bool) {
	entry, err := ex.approvals.Get(ctx, key)
	if err != nil {
		return parked{}, false
	}
	var p parked
	if json.Unmarshal(entry.Value(), &p) != nil {
		return parked{}, false
	}
	if time.Now().Before(p.ExpiresAt) {
		return p, p.State == statePending
	}
	// An entry an expiry claimed before (answer sequence 0) is denied again: that denial's
	// result may not have been stored; a repeat is deduplicated by the call id.
	if p.State != statePending && (p.State != stateRunning || p.AnswerSeq != 0) {
		return parked{}, false
	}
	ce, err := events.DecodeCall(p.call(), 0)
	if err != nil { // it decoded when it was parked
		ex.o.log.Warn().Err(err).Str("key", key).Msg("approval sweep: a parked call does not decode; it cannot be denied")
		return parked{}, false
	}
	// Claimed like an answer, so that an answer arriving now finds the call taken
	// instead of running it beside the denial.
	first := p.State == statePending // not a denial repeated
	p.State = stateRunning
	v, err := json.Marshal(p)
	if err != nil { // it was just read from JSON
		ex.o.log.Warn().Err(err).Str("key", key).Msg("approval sweep: a parked call cannot be stored again")
		return parked{}, false
	}
	rev, err := ex.approvals.Update(ctx, key, v, entry.Revision())
	if err != nil {
		return parked{}, false // answered (or expired by another replica) meanwhile
	}
	if first {
		ex.m.approvalExpired(w.def.Name)
	}
	j := ex.newJob(nil, &w.def, ce, p.ParkedAt)
	applyParkedPolicy(j, p.Policy)
	j.afterStore = ex.forgetParked(ctx, key, rev)
	j.res.Approval = &events.Approval{Decision: events.DecisionExpired, At: p.ExpiresAt.UTC(),
		Reason: "no approval arrived before " + p.ExpiresAt.UTC().Format(time.RFC3339)}
	ex.fail(j, tools.Errorf(tools.CodeDenied, "call of %q was denied: no approval arrived before %s",
		w.def.Name, p.ExpiresAt.Format(time.RFC3339)))
	return parked{}, false
}

// cancelMissed looks up the stored cancels of the waiting calls of def, all in one
// coalesced look-up (cancel.go), and answers canceled each call a sender that may cancel
// it canceled (cancelParked). A tool no cancel can be stored for (never one stored at
// start nor heard since, and no reconnect: mayBeStored) is not looked up, so a fleet that
// never cancels pays nothing. A refused sender's cancel is recorded once per call
// (refused, by approval key).
func (ex *Executor) cancelMissed(ctx context.Context, def *tools.Definition, waiting []waitingCall, refused map[string][]events.Identity) {
	if ex.cancels == nil || len(waiting) == 0 || !ex.cancels.mayBeStored(def.Name) {
		return
	}
	calls := make([]events.CallEvent, 0, len(waiting))
	keys := make([]string, 0, len(waiting))
	filters := make([]string, 0, len(waiting))
	for _, wc := range waiting {
		ce, err := events.DecodeCall(wc.p.call(), 0)
		if err != nil {
			continue // it decoded when it was parked
		}
		filter, err := events.CallCancelsFilter(ce.Caller, def.Name, ce.ID)
		if err != nil {
			continue
		}
		calls, keys, filters = append(calls, ce), append(keys, wc.key), append(filters, filter)
	}
	lctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	for i, a := range ex.cancels.lookups.findEach(lctx, filters) {
		if a.err != nil {
			ex.o.log.Debug().Err(a.err).Str("call_id", calls[i].ID).Msg("look for a stored cancel of a parked call")
		}
		h := ex.cancelAmong(lctx, def, calls[i], a.found, func(sender events.Identity) bool {
			if slices.Contains(refused[keys[i]], sender) {
				return false
			}
			refused[keys[i]] = append(refused[keys[i]], sender)
			return true
		})
		if h != nil {
			ex.o.log.Info().Str("tool", def.Name).Str("call_id", calls[i].ID).Str("by", h.cancel.By).
				Msg("cancel of a parked call found in the stream (its message was missed here)")
			ex.cancelParked(*def, cancelKey{tool: def.Name, call: events.IDToken(calls[i].ID), tenant: calls[i].Caller.Tenant}, h.sender, h.cancel)
		}
	}
}
