package planner

import (
	"encoding/json"

	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Large arguments go by reference (runstore's args.go says how they are stored): the
// call event carries the reference as arguments_ref (the executor reads and validates
// them), and the tool_called event names it instead of copying the arguments.

// maxModelArguments bounds the arguments of a model's call the planner validates: those
// over the claim-check size go by reference, up to the payload limit, which the executor
// checks against its own configuration again.
var maxModelArguments = int(events.DefaultConfig().PayloadMaxBytes)

// hydrateModelCall validates a model's call of name with args, up to maxModelArguments.
func (v *catalogView) hydrateModelCall(name string, args json.RawMessage) (*tools.Call, error) {
	v.mu.RLock()
	reg := v.reg
	v.mu.RUnlock()
	return reg.HydrateUpTo(name, args, maxModelArguments)
}

// callData is the call event's data for call c of a run with metadata: its arguments,
// or their reference.
func callData(c *CallRecord, metadata map[string]string) events.Call {
	if c.ArgumentsRef != nil {
		return events.Call{Tool: c.Name, ArgumentsRef: c.ArgumentsRef, Metadata: metadata}
	}
	return events.Call{Tool: c.Name, Arguments: c.Arguments, Metadata: metadata}
}

// calledDetail is the detail of the tool_called event of c: its arguments, or their
// reference.
func calledDetail(c *CallRecord) map[string]any {
	if c.ArgumentsRef != nil {
		return map[string]any{"tool": c.Name, "arguments_ref": c.ArgumentsRef}
	}
	return map[string]any{"tool": c.Name, "arguments": c.Arguments}
}

// withArgumentsRef gives copy cc the reference of made, the call as its step recorded it.
func withArgumentsRef(cc, made *CallRecord) {
	if cc.ArgumentsRef == nil {
		cc.ArgumentsRef = made.ArgumentsRef
	}
}
