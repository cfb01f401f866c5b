package executor

import (
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// setAside stores a message that names no caller at all (no ce-id, no Nats-Msg-Id) as a
// dead letter on toolfleet.dlq.<tool>, then removes it: the dead letter is its only
// answer. If the dead letter cannot be stored, the message stays (handed back, or left
// for the next sweep) — it is never removed unanswered.
func (ex *Executor) setAside(j *job, nm events.Message, failure *tools.Error) {
	if err := ex.storeDeadLetter(j, nm, failure); err != nil {
		ex.o.log.Warn().Err(err).Str("subject", nm.Subject()).Msg("dead letter not stored; keeping the message")
		ex.handBack(j)
		return
	}
	if j.afterStore != nil {
		j.afterStore()
	}
	if j.msg != nil {
		_ = j.msg.TermWithReason(failure.Message)
	}
}

// storeDeadLetter publishes a bounded dead letter of nm (see [events.NewDeadLetter]):
// its size never keeps it from being stored. Its id is the call id when there is one,
// else derived from the message's stream sequence, so that two executors setting the
// same message aside store it once.
func (ex *Executor) storeDeadLetter(j *job, nm events.Message, failure *tools.Error) error {
	id := j.res.CallID
	if id == "" && j.seq > 0 {
		id = events.DeadLetterID(j.seq)
	}
	tool := j.ce.Call.Tool
	d := events.DeadLetter{Reason: failure.Message, Error: failure, Tool: tool, CallID: j.ce.ID,
		RunID: j.ce.RunID, Deliveries: j.deliveries, Sequence: j.seq}
	m, err := events.NewDeadLetter(ex.source, id, d, nm, int(ex.cfg.MaxMsgSize))
	if err != nil {
		return err
	}
	events.SetTrace(m, j.ce.TraceParent, j.ce.TraceState)
	if err := ex.publish(m); err != nil {
		return err
	}
	ex.m.deadLettered(tool)
	ex.o.log.Warn().Str("tool", tool).Str("call_id", j.res.CallID).Str("subject", nm.Subject()).
		Uint64("deliveries", j.deliveries).Str("reason", failure.Message).Msg("dead-lettered")
	return nil
}
