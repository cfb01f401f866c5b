package builtin

import (
	"context"
	_ "embed"
	"encoding/json"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

//go:embed schemas/echo.json
var echoSchema []byte

// Echo is the tool echo: it returns its input unchanged. It exists for load tests and
// for checking a fleet end to end; safe and idempotent.
type Echo struct {
	// Value is any JSON value, kept byte for byte.
	Value json.RawMessage `json:"value"`
}

// EchoResult is the output of [Echo].
type EchoResult struct {
	Value json.RawMessage `json:"value"`
}

// Definition describes echo.
func (Echo) Definition() tools.Definition {
	return tools.Definition{
		Type:        "function",
		Name:        "echo",
		Description: "Return the given value unchanged. For tests.",
		Parameters:  echoSchema,
		Safe:        true,
		Tags:        []string{"test"},
	}
}

// Run returns the value. A missing value (possible only without the registry's
// validation) is invalid_tool_input.
func (e *Echo) Run(ctx context.Context) (any, error) {
	if len(e.Value) == 0 {
		return nil, invalidArg("/value", "value is required")
	}
	return EchoResult{Value: e.Value}, nil
}
