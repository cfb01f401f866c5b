package executor

import (
	"context"

	"go.opentelemetry.io/otel/attribute"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Policy hooks (see [WithPolicyHook] and [events.PolicyRequest]): a tool can have a
// service that the executor asks about each of its calls, whoever published it, after the
// call is validated and before it is parked for approval or run. Its decision is carried
// out here and recorded in the result ([events.Result].Policy): a deny is the call's one
// result (status denied, the hook's reason), a modification is validated again (invalid:
// the call is refused with the validator's messages) and runs, or waits for its
// approval, instead of the call's arguments.

// WithPolicyHook makes the executor ask the hook h before each call of tool runs (or is
// parked for approval): allow, deny or modify the arguments, within h's timeout (default
// 2s, at most 10s); no usable answer counts as h.OnError, "deny" (the default) or "allow".
// A tools file declares it per tool (policyHook). The tool must be one the executor
// serves ([New] says so otherwise).
func WithPolicyHook(tool string, h events.Hook) Option {
	return func(o *options) error {
		if !tools.NamePattern.MatchString(tool) {
			return invalid("policy hook of %q: not a tool name", tool)
		}
		if err := events.CheckPolicyHook("policyHook", h); err != nil {
			return invalid("policy hook of %s: %v", tool, err)
		}
		if o.policy == nil {
			o.policy = map[string]events.Hook{}
		}
		o.policy[tool] = h
		return nil
	}
}

// askPolicy asks the tool's policy hook, if it has one, about the hydrated call of j
// and carries out its decision: it returns the call to go on with (call itself, or the
// call with the hook's arguments), or nil when j was answered (denied, or refused for
// arguments the hook made invalid). The decision is recorded in j's result.
func (ex *Executor) askPolicy(ctx context.Context, j *job, call *tools.Call) *tools.Call {
	h, ok := ex.o.policy[j.def.Name]
	if !ok {
		return call
	}
	stop := ex.keepAlive(j.msg) // the hook may take longer than the ack wait's margin
	defer stop()
	req := events.PolicyRequest{Level: events.PolicyLevelTool, Tool: j.def.Name, CallID: j.res.CallID, RunID: j.res.RunID,
		Arguments: call.Arguments(), Validated: j.def.Validated(), Metadata: j.ce.Call.Metadata, Caller: j.ce.Caller}
	if ref := j.ce.Call.ArgumentsRef; ref != nil { // the hook reads them by reference too
		req.Arguments, req.ArgumentsRef = nil, ref
	}
	rec := jsutil.AskPolicy(ctx, ex.nc, h, events.TraceHeader(j.trace.parent, j.trace.state), req)
	j.res.Policy = &rec
	log := ex.o.log.With().Str("tool", j.def.Name).Str("call_id", j.res.CallID).Str("run_id", j.res.RunID).
		Str("hook", rec.Hook).Str("decision", string(rec.Decision)).Logger()
	by := "hook"
	if rec.Error != "" {
		by = "onError"
		log.Warn().Str("error", rec.Error).Msg("policy hook gave no usable answer; its onError applies")
	}
	j.traceEvent("toolfleet.policy", attribute.String("toolfleet.policy.hook", rec.Hook),
		attribute.String("toolfleet.policy.decision", string(rec.Decision)), attribute.Bool("toolfleet.policy.on_error", rec.Error != ""))
	switch rec.Decision {
	case events.PolicyDeny:
		ex.m.policyDecision(j.def.Name, string(rec.Decision), by)
		log.Info().Str("reason", rec.Reason).Msg("policy hook denied the call")
		ex.fail(j, rec.Denial(j.def.Name))
		return nil
	case events.PolicyModify:
		j.ce.Call.Arguments, j.ce.Call.ArgumentsRef = rec.ArgumentsModified, nil
		modified, err := ex.hydrate(j, j.ce.Call.Arguments)
		if err != nil {
			ex.m.policyDecision(j.def.Name, "invalid", by)
			failure := rec.InvalidModification(j.def.Name, err)
			log.Info().Str("error", failure.Message).Msg("policy hook modified the call's arguments into invalid ones; the call is refused")
			ex.fail(j, failure)
			return nil
		}
		log.Info().Str("reason", rec.Reason).Msg("policy hook modified the call's arguments")
		call = modified
	default:
		log.Debug().Msg("policy hook allowed the call")
	}
	ex.m.policyDecision(j.def.Name, string(rec.Decision), by)
	return call
}

// applyParkedPolicy gives a call resumed from its approval park the policy decision
// taken before it was parked: the record, and the hook's arguments when it modified
// them (they are what the approver was asked about).
func applyParkedPolicy(j *job, rec *events.PolicyRecord) {
	if rec == nil {
		return
	}
	j.res.Policy = rec
	if rec.Decision == events.PolicyModify {
		j.ce.Call.Arguments, j.ce.Call.ArgumentsRef = rec.ArgumentsModified, nil
	}
}
