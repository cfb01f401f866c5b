package events_test

import (
	"context"
	"testing"

	"github.com/toolfleet/toolfleet/pkg/events"
)

// A valid trace context goes in and out unchanged, with no tracer at all; what is not
// a W3C traceparent, or nothing, gives nothing to carry on.
func TestTraceContextRoundTrip(t *testing.T) {
	t.Parallel()
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tests := []struct {
		name, parent, state string
		wantParent          string
		wantState           string
	}{
		{"with state", parent, "vendor=opaque", parent, "vendor=opaque"},
		{"without state", parent, "", parent, ""},
		{"none", "", "vendor=opaque", "", ""},
		{"not W3C", "00-xyz-01", "", "", ""},
		{"zero trace id", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, s := events.TraceFromContext(events.ContextWithTrace(context.Background(), tt.parent, tt.state))
			if p != tt.wantParent || s != tt.wantState {
				t.Errorf("carried %q, %q; want %q, %q", p, s, tt.wantParent, tt.wantState)
			}
		})
	}
}
