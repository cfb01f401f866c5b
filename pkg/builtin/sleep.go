package builtin

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

//go:embed schemas/sleep.json
var sleepSchema []byte

// DefaultMaxSleep bounds sleep when Config.MaxSleep is zero.
const DefaultMaxSleep = time.Minute

// Sleep is the tool sleep: it waits for a duration or until its context ends. It exists
// for load tests (a tool that holds a worker without using CPU); safe and idempotent.
type Sleep struct {
	Duration string `json:"duration"`

	max time.Duration // the longest sleep allowed; zero means DefaultMaxSleep
}

// SleepResult is the output of [Sleep].
type SleepResult struct {
	Slept string `json:"slept"`
}

// Definition describes sleep.
func (Sleep) Definition() tools.Definition {
	return tools.Definition{
		Type:        "function",
		Name:        "sleep",
		Description: "Wait for a duration, then answer. For load tests.",
		Parameters:  sleepSchema,
		Safe:        true,
		Tags:        []string{"test"},
	}
}

// Run sleeps. A duration longer than the limit is invalid_tool_input; the end of ctx
// before the duration is up is timeout or canceled.
func (s *Sleep) Run(ctx context.Context) (any, error) {
	d, err := time.ParseDuration(s.Duration)
	if err != nil || d < 0 {
		return nil, invalidArg("/duration", fmt.Sprintf("%q is not a duration such as \"1.5s\"", s.Duration))
	}
	limit := s.max
	if limit <= 0 {
		limit = DefaultMaxSleep
	}
	if d > limit {
		return nil, invalidArg("/duration", fmt.Sprintf("%s is longer than the limit of %s", d, limit))
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return SleepResult{Slept: d.String()}, nil
	case <-ctx.Done():
		return nil, ctxError(ctx, "sleep "+d.String())
	}
}
