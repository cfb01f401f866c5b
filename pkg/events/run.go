package events

import (
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
)

// NewRunEvent encodes r as the run lifecycle event what (e.g. "step", "done") on
// [RunEventSubject](r.Tenant, r.RunID, what), of type [RunType](what), at time at (zero: now). Its
// id is derived from what it reports — <run>-<what>-<call> when r names a call,
// <run>-<what>-<step> otherwise, followed by -<executor>, -<attempt> and -<seq> when r
// sets them — so announcing the same thing twice (a step resumed after a crash) is
// deduplicated.
func NewRunEvent(source, what string, r RunEvent, at time.Time) (*nats.Msg, error) {
	id := r.RunID + "-" + what + "-" + strconv.Itoa(r.Step)
	if r.CallID != "" {
		id = r.RunID + "-" + what + "-" + r.CallID
	}
	if r.Executor != "" {
		id += "-" + r.Executor
	}
	if r.Attempt > 0 {
		id += "-" + strconv.Itoa(r.Attempt)
	}
	if r.Seq > 0 {
		id += "-" + strconv.Itoa(r.Seq)
	}
	return NewRunEventID(source, what, id, r, at)
}

// NewRunEventID is [NewRunEvent] with the event id given: for events of which one step
// or call has several (the text deltas of a streamed answer), each needs its own id, e.g.
// <run>-<what>-<step>-<n>. The data's At is set to at.
func NewRunEventID(source, what, id string, r RunEvent, at time.Time) (*nats.Msg, error) {
	subj, err := RunEventSubject(r.Tenant, r.RunID, what)
	if err != nil {
		return nil, err
	}
	if at.IsZero() {
		at = time.Now()
	}
	r.At = at
	e := Event{ID: id, Type: RunType(what), Source: source, Time: at, RunID: r.RunID}
	if err := e.setData(marshalRunEvent(&r)); err != nil {
		return nil, err
	}
	return Encode(subj, e)
}

// DecodeRunEvent decodes a run lifecycle event; what is the event's word, read exactly
// from its subject ([ParseRunEventSubject]).
func DecodeRunEvent(msg Message) (e Event, what string, r RunEvent, err error) {
	_, what, _, _ = ParseRunEventSubject(msg.Subject())
	e, r, err = decodeAs[RunEvent](msg, 0)
	return e, what, r, err
}

// PlanStep is the data of a planner's step message on [PlanSubject]: take step Step of
// the run. Its type is [RunType]("advance").
type PlanStep struct {
	Step int `json:"step"`
}

// NewPlanStep encodes the request to take step of run on [PlanSubject](run), at time at
// (zero: now). Its id is <run>-<step>, so asking twice for the same step is one message.
func NewPlanStep(source, run string, step int, at time.Time) (*nats.Msg, error) {
	subj, err := PlanSubject(run)
	if err != nil {
		return nil, err
	}
	if at.IsZero() {
		at = time.Now()
	}
	e := Event{ID: run + "-" + strconv.Itoa(step), Type: RunType("advance"), Source: source, Time: at, RunID: run}
	if err := e.SetData(PlanStep{Step: step}); err != nil {
		return nil, err
	}
	return Encode(subj, e)
}

// DecodePlanStep decodes a planner's step message; a message without a run id is refused.
func DecodePlanStep(msg Message) (Event, PlanStep, error) {
	e, s, err := decodeAs[PlanStep](msg, 0)
	if err == nil && e.RunID == "" {
		err = missing(HeaderRunID)
	}
	return e, s, err
}
