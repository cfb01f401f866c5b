package planner

import (
	"github.com/toolfleet/toolfleet/internal/provider"
)

// streamed delivers a Generate answer as a stream would, for test models that wrap
// Generate: the planner asks models with Stream.
func streamed(onDelta func(provider.Delta), resp *provider.Response, err error) (*provider.Response, error) {
	if err != nil {
		return nil, err
	}
	if resp.Message.Text != "" {
		onDelta(provider.Delta{Text: resp.Message.Text})
	}
	for i := range resp.Message.ToolCalls {
		onDelta(provider.Delta{ToolCall: &resp.Message.ToolCalls[i]})
	}
	return resp, nil
}
