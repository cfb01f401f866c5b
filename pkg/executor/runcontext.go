package executor

import (
	"context"
	"encoding/json"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Run context: a planner sends the run context (the conversation so far, the step, the
// run's metadata) with the calls of tools whose definition asks for it
// (tools.Definition.RunContext), inline or, when large, by reference (context_ref, a
// payload of the caller's tenant). It can be large and private, so the executor hands it
// on only to a tool that asked for it, whatever the call carries: in tools.CallInfo.Run,
// from which pkg/toolsfile gives it to command and HTTP tools.

// runContext returns the run context of j's call for its tool, nil when the tool did not
// ask for it or the call carries none. A context by reference is read once (the call
// keeps it for its later attempts); a failure is the attempt's error: a payload of
// another tenant is forbidden, one gone is permanent, a read that failed for a passing
// reason is retried like any failed attempt.
func (ex *Executor) runContext(ctx context.Context, j *job) (*tools.RunContext, *tools.Error) {
	if !j.def.RunContext {
		return nil, nil
	}
	call := &j.ce.Call
	if call.Context != nil || call.ContextRef == nil {
		return call.Context, nil
	}
	ref := call.ContextRef
	if ref.Tenant != j.ce.Caller.Tenant {
		return nil, tools.Errorf(tools.CodeForbidden,
			"the run context of this call of %q points at payload %s of another tenant; a call may use only its own tenant's payloads", j.def.Name, ref.ID)
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), payloadTimeout)
	defer cancel()
	data, err := ex.payloads.Get(rctx, ref, ex.cfg.PayloadMaxBytes)
	if err != nil {
		code := tools.CodeToolFailed
		if jsutil.IsPayloadGone(err) {
			code = tools.CodeToolFailedPermanent
		}
		return nil, tools.Wrap(code, err, "the run context of this call of "+j.def.Name+" cannot be read: "+err.Error())
	}
	var rc tools.RunContext
	if err := json.Unmarshal(data, &rc); err != nil {
		return nil, tools.Wrap(tools.CodeToolFailedPermanent, err, "the run context of this call of "+j.def.Name+" is not a run context: "+err.Error())
	}
	call.Context, call.ContextRef = &rc, nil
	return &rc, nil
}
