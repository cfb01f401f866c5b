package planner

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolfleet/toolfleet/internal/pickerservice"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/pick"
)

// PickQuery is what the planner asks the picker at a step.
type PickQuery struct {
	// Input is the text to rank tools for (the last user message).
	Input string
	// Tools limits candidates to the run's tool set; nil: the whole catalog.
	Tools []string
	// AllowUnsafe lets unsafe tools be candidates: true when the run named its tools.
	AllowUnsafe bool
	// Role is the run's caller's role (its identity, not its metadata), checked against
	// tools' roles.
	Role string
	// Tenant is the run's caller's tenant: a learning picker ranks with its usage.
	Tenant string
	Max    int
}

// PickerClient asks the toolfleet-picker micro service for candidates.
type PickerClient struct {
	nc      *nats.Conn
	timeout time.Duration
}

// NewPickerClient returns a client whose requests give up after timeout.
func NewPickerClient(nc *nats.Conn, timeout time.Duration) *PickerClient {
	return &PickerClient{nc: nc, timeout: timeout}
}

// Pick implements Picker.
func (c *PickerClient) Pick(ctx context.Context, q PickQuery) ([]pick.Result, error) {
	input, _ := json.Marshal(q.Input)
	minScore := 0.0 // the model decides among the candidates; never return none for a weak match
	req, err := json.Marshal(pickerservice.Request{Input: input, Options: pickerservice.RequestOptions{Options: pick.Options{
		MaxCandidates: q.Max, MinScore: &minScore, AllowUnsafe: q.AllowUnsafe, Tools: q.Tools, Role: q.Role}, Tenant: q.Tenant}})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	msg, err := c.nc.RequestWithContext(ctx, events.PickSubject, req)
	if err != nil {
		return nil, fmt.Errorf("picker: %w", err)
	}
	if code := msg.Header.Get("Nats-Service-Error-Code"); code != "" {
		return nil, fmt.Errorf("picker: %s %s", code, msg.Header.Get("Nats-Service-Error"))
	}
	var resp pickerservice.Response
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return nil, fmt.Errorf("picker: bad response: %w", err)
	}
	return resp.Results, nil
}
