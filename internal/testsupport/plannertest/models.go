package plannertest

import (
	"context"
	"sync"

	"github.com/toolfleet/toolfleet/internal/provider"
)

// KeptModel counts the model calls and keeps the requests it was sent.
type KeptModel struct {
	provider.Model
	mu   sync.Mutex
	reqs []provider.Request
}

// Generate keeps req and asks the model.
func (m *KeptModel) Generate(ctx context.Context, req provider.Request) (*provider.Response, error) {
	m.mu.Lock()
	m.reqs = append(m.reqs, req)
	m.mu.Unlock()
	return m.Model.Generate(ctx, req)
}

// Stream is what the loop calls: kept like Generate, streaming nothing.
func (m *KeptModel) Stream(ctx context.Context, req provider.Request, _ func(provider.Delta)) (*provider.Response, error) {
	return m.Generate(ctx, req)
}

// Calls is how many times the model was asked.
func (m *KeptModel) Calls() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.reqs)
}

// Last is the last request the model was sent.
func (m *KeptModel) Last() provider.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reqs[len(m.reqs)-1]
}

// Requests are the requests the model was sent, in order.
func (m *KeptModel) Requests() []provider.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]provider.Request(nil), m.reqs...)
}
