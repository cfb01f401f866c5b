package planner

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/pkg/events"
)

// publishApproval publishes an approval answer for a call of tool, where the executors
// serving the tool wait for it.
func publishApproval(ctx context.Context, js jetstream.JetStream, source, tool, call string, ans events.ApprovalAnswer) error {
	msg, err := events.NewApprovalAnswer(source, tool, call, ans)
	if err != nil {
		return err
	}
	if _, err := js.PublishMsg(ctx, msg); err != nil {
		return fmt.Errorf("publish approval of call %s: %w", call, err)
	}
	return nil
}
