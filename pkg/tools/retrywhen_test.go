package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

type statusCause struct{ status int }

func (s statusCause) Error() string   { return fmt.Sprintf("status %d", s.status) }
func (s statusCause) HTTPStatus() int { return s.status }

type exitCause struct{ code int }

func (e exitCause) Error() string        { return fmt.Sprintf("exit %d", e.code) }
func (e exitCause) ProcessExitCode() int { return e.code }

// A retry rule retries only the failures it matches: every condition it sets must hold,
// the code must be among the policy's (by default the retryable ones and
// tool_error_permanent), and a code that no retry can fix stays unretried.
func TestRetryWhen(t *testing.T) {
	glitch := &tools.Error{Code: tools.CodeToolFailed, Message: "tool x: connection reset by peer", Err: exitCause{75}}
	fire := &tools.Error{Code: tools.CodeToolFailed, Message: "tool x: disk on fire", Err: exitCause{75}}
	conflict := &tools.Error{Code: tools.CodeToolFailedPermanent, Message: "tool x: the endpoint answered 409", Err: fmt.Errorf("wrapped: %w", statusCause{409})}
	notFound := &tools.Error{Code: tools.CodeToolFailedPermanent, Message: "tool x: the endpoint answered 404", Err: statusCause{404}}
	denied := &tools.Error{Code: tools.CodeDenied, Message: "connection reset"}
	for _, tc := range []struct {
		name string
		p    tools.RetryPolicy
		e    *tools.Error
		want bool
	}{
		{"message matches", tools.RetryPolicy{When: &tools.RetryWhen{Message: "reset|refused"}}, glitch, true},
		{"message does not", tools.RetryPolicy{When: &tools.RetryWhen{Message: "reset|refused"}}, fire, false},
		{"message and exit code", tools.RetryPolicy{When: &tools.RetryWhen{Message: "reset", ExitCode: []int{75}}}, glitch, true},
		{"exit code differs", tools.RetryPolicy{When: &tools.RetryWhen{Message: "reset", ExitCode: []int{1}}}, glitch, false},
		{"no status to match", tools.RetryPolicy{When: &tools.RetryWhen{HTTPStatus: []int{409}}}, glitch, false},
		{"a permanent status named", tools.RetryPolicy{When: &tools.RetryWhen{HTTPStatus: []int{409}}}, conflict, true},
		{"a permanent status not named", tools.RetryPolicy{When: &tools.RetryWhen{HTTPStatus: []int{409}}}, notFound, false},
		{"permanent without a rule", tools.RetryPolicy{RetryOn: []tools.Code{tools.CodeToolFailedPermanent}}, conflict, false},
		{"code outside retryOn", tools.RetryPolicy{RetryOn: []tools.Code{tools.CodeTimeout}, When: &tools.RetryWhen{Message: "reset"}}, glitch, false},
		{"never-retried code", tools.RetryPolicy{RetryOn: []tools.Code{tools.CodeDenied}, When: &tools.RetryWhen{Message: "reset"}}, denied, false},
		{"no rule: codes", tools.RetryPolicy{}, fire, true},
	} {
		// As the executor reads it: with the defaults filled in.
		p := tools.Definition{Retry: &tc.p}.EffectiveRetry()
		if got := p.ShouldRetryError(tc.e); got != tc.want {
			t.Errorf("%s: ShouldRetryError = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestRetryWhenCheck(t *testing.T) {
	for _, w := range []tools.RetryWhen{{}, {Message: "("}, {HTTPStatus: []int{42}}} {
		if err := w.Check(); err == nil {
			t.Errorf("Check(%+v) = nil, want an error", w)
		}
	}
	if err := (tools.RetryWhen{Message: "^x$", HTTPStatus: []int{503}, ExitCode: []int{-1}}).Check(); err != nil {
		t.Error(err)
	}
	d := tools.Definition{Name: "t", Parameters: []byte(`{"type":"object"}`), Retry: &tools.RetryPolicy{When: &tools.RetryWhen{Message: "("}}}
	err := tools.NewRegistry().AddFunc(d, func(context.Context, json.RawMessage) (any, error) { return nil, nil })
	if !errors.Is(err, tools.ErrInvalidDefinition) {
		t.Errorf("registering a bad rule: %v, want invalid_definition", err)
	}
	if s, ok := tools.HTTPStatusOf(errors.New("plain")); ok {
		t.Errorf("HTTPStatusOf(plain) = %d", s)
	}
}
