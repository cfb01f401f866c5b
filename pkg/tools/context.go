package tools

import (
	"context"
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
