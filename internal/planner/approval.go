package planner

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/toolfleet/toolfleet/pkg/events"
)

// publishApproval publishes an approval answer for a call of tool, where the executors
// serving the tool wait for it.
func publishApproval(ctx context.Context, js jetstream.JetStream, source, tool, call, run string, ans events.ApprovalAnswer) error {
	subj, err := events.ApprovalAnsweredSubject(tool, call)
	if err != nil {
		return err
	}
	// Not the call id: the approval request in the same stream already carries it, and
	// JetStream would drop the answer as a duplicate. The call is named by the subject.
	e := events.Event{ID: "answer-" + nuid.Next(), Type: events.TypeApprovalAnswer, Source: source, RunID: run}
	if err := e.SetData(ans); err != nil {
		return err
	}
	msg, err := events.Encode(subj, e)
	if err != nil {
		return err
	}
	if _, err := js.PublishMsg(ctx, msg); err != nil {
		return fmt.Errorf("publish approval of call %s: %w", call, err)
	}
	return nil
}
