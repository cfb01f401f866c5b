package planner

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
)

// PickerSubject is the subject of the toolfleet-picker service's pick endpoint.
const PickerSubject = "toolfleet.picker.pick"

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
func (c *PickerClient) Pick(ctx context.Context, input string, max int) ([]string, error) {
	req, _ := json.Marshal(map[string]any{"input": input, "options": map[string]any{"maxCandidates": max}})
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	msg, err := c.nc.RequestWithContext(ctx, PickerSubject, req)
	if err != nil {
		return nil, fmt.Errorf("picker: %w", err)
	}
	if code := msg.Header.Get("Nats-Service-Error-Code"); code != "" {
		return nil, fmt.Errorf("picker: %s %s", code, msg.Header.Get("Nats-Service-Error"))
	}
	var resp struct {
		Results []struct {
			Name string `json:"name"`
		} `json:"results"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return nil, fmt.Errorf("picker: bad response: %w", err)
	}
	names := make([]string, 0, len(resp.Results))
	for _, r := range resp.Results {
		names = append(names, r.Name)
	}
	return names, nil
}
