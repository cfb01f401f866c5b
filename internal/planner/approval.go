package planner

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// publishApproval publishes answerer's approval answer for a call of tool, where the
// executors serving the tool wait for it (they check again that answerer may call it). dup reports that JetStream dropped it: an answer to the
// call (same answer id) was published before.
func publishApproval(ctx context.Context, js jetstream.JetStream, source string, answerer events.Identity, tool, call string, ans events.ApprovalAnswer) (dup bool, err error) {
	msg, err := events.NewApprovalAnswer(source, answerer, tool, call, ans)
	if err != nil {
		return false, err
	}
	ack, err := jsutil.PublishSettled(ctx, js, msg)
	if err != nil {
		return false, fmt.Errorf("publish approval of call %s: %w", call, err)
	}
	return ack.Duplicate, nil
}
