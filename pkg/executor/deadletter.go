package executor

import (
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"

	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// deadLetter sets a message aside on toolfleet.dlq.<tool> with the reason and the
// original headers and body, then answers its caller when it has one (a call id to
// address a result to). deliveries is 0 when the message was refused on sight.
func (ex *Executor) deadLetter(j *job, nm *nats.Msg, deliveries uint64, failure *tools.Error) {
	tool := j.ce.Call.Tool
	dl := events.DeadLetter{Reason: failure.Message, Error: failure, Tool: tool, CallID: j.ce.ID,
		RunID: j.ce.RunID, Subject: nm.Subject, Deliveries: deliveries, Headers: nm.Header, Body: nm.Data}
	id := j.ce.ID
	if id == "" {
		id = nuid.Next()
	}
	e := events.Event{ID: id, Type: events.TypeDeadLetter, Source: ex.source, Time: time.Now(), RunID: j.ce.RunID}
	if err := e.SetData(dl); err != nil {
		ex.o.log.Error().Err(err).Msg("encode dead letter")
		return
	}
	m, err := events.Encode(events.DeadLetterSubject(tool), e)
	if err != nil {
		ex.o.log.Error().Err(err).Msg("encode dead letter")
		return
	}
	if err := ex.publish(m); err != nil {
		ex.o.log.Warn().Err(err).Str("subject", nm.Subject).Msg("dead letter not stored; handing the message back")
		if j.msg != nil {
			_ = j.msg.NakWithDelay(time.Second)
		}
		return
	}
	ex.m.deadLettered(tool)
	ex.o.log.Warn().Str("tool", tool).Str("call_id", j.ce.ID).Str("subject", nm.Subject).
		Uint64("deliveries", deliveries).Str("reason", failure.Message).Msg("dead-lettered")
	if j.ce.ID != "" {
		ex.fail(j, failure)
		return
	}
	if j.msg != nil {
		_ = j.msg.TermWithReason(failure.Message)
	}
}
