package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// trace records what ran, in order.
type trace struct {
	mu    sync.Mutex
	steps []string
}

func (tr *trace) add(format string, args ...any) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.steps = append(tr.steps, fmt.Sprintf(format, args...))
}

func (tr *trace) String() string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return strings.Join(tr.steps, " > ")
}

// runBundle is one tool with a traced function and traced callbacks; setup tweaks them.
type runBundle struct {
	tr       *trace
	fn       tools.Func
	cb       tools.Callbacks
	response string
}

func (b *runBundle) call(t *testing.T, raw string) tools.Outcome {
	t.Helper()
	reg := tools.NewRegistry()
	def := tools.Definition{Name: "t", Parameters: json.RawMessage(objSchema)}
	if b.response != "" {
		def.ResponseSchema = json.RawMessage(b.response)
	}
	if err := reg.AddFunc(def, b.fn, tools.WithCallbacks(b.cb)); err != nil {
		t.Fatal(err)
	}
	c, err := reg.Hydrate("t", []byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	out := c.Run(context.Background())
	if !json.Valid(out.Output) {
		t.Errorf("Output is not valid JSON: %q", out.Output)
	}
	return out
}

func setupRun() *runBundle {
	tr := &trace{}
	return &runBundle{
		tr: tr,
		fn: func(_ context.Context, args json.RawMessage) (any, error) {
			tr.add("run")
			return map[string]any{"echo": json.RawMessage(args)}, nil
		},
		cb: tools.Callbacks{
			BeforeCall: func(_ context.Context, input json.RawMessage) (any, error) {
				tr.add("beforeCall(%s)", input)
				return nil, nil
			},
			OnSuccess: func(_ context.Context, _ json.RawMessage, output any) (any, error) {
				tr.add("onSuccess")
				return nil, nil
			},
			OnError: func(_ context.Context, _ json.RawMessage, errOut tools.ErrorOutput) (any, error) {
				tr.add("onError(%s)", errOut.Error.Message)
				return nil, nil
			},
			FormatOutput: func(_ context.Context, output any) (any, error) {
				tr.add("formatOutput(%T)", output)
				return nil, nil
			},
		},
	}
}

func failWith(tr *trace, err error) tools.Func {
	return func(context.Context, json.RawMessage) (any, error) {
		tr.add("run")
		return nil, err
	}
}

func TestCallbackOrder(t *testing.T) {
	t.Parallel()
	t.Run("success", func(t *testing.T) {
		b := setupRun()
		out := b.call(t, `{"q":"x"}`)
		if got, want := b.tr.String(), `beforeCall({"q":"x"}) > run > onSuccess > formatOutput(map[string]interface {})`; got != want {
			t.Errorf("trace = %s, want %s", got, want)
		}
		if out.Err != nil || string(out.Output) != `{"echo":{"q":"x"}}` {
			t.Errorf("outcome = %s, %v", out.Output, out.Err)
		}
	})
	t.Run("error", func(t *testing.T) {
		b := setupRun()
		b.fn = failWith(b.tr, errors.New("disk full"))
		out := b.call(t, `{"q":"x"}`)
		if got, want := b.tr.String(), `beforeCall({"q":"x"}) > run > onError(disk full) > formatOutput(tools.ErrorOutput)`; got != want {
			t.Errorf("trace = %s, want %s", got, want)
		}
		wantCode(t, out.Err, tools.CodeToolFailed, "disk full")
		if string(out.Output) != `{"error":{"code":"tool_error","message":"disk full"}}` {
			t.Errorf("output = %s", out.Output)
		}
	})
	t.Run("short-circuit", func(t *testing.T) {
		b := setupRun()
		b.cb.BeforeCall = func(context.Context, json.RawMessage) (any, error) {
			b.tr.add("beforeCall")
			return map[string]bool{"cached": true}, nil
		}
		out := b.call(t, `{"q":"x"}`)
		if got, want := b.tr.String(), `beforeCall > formatOutput(map[string]bool)`; got != want {
			t.Errorf("trace = %s, want %s (tool and onSuccess skipped)", got, want)
		}
		if out.Err != nil || string(out.Output) != `{"cached":true}` {
			t.Errorf("outcome = %s, %v", out.Output, out.Err)
		}
	})
}

func TestCallbackReplacement(t *testing.T) {
	t.Parallel()
	t.Run("onSuccess replaces the output", func(t *testing.T) {
		b := setupRun()
		b.cb.OnSuccess = func(_ context.Context, input json.RawMessage, output any) (any, error) {
			return map[string]any{"wrapped": output, "input": input}, nil
		}
		out := b.call(t, `{"q":"x"}`)
		if string(out.Output) != `{"input":{"q":"x"},"wrapped":{"echo":{"q":"x"}}}` || out.Err != nil {
			t.Errorf("outcome = %s, %v", out.Output, out.Err)
		}
	})
	t.Run("onError replaces the error output, the failure stays", func(t *testing.T) {
		b := setupRun()
		b.fn = failWith(b.tr, tools.Errorf(tools.CodeDenied, "not allowed"))
		b.cb.OnError = func(_ context.Context, _ json.RawMessage, e tools.ErrorOutput) (any, error) {
			return map[string]string{"error": "friendly: " + e.Error.Message, "hint": "ask a human"}, nil
		}
		out := b.call(t, `{"q":"x"}`)
		wantCode(t, out.Err, tools.CodeDenied, "not allowed") // an *Error from the tool keeps its code
		if string(out.Output) != `{"error":"friendly: not allowed","hint":"ask a human"}` {
			t.Errorf("output = %s", out.Output)
		}
	})
	t.Run("formatOutput on success and on error", func(t *testing.T) {
		for _, fail := range []bool{false, true} {
			b := setupRun()
			if fail {
				b.fn = failWith(b.tr, errors.New("boom"))
			}
			b.cb.FormatOutput = func(_ context.Context, output any) (any, error) {
				return map[string]any{"formatted": output}, nil
			}
			out := b.call(t, `{"q":"x"}`)
			want := `{"formatted":{"echo":{"q":"x"}}}`
			if fail {
				want = `{"formatted":{"error":{"code":"tool_error","message":"boom"}}}`
			}
			if string(out.Output) != want {
				t.Errorf("fail=%v: output = %s, want %s", fail, out.Output, want)
			}
		}
	})
}

func TestCallbackFailures(t *testing.T) {
	t.Parallel()
	names := []string{"beforeCall", "onSuccess", "onError", "formatOutput"}
	for _, name := range names {
		for _, panics := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s panics=%v", name, panics), func(t *testing.T) {
				t.Parallel()
				b := setupRun()
				bad := func() (any, error) {
					b.tr.add("bad %s", name)
					if panics {
						panic("callback exploded")
					}
					return nil, errors.New("callback said no")
				}
				switch name {
				case "beforeCall":
					b.cb.BeforeCall = func(context.Context, json.RawMessage) (any, error) { return bad() }
				case "onSuccess":
					b.cb.OnSuccess = func(context.Context, json.RawMessage, any) (any, error) { return bad() }
				case "onError":
					b.fn = failWith(b.tr, errors.New("tool failed"))
					b.cb.OnError = func(context.Context, json.RawMessage, tools.ErrorOutput) (any, error) { return bad() }
				case "formatOutput":
					b.cb.FormatOutput = func(context.Context, any) (any, error) { return bad() }
				}
				out := b.call(t, `{"q":"x"}`) // the test process surviving a panic is part of the check
				frag := "callback said no"
				if panics {
					frag = "panicked: callback exploded"
				}
				wantCode(t, out.Err, tools.CodeCallbackFailed, "callback "+name, frag)
				if !strings.Contains(string(out.Output), "callback "+name) {
					t.Errorf("output %s does not name the callback", out.Output)
				}
				if name == "beforeCall" && strings.Contains(b.tr.String(), "run") {
					t.Errorf("tool ran after beforeCall failed: %s", b.tr)
				}
				if strings.Contains(b.tr.String(), "bad "+name+" >") {
					t.Errorf("callbacks ran after %s failed: %s", name, b.tr)
				}
			})
		}
	}
}

func TestResponseSchema(t *testing.T) {
	t.Parallel()
	const resp = `{"type":"object","properties":{"echo":{"type":"object"}},"required":["echo"]}`
	t.Run("valid output passes", func(t *testing.T) {
		b := setupRun()
		b.response = resp
		if out := b.call(t, `{"q":"x"}`); out.Err != nil {
			t.Errorf("valid output refused: %v", out.Err)
		}
	})
	t.Run("invalid output", func(t *testing.T) {
		b := setupRun()
		b.response = resp
		b.fn = func(context.Context, json.RawMessage) (any, error) { return map[string]int{"echo": 3}, nil }
		out := b.call(t, `{"q":"x"}`)
		te := wantCode(t, out.Err, tools.CodeInvalidOutput, "responseSchema", "/echo")
		if len(te.Violations) != 1 || te.Violations[0].Pointer != "/echo" {
			t.Errorf("violations = %+v", te.Violations)
		}
		if !strings.Contains(string(out.Output), "responseSchema") {
			t.Errorf("output = %s", out.Output)
		}
	})
	t.Run("applies to the formatted output", func(t *testing.T) {
		b := setupRun()
		b.response = resp
		b.cb.FormatOutput = func(context.Context, any) (any, error) { return "flattened", nil }
		out := b.call(t, `{"q":"x"}`)
		wantCode(t, out.Err, tools.CodeInvalidOutput, "want object")
	})
	t.Run("applies to the error output too", func(t *testing.T) {
		b := setupRun()
		b.response = resp
		b.fn = failWith(b.tr, errors.New("boom"))
		out := b.call(t, `{"q":"x"}`)
		wantCode(t, out.Err, tools.CodeInvalidOutput, "missing property 'echo'")
		if !errors.Is(out.Err, tools.ErrToolFailed) {
			t.Error("the original tool_error is lost from the chain")
		}
		// An onError answer that fits the schema passes, and the failure stays tool_error.
		b.cb.OnError = func(context.Context, json.RawMessage, tools.ErrorOutput) (any, error) {
			return map[string]any{"echo": map[string]string{"error": "boom"}}, nil
		}
		out = b.call(t, `{"q":"x"}`)
		wantCode(t, out.Err, tools.CodeToolFailed, "boom")
	})
	t.Run("output that is not JSON-encodable", func(t *testing.T) {
		b := setupRun()
		b.fn = func(context.Context, json.RawMessage) (any, error) { return make(chan int), nil }
		out := b.call(t, `{"q":"x"}`)
		wantCode(t, out.Err, tools.CodeInvalidOutput, "cannot be encoded as JSON")
	})
}

func TestToolFailures(t *testing.T) {
	t.Parallel()
	t.Run("panic", func(t *testing.T) {
		b := setupRun()
		b.fn = func(context.Context, json.RawMessage) (any, error) { panic("nil map write") }
		out := b.call(t, `{"q":"x"}`)
		wantCode(t, out.Err, tools.CodeToolPanic, "panicked", "nil map write")
		if !strings.Contains(b.tr.String(), "onError(tool \"t\" panicked") {
			t.Errorf("onError did not see the panic: %s", b.tr)
		}
	})
	t.Run("error without message keeps its code", func(t *testing.T) {
		b := setupRun()
		b.fn = failWith(b.tr, fmt.Errorf("wrapped: %w", &tools.Error{Code: tools.CodeDenied}))
		out := b.call(t, `{"q":"x"}`)
		wantCode(t, out.Err, tools.CodeDenied)
	})
}

func TestRunContext(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	t.Cleanup(func() { close(release) }) // lets the abandoned tools end
	stubborn := func(context.Context, json.RawMessage) (any, error) { <-release; return "late", nil }

	run := func(t *testing.T, def tools.Definition, fn tools.Func, ctx context.Context) tools.Outcome {
		t.Helper()
		reg := tools.NewRegistry()
		def.Name = "slow"
		def.Parameters = json.RawMessage(objSchema)
		if err := reg.AddFunc(def, fn); err != nil {
			t.Fatal(err)
		}
		c, err := reg.Hydrate("slow", []byte(`{"q":"x"}`))
		if err != nil {
			t.Fatal(err)
		}
		return c.Run(ctx)
	}
	t.Run("deadline, tool ignores ctx", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		out := run(t, tools.Definition{}, stubborn, ctx)
		wantCode(t, out.Err, tools.CodeTimeout, "deadline")
		if !json.Valid(out.Output) {
			t.Errorf("output %q", out.Output)
		}
	})
	t.Run("definition timeout", func(t *testing.T) {
		t.Parallel()
		out := run(t, tools.Definition{Timeout: tools.Duration(20 * time.Millisecond)}, stubborn, context.Background())
		wantCode(t, out.Err, tools.CodeTimeout)
	})
	t.Run("canceled", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		go func() { cancel() }()
		out := run(t, tools.Definition{}, stubborn, ctx)
		wantCode(t, out.Err, tools.CodeCanceled)
	})
	t.Run("tool returns the context error", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		out := run(t, tools.Definition{}, func(ctx context.Context, _ json.RawMessage) (any, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}, ctx)
		wantCode(t, out.Err, tools.CodeTimeout)
	})
	t.Run("already ended: tool never starts", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		started := false
		out := run(t, tools.Definition{}, func(context.Context, json.RawMessage) (any, error) { started = true; return 1, nil }, ctx)
		wantCode(t, out.Err, tools.CodeCanceled)
		if started {
			t.Error("tool started with an ended context")
		}
	})
	t.Run("call info reaches the tool", func(t *testing.T) {
		t.Parallel()
		info := tools.CallInfo{CallID: "c1", RunID: "r1", Tool: "slow", Attempt: 2, Metadata: map[string]string{"role": "admin"}}
		ctx, cancel := context.WithTimeout(tools.WithCallInfo(context.Background(), info), time.Minute)
		defer cancel()
		out := run(t, tools.Definition{}, func(ctx context.Context, _ json.RawMessage) (any, error) {
			got, ok := tools.CallInfoFrom(ctx)
			if !ok {
				return nil, errors.New("no call info")
			}
			return fmt.Sprintf("%s/%s/%d/%s", got.RunID, got.CallID, got.Attempt, got.Metadata["role"]), nil
		}, ctx)
		if out.Err != nil || string(out.Output) != `"r1/c1/2/admin"` {
			t.Errorf("outcome = %s, %v", out.Output, out.Err)
		}
	})
}
