package jsutil

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/pkg/events"
)

// EnsureUsage creates or updates the usage stream ([events.Config.UsageStream]), which
// planners write and pickers replay. Either may create it, whichever starts first.
func EnsureUsage(ctx context.Context, js jetstream.JetStream, cfg events.Config) error {
	return ensureStream(ctx, js, cfg.UsageStream())
}
