package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/toolfleet/toolfleet/internal/jsonscan"
)

// Outcome is the result of running a call.
type Outcome struct {
	// Output is what the caller, and the model, sees: the tool's output, or on failure the
	// error output {"error":{"code","message"}} ([Error.ForModel]; possibly replaced by onError), after formatOutput and
	// the responseSchema check. It is always valid JSON.
	Output json.RawMessage
	// Err is nil on success; otherwise the failure with its original code: tool_error,
	// tool_panic, timeout, canceled, callback_failed, invalid_tool_output, or the code of
	// an *Error the tool returned.
	Err *Error
}

// Run executes the call through its callbacks (see [Callbacks] for the order) and returns
// its outcome. It never panics: a panic in the tool is [CodeToolPanic], one in a callback
// [CodeCallbackFailed].
//
// The tool receives ctx (where the executor has put a [CallInfo]); when the definition has
// a Timeout, ctx is bounded by it. Run returns as soon as ctx ends, with [CodeTimeout] for
// a passed deadline or [CodeCanceled], even if the tool ignores ctx: the tool then runs on
// in its own goroutine until it returns, and its late result is dropped. A tool that never
// honours ctx can therefore leak a goroutine per abandoned call; tools must watch
// ctx.Done().
func (c *Call) Run(ctx context.Context) (o Outcome) {
	defer func() {
		if p := recover(); p != nil { // a bug in this package; still never crash the caller
			e := &Error{Code: CodeInternal, Message: fmt.Sprintf("running %q: %v", c.entry.def.Name, p)}
			o = Outcome{Output: e.ForModel(), Err: e}
		}
	}()
	if t := c.entry.def.Timeout.D(); t > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t)
		defer cancel()
	}
	cb := c.entry.callbacks.merge(c.entry.impl.hooks(c))
	input := c.args

	var out any
	var failure *Error
	shortCircuit := false
	if cb.BeforeCall != nil {
		v, ferr := guard(cbBeforeCall, func() (any, error) { return cb.BeforeCall(ctx, input) })
		if ferr != nil {
			return failed(ferr)
		}
		if v != nil {
			out, shortCircuit = v, true
		}
	}
	if !shortCircuit {
		out, failure = c.execute(ctx)
		switch {
		case failure == nil && cb.OnSuccess != nil:
			v, ferr := guard(cbOnSuccess, func() (any, error) { return cb.OnSuccess(ctx, input, out) })
			if ferr != nil {
				return failed(ferr)
			}
			if v != nil {
				out = v
			}
		case failure != nil:
			errOut := ErrorOutput{Error: failure}
			out = errOut
			if cb.OnError != nil {
				v, ferr := guard(cbOnError, func() (any, error) { return cb.OnError(ctx, input, errOut) })
				if ferr != nil {
					ferr.Err = errors.Join(ferr.Err, failure)
					return failed(ferr)
				}
				if v != nil {
					out = v
				}
			}
		}
	}
	if cb.FormatOutput != nil {
		final := out
		v, ferr := guard(cbFormatOutput, func() (any, error) { return cb.FormatOutput(ctx, final) })
		if ferr != nil {
			return failed(ferr)
		}
		if v != nil {
			out = v
		}
	}
	return c.finish(out, failure)
}

// finish encodes the final output and checks it against the responseSchema.
func (c *Call) finish(out any, failure *Error) Outcome {
	b, err := MarshalJSON(out)
	if err != nil {
		e := &Error{Code: CodeInvalidOutput, Message: fmt.Sprintf("output of %q cannot be encoded as JSON: %v", c.entry.def.Name, err), Err: err}
		if failure != nil {
			e.Err = errors.Join(err, failure)
		}
		return failed(e)
	}
	if c.entry.response != nil {
		v, err := jsonscan.Parse(b)
		if err == nil && (c.entry.fastResp == nil || !c.entry.fastResp.valid(v)) {
			err = c.entry.response.Validate(v)
		}
		if err != nil {
			vs := violations(err)
			e := &Error{Code: CodeInvalidOutput, Violations: vs,
				Message: fmt.Sprintf("output of %q does not match its responseSchema: %s", c.entry.def.Name, violationSummary(vs))}
			// The original failure stays in the chain: errors.Is(e, ErrToolFailed) holds.
			e.Err = err
			if failure != nil {
				e.Err = errors.Join(failure, err)
			}
			return failed(e)
		}
	}
	return Outcome{Output: b, Err: failure}
}

// failed is the outcome of a call that ends with e, showing e as the output.
func failed(e *Error) Outcome {
	return Outcome{Output: e.ForModel(), Err: e}
}

type result struct {
	out any
	err *Error
}

// execute runs the tool, containing panics and giving up when ctx ends.
func (c *Call) execute(ctx context.Context) (any, *Error) {
	if err := ctx.Err(); err != nil {
		return nil, c.contextFailure(ctx)
	}
	if ctx.Done() == nil { // cannot be cancelled: no goroutine needed
		r := c.protectedRun(ctx)
		return r.out, r.err
	}
	// A Go function cannot be stopped: a tool that ignores ctx is left running when ctx
	// ends, and the call is answered without it (a timeout, a cancel). Its goroutine has
	// no owner on purpose — waiting for it would hold the answer hostage — and it ends
	// when the tool returns; done is buffered so that it never blocks then.
	done := make(chan result, 1)
	go func() { done <- c.protectedRun(ctx) }()
	select {
	case r := <-done:
		return r.out, r.err
	case <-ctx.Done():
		select {
		case r := <-done: // finished at the same moment: keep its answer
			return r.out, r.err
		default:
			return nil, c.contextFailure(ctx)
		}
	}
}

func (c *Call) protectedRun(ctx context.Context) (r result) {
	name := c.entry.def.Name
	defer func() {
		if p := recover(); p != nil {
			r = result{err: &Error{Code: CodeToolPanic, Message: fmt.Sprintf("tool %q panicked: %v", name, p),
				Err: fmt.Errorf("panic: %v\n%s", p, debug.Stack())}}
		}
	}()
	out, err := c.entry.impl.run(ctx, c)
	if err != nil {
		return result{err: c.toolFailure(ctx, err)}
	}
	return result{out: out}
}

// toolFailure classifies an error returned by the tool: an *Error keeps its code, a
// context error is a timeout or cancellation, anything else is tool_error.
func (c *Call) toolFailure(ctx context.Context, err error) *Error {
	var te *Error
	if errors.As(err, &te) {
		if te.Message == "" {
			return &Error{Code: te.Code, Message: string(te.Code), Violations: te.Violations, Err: err}
		}
		return te
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		if ctx.Err() != nil {
			f := c.contextFailure(ctx)
			f.Err = err
			return f
		}
	}
	return Wrap(CodeToolFailed, err, err.Error())
}

func (c *Call) contextFailure(ctx context.Context) *Error {
	name := c.entry.def.Name
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &Error{Code: CodeTimeout, Message: fmt.Sprintf("tool %q did not finish before its deadline", name), Err: ctx.Err()}
	}
	return &Error{Code: CodeCanceled, Message: fmt.Sprintf("call of %q was canceled before it finished", name), Err: ctx.Err()}
}
