package plannertest

import (
	"encoding/json"
	"testing"
	"time"
)

// EventData is the data of a run event, as the events stream stores it and SSE shows it.
type EventData struct {
	RunID  string          `json:"run_id"`
	Step   *int            `json:"step"`
	CallID string          `json:"call_id"`
	At     time.Time       `json:"at"`
	Detail json.RawMessage `json:"detail"`
}

// DecodeEventData decodes the data of a run event of kind what.
func DecodeEventData(t testing.TB, what string, data []byte) EventData {
	t.Helper()
	var d EventData
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("event %s: %v: %s", what, err, data)
	}
	return d
}
