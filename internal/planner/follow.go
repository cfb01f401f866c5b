package planner

import (
	"context"
	"iter"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/pkg/events"
)

// FollowedEvent is a run event as a follower reads it from the events stream.
type FollowedEvent struct {
	// Seq is the event's sequence on the events stream: what a follower gives back to
	// resume after it (an SSE client's Last-Event-ID).
	Seq uint64
	// What is the event's kind: started, step_started, …, done (see the package doc).
	What string
	// Data is the CloudEvent's data, an events.RunEvent (the message as stored when it is
	// not a CloudEvent).
	Data []byte
}

// FollowEvents follows run's lifecycle events, in order, from its first one, or from the
// one after the stream sequence after when after is not 0: the events stored so far, then
// each as it comes, until ctx ends or the caller stops ranging (a run's events end with
// done). The error is for the follow's start (the consumer could not be created); an
// error while reading ends the sequence with it. The sequence is ranged once.
func (p *Planner) FollowEvents(ctx context.Context, run *Run, after uint64) (iter.Seq2[FollowedEvent, error], error) {
	filter, err := events.RunEventsSubject(run.Tenant, run.ID)
	if err != nil {
		return nil, requestErrorf("%v", err)
	}
	return p.follow(ctx, filter, jetstream.DeliverAllPolicy, after)
}

// FollowTenantEvents follows the lifecycle events of every run of caller's tenant as
// they come (the SSE stream GET /v1/events), or from the one after the stream sequence
// after when after is not 0, until ctx ends or the caller stops ranging. Each event is
// as [Planner.FollowEvents] gives it; RunEvent.RunID in its data names its run.
func (p *Planner) FollowTenantEvents(ctx context.Context, caller events.Identity, after uint64) (iter.Seq2[FollowedEvent, error], error) {
	filter, err := events.TenantRunEventsFilter(caller.Tenant)
	if err != nil {
		return nil, requestErrorf("%v", err)
	}
	return p.follow(ctx, filter, jetstream.DeliverNewPolicy, after)
}

// follow follows the run events on filter, delivered by policy, or from the one after
// the stream sequence after when after is not 0.
func (p *Planner) follow(ctx context.Context, filter string, policy jetstream.DeliverPolicy, after uint64) (iter.Seq2[FollowedEvent, error], error) {
	occ := jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}, DeliverPolicy: policy}
	if after > 0 {
		occ.DeliverPolicy, occ.OptStartSeq = jetstream.DeliverByStartSequencePolicy, after+1
	}
	cons, err := p.js.OrderedConsumer(ctx, events.StreamEvents, occ)
	if err != nil {
		return nil, err
	}
	return func(yield func(FollowedEvent, error) bool) {
		msgs, err := cons.Messages()
		if err != nil {
			yield(FollowedEvent{}, err)
			return
		}
		defer msgs.Stop()
		// A follower that goes away ends the wait in Next.
		defer context.AfterFunc(ctx, msgs.Stop)()
		for {
			m, err := msgs.Next()
			if err != nil {
				yield(FollowedEvent{}, err)
				return
			}
			_, what, _, ok := events.ParseRunEventSubject(m.Subject())
			if !ok { // the filter makes this impossible; never act on a guess
				continue
			}
			meta, _ := m.Metadata()
			var seq uint64
			if meta != nil {
				seq = meta.Sequence.Stream
			}
			data := m.Data()
			if e, err := events.Decode(m, 0); err == nil {
				data = e.Data
			}
			if !yield(FollowedEvent{Seq: seq, What: what, Data: data}, nil) {
				return
			}
		}
	}, nil
}

// SawDone reports whether a follower whose last event is the stream sequence seq has
// seen the done event of run: the run's events end with it, so there is nothing more to
// send.
func (p *Planner) SawDone(ctx context.Context, run *Run, seq uint64) bool {
	if run.Status != StatusDone {
		return false
	}
	subj, err := events.RunEventSubject(run.Tenant, run.ID, "done")
	if err != nil {
		return false
	}
	stream, err := p.js.Stream(ctx, events.StreamEvents)
	if err != nil {
		return false
	}
	m, err := stream.GetLastMsgForSubject(ctx, subj)
	return err == nil && m.Sequence <= seq
}
