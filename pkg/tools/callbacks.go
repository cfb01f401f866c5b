package tools

import (
	"context"
	"encoding/json"
	"fmt"
)

// Callbacks wrap a tool's execution. [Call.Run] applies them in this order:
//
//  1. BeforeCall(input): a non-nil answer short-circuits: it becomes the output, the tool
//     does not run, and OnSuccess/OnError are skipped.
//  2. The tool runs.
//  3. On success, OnSuccess(input, output): a non-nil answer replaces the output.
//     On failure, OnError(input, {error}): a non-nil answer replaces the error output; the
//     call still reports its failure (Outcome.Err keeps the original code).
//  4. FormatOutput(output), on the final output, success or error: a non-nil answer
//     replaces it. Then the tool's responseSchema, if any, checks what remains.
//
// A callback that returns an error or panics ends the call with [CodeCallbackFailed],
// naming the callback; no further callback runs. Callbacks run on the caller's goroutine
// and should honour ctx themselves. A nil field is skipped.
type Callbacks struct {
	BeforeCall   func(ctx context.Context, input json.RawMessage) (any, error)
	OnSuccess    func(ctx context.Context, input json.RawMessage, output any) (any, error)
	OnError      func(ctx context.Context, input json.RawMessage, errOut ErrorOutput) (any, error)
	FormatOutput func(ctx context.Context, output any) (any, error)
}

// ErrorOutput is what a failed call shows as its output (and what OnError receives):
// {"error":{"code","message","violations"}}, the one error shape a model sees, from an
// executor as from the planner ([Error.ForModel] writes it).
type ErrorOutput struct {
	Error *Error `json:"error"`
}

// merge fills the fields cb leaves nil from fallback.
func (cb Callbacks) merge(fallback Callbacks) Callbacks {
	if cb.BeforeCall == nil {
		cb.BeforeCall = fallback.BeforeCall
	}
	if cb.OnSuccess == nil {
		cb.OnSuccess = fallback.OnSuccess
	}
	if cb.OnError == nil {
		cb.OnError = fallback.OnError
	}
	if cb.FormatOutput == nil {
		cb.FormatOutput = fallback.FormatOutput
	}
	return cb
}

// Callback names, as they appear in callback_failed messages.
const (
	cbBeforeCall   = "beforeCall"
	cbOnSuccess    = "onSuccess"
	cbOnError      = "onError"
	cbFormatOutput = "formatOutput"
)

// guard runs one callback, turning its error or panic into a callback_failed *Error that
// names it.
func guard(name string, f func() (any, error)) (out any, ferr *Error) {
	defer func() {
		if p := recover(); p != nil {
			ferr = &Error{Code: CodeCallbackFailed, Message: fmt.Sprintf("callback %s panicked: %v", name, p),
				Err: fmt.Errorf("panic in %s: %v", name, p)}
		}
	}()
	out, err := f()
	if err != nil {
		return nil, Wrap(CodeCallbackFailed, err, fmt.Sprintf("callback %s failed: %v", name, err))
	}
	return out, nil
}
