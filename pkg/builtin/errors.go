package builtin

import (
	"context"
	"errors"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// invalidArg is an argument the tool cannot use, pointed at so that a model can repair it.
func invalidArg(pointer, msg string) *tools.Error {
	return &tools.Error{Code: tools.CodeInvalidInput, Message: msg,
		Violations: []tools.Violation{{Pointer: pointer, Message: msg}}}
}

// permanent is a failure that a retry would only repeat.
func permanent(format string, args ...any) *tools.Error {
	return tools.Errorf(tools.CodeToolFailedPermanent, format, args...)
}

// ctxError turns the end of ctx into timeout or canceled, the codes the fleet acts on.
func ctxError(ctx context.Context, what string) *tools.Error {
	err := ctx.Err()
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		return tools.Wrap(tools.CodeTimeout, err, what+": deadline exceeded")
	}
	return tools.Wrap(tools.CodeCanceled, err, what+": canceled")
}

// notConfigured is the answer of a tool whose configuration Register did not fill in.
func notConfigured(tool string) *tools.Error {
	return tools.Errorf(tools.CodeToolFailedPermanent, "%s is not configured on this executor", tool)
}
