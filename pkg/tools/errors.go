package tools

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Code classifies a failure. Codes travel on the wire (in results and logs) and steer
// the runtime: retries, statuses and what a model is told all follow the code.
type Code string

// All codes, in one place.
const (
	// CodeInvalidDefinition: a definition cannot be registered (bad name, missing or
	// uncompilable schema, remote $ref, ...).
	CodeInvalidDefinition Code = "invalid_definition"
	// CodeNoSuchTool: the call names a tool nobody serves.
	CodeNoSuchTool Code = "no_such_tool"
	// CodeNotAllowed: the tool exists but the run does not allow it at this step (outside
	// its tools or activeTools, left out by the picker, or ruled out by toolChoice). The
	// planner answers it without running the tool. Never retried.
	CodeNotAllowed Code = "not_allowed"
	// CodeForbidden: the caller's role or tenant is not among those the tool allows
	// (Definition.Roles, Definition.Tenants). The executor answers it without running the
	// tool. Never retried.
	CodeForbidden Code = "forbidden"
	// CodeInvalidInput: the arguments could not be parsed or broke the schema. Never retried.
	CodeInvalidInput Code = "invalid_tool_input"
	// CodeInputTooLarge: the arguments exceed the size limit; refused before parsing.
	CodeInputTooLarge Code = "input_too_large"
	// CodeToolFailed: the tool ran and returned an error.
	CodeToolFailed Code = "tool_error"
	// CodeToolFailedPermanent: the tool ran and failed in a way a retry cannot fix: an HTTP
	// endpoint answered 4xx, a path is outside the sandbox, an expression divides by zero.
	// The model is told, as for tool_error, but the fleet does not try again. Never retried.
	CodeToolFailedPermanent Code = "tool_error_permanent"
	// CodeToolPanic: the tool panicked; the panic was contained.
	CodeToolPanic Code = "tool_panic"
	// CodeCallbackFailed: a callback (beforeCall, onSuccess, onError, formatOutput) errored
	// or panicked.
	CodeCallbackFailed Code = "callback_failed"
	// CodeInvalidOutput: the final output broke the tool's responseSchema.
	CodeInvalidOutput Code = "invalid_tool_output"
	// CodeOutputTooLarge: the tool's output does not fit in a result (the stream's message
	// limit or the server's max payload); decided once, before the result is published.
	CodeOutputTooLarge Code = "output_too_large"
	// CodeTimeout: the attempt ran past its deadline.
	CodeTimeout Code = "timeout"
	// CodeDenied: an approval was refused or expired.
	CodeDenied Code = "denied"
	// CodeInterrupted: a non-idempotent call was cut off (executor crash) and is not run
	// again.
	CodeInterrupted Code = "interrupted"
	// CodeCanceled: the caller or the executor gave up on the call (shutdown).
	CodeCanceled Code = "canceled"
	// CodeInvalidEvent: a message is not a valid toolfleet event.
	CodeInvalidEvent Code = "invalid_event"
	// CodeRateLimited: the call was over one of its tool's limits (Definition.RateLimit,
	// Definition.MaxInFlightPerTenant) for longer than the tool lets a call wait
	// (Definition.LimitWait), or too many calls were already waiting; the tool never ran.
	// Error.RetryAfterMS says when to try again. Never retried by the fleet.
	CodeRateLimited Code = "rate_limited"
	// CodeInternal: anything else; a bug or an infrastructure failure.
	CodeInternal Code = "internal"
)

// RetryableByDefault lists the codes a default retry policy retries.
func RetryableByDefault() []Code {
	return []Code{CodeToolFailed, CodeToolPanic, CodeTimeout, CodeInternal}
}

// retryable records, for every code, whether an attempt failing with it could succeed if
// tried again. Retrying is opt-in: a code that is missing here is never retried, so a new
// code fails closed until someone decides (TestEveryCodeHasARetryDecision fails until
// then).
var retryable = map[Code]bool{
	CodeToolFailed: true, // a flaky dependency, a transient failure of the tool
	CodeToolPanic:  true, // often a bad state that the next attempt does not meet
	CodeTimeout:    true, // the next attempt may be faster
	CodeInternal:   true, // infrastructure: a lost connection, a full stream

	CodeInvalidDefinition:   false, // the definition stays invalid
	CodeNoSuchTool:          false, // nobody serves it on the next attempt either
	CodeNotAllowed:          false, // the run's rules for the step do not change on a retry
	CodeForbidden:           false, // the caller's identity does not change on a retry
	CodeInvalidInput:        false, // the same arguments break the same schema
	CodeInputTooLarge:       false, // the same arguments stay too large
	CodeToolFailedPermanent: false, // the tool said a retry cannot fix it
	CodeCallbackFailed:      false, // callbacks are the author's code, deterministic
	CodeInvalidOutput:       false, // the tool returns the same shape again
	CodeOutputTooLarge:      false, // rerunning a tool with side effects for output that cannot be sent
	CodeDenied:              false, // a person said no
	CodeInterrupted:         false, // not idempotent: running it again could repeat its effect
	CodeCanceled:            false, // the caller or the executor gave up
	CodeInvalidEvent:        false, // the message stays malformed
	CodeRateLimited:         false, // the caller decides when to come back (RetryAfterMS)
}

// Retryable reports whether an attempt failing with c could succeed if tried again: only
// tool_error, tool_panic, timeout and internal can. Invalid input, unknown tools, denials,
// interruptions and outputs too large never can, nor can a code toolfleet does not know.
func (c Code) Retryable() bool { return retryable[c] }

// Violation is one schema violation: where in the arguments, and what is wrong.
type Violation struct {
	// Pointer is the JSON Pointer (RFC 6901) of the offending value in the arguments, "" for
	// the root.
	Pointer string `json:"pointer"`
	// Message says what is wrong, in words a model can act on.
	Message string `json:"message"`
}

// Error is the one error type of toolfleet. Match it by code with errors.Is against the
// sentinels below, or take it apart with errors.As.
type Error struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
	// Violations lists every schema violation, for CodeInvalidInput and CodeInvalidOutput.
	Violations []Violation `json:"violations,omitempty"`
	// RetryAfterMS, for CodeRateLimited, is how many milliseconds from the answer the
	// tool is expected to have room for the call again.
	RetryAfterMS int64 `json:"retry_after_ms,omitempty"`
	// Err is the cause; it is logged, never put on the wire.
	Err error `json:"-"`
}

// Sentinels: errors.Is(err, tools.ErrInvalidInput) matches any *Error with that code.
var (
	ErrInvalidDefinition = &Error{Code: CodeInvalidDefinition}
	ErrNoSuchTool        = &Error{Code: CodeNoSuchTool}
	ErrNotAllowed        = &Error{Code: CodeNotAllowed}
	ErrForbidden         = &Error{Code: CodeForbidden}
	ErrInvalidInput      = &Error{Code: CodeInvalidInput}
	ErrInputTooLarge     = &Error{Code: CodeInputTooLarge}
	ErrToolFailed        = &Error{Code: CodeToolFailed}
	ErrToolPanic         = &Error{Code: CodeToolPanic}
	ErrCallbackFailed    = &Error{Code: CodeCallbackFailed}
	ErrInvalidOutput     = &Error{Code: CodeInvalidOutput}
	ErrTimeout           = &Error{Code: CodeTimeout}
	ErrDenied            = &Error{Code: CodeDenied}
	ErrInterrupted       = &Error{Code: CodeInterrupted}
	ErrCanceled          = &Error{Code: CodeCanceled}
	ErrInvalidEvent      = &Error{Code: CodeInvalidEvent}
	ErrInternal          = &Error{Code: CodeInternal}
	ErrRateLimited       = &Error{Code: CodeRateLimited}
)

// ErrToolFailedPermanent matches any *Error with [CodeToolFailedPermanent].
var ErrToolFailedPermanent = &Error{Code: CodeToolFailedPermanent}

// Errorf returns an *Error with the code and a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns an *Error with the code and message whose cause is err.
func Wrap(code Code, err error, message string) *Error {
	return &Error{Code: code, Message: message, Err: err}
}

func (e *Error) Error() string {
	if e.Message == "" {
		return string(e.Code)
	}
	return string(e.Code) + ": " + e.Message
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is matches any *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// ForModel renders the error as the JSON a model is shown as the tool's result, so that
// it can repair its call: {"error":{"code","message","violations"}} ([ErrorOutput]). It is
// the one error shape a model sees: a failed tool's output (before onError replaces it),
// an executor's refusal, the planner's own answers.
func (e *Error) ForModel() json.RawMessage {
	b, err := MarshalJSON(ErrorOutput{Error: e})
	if err != nil {
		panic(err) // strings and numbers only (Err is not marshalled): it cannot fail
	}
	return b
}

// AsError returns err as an *Error: itself if it is one (anywhere in its chain), otherwise
// wrapped with the fallback code.
func AsError(err error, fallback Code) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: fallback, Message: err.Error(), Err: err}
}
