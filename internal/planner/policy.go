package planner

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// PolicyHook is a run's policy hook: a NATS service (any language can answer it, like a
// stop hook) that the planner asks about each call of the run, and of its nested runs,
// before the call goes to the fleet: after the call is hydrated and the run's own
// refusals (unknown tool, not allowed, invalid arguments), before approvals and before
// the call is published. It is asked with an [events.PolicyRequest] (level "run") and
// answers an [events.PolicyAnswer] within Timeout (default 2s, at most 10s):
//
//   - allow: the call goes out as it is;
//   - deny: the call is answered by the planner, status denied, with the hook's reason
//     (the model sees it), and never published;
//   - modify: the new arguments are validated against the tool's schema again; invalid
//     ones refuse the call (status invalid, the validator's messages), valid ones go out
//     instead, and the call's record keeps the model's (ArgumentsOriginal) beside them.
//
// Every decision is recorded on the call (CallRecord.Policy). No answer in time, or an
// unusable one, counts as OnError: "deny" (the default: a policy fails closed) or
// "allow". A denied or refused call counts as a failed call, like a call refused
// because the run does not allow it. The calls of a step are asked about in parallel,
// and their decisions are stored with the step's record: a step taken again after a
// crash does not ask again. run_agent calls are not asked about: the nested run's calls
// are, with the same hook. A composite call is asked about, and so is each of its
// sub-calls, under the sub-call's own id, tool and arguments (composite.go): a deny of a
// sub-call refuses the composite call, and a modification replaces that sub-call's
// arguments within the composite's.
type PolicyHook = events.Hook

// validatePolicy checks a run request's policy hook.
func validatePolicy(h *PolicyHook) error {
	if h == nil {
		return nil
	}
	return events.CheckPolicyHook("policyHook", *h)
}

// askPolicy asks the run's policy hook about each call of r's current step that is to
// go to the fleet, and each sub-call of a composite call among them, in parallel, and
// applies the decisions to the calls (r is the copy of the state the step's record is
// made of). A decision that replaces the arguments of a composite call (or of a
// composite sub-call) is followed by a round about the sub-calls of the new arguments,
// each round a level deeper (composite.go).
func (p *Planner) askPolicy(ctx context.Context, r *Run) {
	h := r.PolicyHook
	if h == nil {
		return
	}
	var items []policyItem
	for _, c := range r.StepCalls() {
		if !c.Local && !c.Done() && c.Name != AgentToolName {
			items = append(items, policyItem{call: c})
			items = append(items, subItems(c, c.ID)...)
		}
	}
	if len(items) == 0 {
		return
	}
	hctx, cancel := r.Within(ctx, h.Wait())
	defer cancel()
	header := events.TraceHeader(r.TraceParent, r.TraceState)
	for len(items) > 0 {
		recs := make([]events.PolicyRecord, len(items))
		var wg sync.WaitGroup
		for i, it := range items {
			req, err := it.policyRequest(r)
			if err != nil { // its composite's arguments cannot be read: the hook cannot be asked
				recs[i] = events.PolicyRecord{Level: events.PolicyLevelRun, Hook: h.Subject, Decision: events.PolicyDeny,
					Error: err.Error(), At: p.cfg.Now().UTC()}
				continue
			}
			wg.Go(func() { recs[i] = jsutil.AskPolicy(hctx, p.nc, *h, header, req) })
		}
		wg.Wait()
		now := p.cfg.Now()
		var next []policyItem
		for i, it := range items {
			switch {
			case it.sub == nil:
				next = append(next, p.applyPolicy(r, it.call, recs[i], now)...)
			case slices.Contains(it.call.Subs, it.sub): // else replaced by a modification meanwhile
				next = append(next, p.applySubPolicy(r, it, recs[i], now)...)
			}
		}
		items = next
	}
}

// applyPolicy carries out the decision rec on the call c of r. It returns the items to
// ask about next: the sub-calls of a composite call whose arguments were replaced.
func (p *Planner) applyPolicy(r *Run, c *CallRecord, rec events.PolicyRecord, now time.Time) []policyItem {
	log := p.log.With().Str("run_id", r.ID).Str("call_id", c.ID).Str("tool", c.Name).Str("hook", rec.Hook).
		Str("decision", string(rec.Decision)).Logger()
	by := "hook"
	if rec.Error != "" {
		by = "onError"
		log.Warn().Str("error", rec.Error).Msg("policy hook gave no usable answer; its onError applies")
	}
	c.Policy = append(c.Policy, rec)
	var next []policyItem
	switch rec.Decision {
	case events.PolicyDeny:
		c.AnswerLocal(string(events.StatusDenied), rec.Denial(c.Name), now)
		r.Errors++
		log.Info().Str("reason", rec.Reason).Msg("policy hook denied the call")
	case events.PolicyModify:
		call, err := p.cat.hydrate(c.Name, rec.ArgumentsModified)
		if err != nil {
			te := rec.InvalidModification(c.Name, err)
			c.AnswerLocal(string(events.StatusOf(te)), te, now)
			r.Errors++
			p.m.policyDecision("invalid", by)
			log.Info().Str("error", te.Message).Msg("policy hook modified the call's arguments into invalid ones; the call is refused")
			return nil
		}
		c.ArgumentsOriginal, c.Arguments = c.Arguments, call.Arguments()
		log.Info().Str("reason", rec.Reason).Msg("policy hook modified the call's arguments")
		if d := call.Definition(); d.Composite != nil {
			next = p.recheckSubs(r, c, c.ID, nil, d, c.Arguments, rec, now)
		}
	default:
		log.Debug().Msg("policy hook allowed the call")
	}
	p.m.policyDecision(string(rec.Decision), by)
	return next
}

// addToolPolicy records the decision of the tool's policy hook, carried by the call's
// result, on c: a modification replaces the arguments, which ran, keeping the model's.
func addToolPolicy(c *CallRecord, rec *events.PolicyRecord) {
	if rec == nil {
		return
	}
	c.Policy = append(c.Policy, *rec)
	if rec.Decision != events.PolicyModify || rec.ArgumentsOriginal == nil {
		return // arguments asked with by reference: the record points at them
	}
	if c.ArgumentsOriginal == nil {
		c.ArgumentsOriginal = rec.ArgumentsOriginal
	}
	c.Arguments = rec.ArgumentsModified
}

// policyArguments returns the arguments the last policy hook that modified them gave,
// or nil when none did: what the call went out with, before any approval.
func policyArguments(c *CallRecord) []byte {
	for _, rec := range slices.Backward(c.Policy) {
		if rec.Decision == events.PolicyModify && rec.ArgumentsModified != nil {
			return rec.ArgumentsModified
		}
	}
	return nil
}

// undoApprovalArguments takes back the arguments an approval set: the call's are again
// what it went out with (the policy's, or the model's).
func undoApprovalArguments(c *CallRecord) {
	if c.ArgumentsOriginal == nil {
		return
	}
	if pa := policyArguments(c); pa != nil {
		c.Arguments = pa
		return
	}
	c.Arguments, c.ArgumentsOriginal = c.ArgumentsOriginal, nil
}
