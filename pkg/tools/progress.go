package tools

import (
	"context"
	"encoding/json"
	"math"
)

// Progress is what a running tool says about how far it got. The executor publishes it
// as a tool_progress event of the call's run (toolfleet.event.run.<run>.tool_progress),
// so the run's followers (SSE, NATS subscribers) see it; a command tool reports it with
// lines on stderr (see package toolsfile).
type Progress struct {
	// Message says what the tool is doing, in words ("fetched 3 of 10 pages").
	Message string `json:"message,omitempty"`
	// Fraction is how much is done, from 0 to 1; 0 when unknown. Values outside are
	// clamped.
	Fraction float64 `json:"fraction,omitempty"`
	// Data is anything else, as JSON (partial results, counters).
	Data json.RawMessage `json:"data,omitempty"`
}

// ProgressReporter receives a running call's progress; the executor puts one in the
// context a tool receives ([WithProgress]).
type ProgressReporter interface {
	ReportProgress(Progress)
}

type progressKey struct{}

// WithProgress returns a context whose [ReportProgress] calls go to r.
func WithProgress(ctx context.Context, r ProgressReporter) context.Context {
	return context.WithValue(ctx, progressKey{}, r)
}

// ReportProgress reports a running tool's progress to the executor running it, which
// publishes it on the call's run (rate-limited: the latest report of a short interval
// wins; scrubbed of the tool's secrets like its output). Outside an executor, it does
// nothing. It never blocks for long and is safe for concurrent use.
func ReportProgress(ctx context.Context, p Progress) {
	r, ok := ctx.Value(progressKey{}).(ProgressReporter)
	if !ok || r == nil {
		return
	}
	switch {
	case math.IsNaN(p.Fraction) || p.Fraction < 0:
		p.Fraction = 0
	case p.Fraction > 1:
		p.Fraction = 1
	}
	r.ReportProgress(p)
}
