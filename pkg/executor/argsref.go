package executor

import (
	"context"
	"encoding/json"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Arguments by reference: a call whose arguments were stored as a payload carries
// arguments_ref instead of arguments (see jsutil.Payloads). Before a call is hydrated,
// resolveArguments reads them, under these rules:
//   - the payload must be the call's tenant's (the tenant of its subject): a call may not
//     make an executor read another tenant's payload (forbidden);
//   - it is read up to PayloadMaxBytes; a payload over it, gone or not matching its
//     reference is refused invalid, never retried (the same call cannot do better);
//   - a read that failed for a passing reason (a timeout, a lost connection) hands the
//     call back, to be delivered again like any call whose handling was cut short.
//
// The arguments read are then validated exactly like inline ones, bounded by
// PayloadMaxBytes instead of the registry's limit for arguments carried in a message.

// resolveArguments reads the arguments of j's call when they came by reference. It
// reports false when it answered the call, or handed it back, instead.
func (ex *Executor) resolveArguments(ctx context.Context, j *job) bool {
	ref := j.ce.Call.ArgumentsRef
	if ref == nil || j.ce.Call.Arguments != nil {
		return true
	}
	args, failure, passing := ex.readArguments(ctx, j.def.Name, j.ce.Caller.Tenant, ref)
	switch {
	case passing != nil:
		ex.o.log.Warn().Err(passing).Str("call_id", j.res.CallID).Str("payload", ref.ID).
			Msg("arguments by reference not read; handing the call back")
		ex.handBack(j)
		return false
	case failure != nil:
		ex.fail(j, failure)
		return false
	}
	j.ce.Call.Arguments = args
	return true
}

// readArguments reads the arguments of a call of tool by tenant stored at ref. A failure
// is the call's answer; passing is an error that may not recur (try the call again).
func (ex *Executor) readArguments(ctx context.Context, tool, tenant string, ref *events.PayloadRef) (args json.RawMessage, failure *tools.Error, passing error) {
	if ref.Tenant != tenant {
		return nil, tools.Errorf(tools.CodeForbidden,
			"the arguments of this call of %q point at payload %s of another tenant; a call may use only its own tenant's payloads", tool, ref.ID), nil
	}
	if ref.Size > ex.cfg.PayloadMaxBytes {
		return nil, tools.Errorf(tools.CodeInputTooLarge, "the arguments of %q are %d bytes; arguments by reference are kept up to %d bytes (payloadMaxBytes)",
			tool, ref.Size, ex.cfg.PayloadMaxBytes), nil
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), payloadTimeout)
	defer cancel()
	data, err := ex.payloads.Get(rctx, ref, ex.cfg.PayloadMaxBytes)
	if err != nil {
		if jsutil.IsPayloadGone(err) {
			return nil, tools.Errorf(tools.CodeInvalidInput,
				"the arguments of this call of %q cannot be read: %v (the payload expired, was never stored, or does not match arguments_ref)", tool, err), nil
		}
		return nil, nil, err
	}
	return data, nil, nil
}

// hydrate validates and instantiates the arguments of j's call: those that came by
// reference are bounded by the payload limit rather than the registry's.
func (ex *Executor) hydrate(j *job, args json.RawMessage) (*tools.Call, error) {
	if j.ce.Call.ArgumentsRef != nil {
		return ex.reg.HydrateUpTo(j.def.Name, args, int(ex.cfg.PayloadMaxBytes))
	}
	return ex.reg.Hydrate(j.def.Name, args)
}
