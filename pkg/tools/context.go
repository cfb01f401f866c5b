package tools

import (
	"context"
	"encoding/json"
	"time"
)

// CallInfo describes the call a tool is running for. The executor puts it in the context
// a tool receives; read it with [CallInfoFrom].
type CallInfo struct {
	CallID  string
	RunID   string
	Tool    string
	Attempt int // 1 for the first attempt
	// Deadline is when the call as a whole must be answered (zero: none). The attempt's own
	// deadline is the context's.
	Deadline time.Time
	// Metadata is caller-supplied metadata (notes, a user name): anything the caller put
	// there, unchecked. For who the caller is, use Tenant and Role.
	Metadata map[string]string
	// Tenant and Role are the caller's identity as the fleet established it (the call's
	// subject, guarded by NATS permissions); both empty for an anonymous caller.
	Tenant, Role string
	// Run is what the tool learns of the run that called it: set only for a tool whose
	// definition asks for it ([Definition.RunContext]) and a call made by a planner run;
	// nil for every other tool and call.
	Run *RunContext
}

// RunContext is the run context a tool asks for with [Definition.RunContext]: the
// conversation of the run that called it, as it stood when the model made the call, the
// step, and the run's metadata. The planner sends it with the call (by reference when
// it is large); the executor gives it only to tools that asked for it.
type RunContext struct {
	RunID string `json:"runId"`
	// Step is the step (0 for the first model answer) whose call this is.
	Step int `json:"step"`
	// Metadata is the run's metadata, as its caller started it.
	Metadata map[string]string `json:"metadata,omitempty"`
	// Messages is the conversation so far, a JSON array in the planner's message format
	// (role, text, toolCalls, toolResults), ending with the model's message that made
	// this call. It is bounded: Omitted counts the oldest messages left out.
	Messages json.RawMessage `json:"messages"`
	Omitted  int             `json:"omitted,omitempty"`
}

type callInfoKey struct{}

// WithCallInfo returns a context carrying info.
func WithCallInfo(ctx context.Context, info CallInfo) context.Context {
	return context.WithValue(ctx, callInfoKey{}, info)
}

// CallInfoFrom returns the CallInfo in ctx, if any.
func CallInfoFrom(ctx context.Context) (CallInfo, bool) {
	info, ok := ctx.Value(callInfoKey{}).(CallInfo)
	return info, ok
}
