package planner

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/pkg/events"
)

// A run's event history as data (GET /v1/runs/{id}/events with Accept:
// application/json): the events stored so far, a page at a time, in the order of the
// events stream, for a reader who saves, compares or replays a run after it ended —
// where the SSE stream of the same path follows it live. A page is read by an ordered
// consumer from the cursor on and stops at the last event stored when it was asked,
// so it never waits for events to come.

// EventPage is a page of a run's events, oldest first; Next, when set, is the cursor of
// the next page (the stream sequence of the page's last event).
type EventPage struct {
	Events []HistoryEvent `json:"events"`
	Next   string         `json:"next,omitempty"`
}

// HistoryEvent is a stored run event: its sequence on the events stream (the SSE id),
// its kind, and its data (an events.RunEvent).
type HistoryEvent struct {
	Seq  uint64          `json:"seq"`
	What string          `json:"what"`
	Data json.RawMessage `json:"data"`
}

// historyFetchWait bounds the wait for a page's messages, which are all stored: the
// fetch asks for no more than the consumer has pending.
const historyFetchWait = 5 * time.Second

// ListEvents returns a page of run's events (run as [Planner.GetFor] returned it to the
// caller), from the one after cursor (a previous page's Next; empty: from the first),
// at most limit of them (0: DefaultPageSize).
func (p *Planner) ListEvents(ctx context.Context, run *Run, cursor string, limit int) (EventPage, error) {
	limit, err := CheckLimit(limit)
	if err != nil {
		return EventPage{}, err
	}
	var after uint64
	if cursor != "" {
		if after, err = strconv.ParseUint(cursor, 10, 64); err != nil {
			return EventPage{}, filterErrorf("cursor", "%q is not a cursor of this list (give the next of the previous page)", cursor)
		}
	}
	filter, err := events.RunEventsSubject(run.Tenant, run.ID)
	if err != nil {
		return EventPage{}, requestErrorf("%v", err)
	}
	occ := jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}, DeliverPolicy: jetstream.DeliverAllPolicy}
	if after > 0 {
		occ.DeliverPolicy, occ.OptStartSeq = jetstream.DeliverByStartSequencePolicy, after+1
	}
	cons, err := p.js.OrderedConsumer(ctx, events.StreamEvents, occ)
	if err != nil {
		return EventPage{}, err
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return EventPage{}, err
	}
	page := EventPage{Events: []HistoryEvent{}}
	want := min(uint64(limit), info.NumPending)
	if want == 0 {
		return page, nil
	}
	batch, err := cons.Fetch(int(want), jetstream.FetchMaxWait(historyFetchWait))
	if err != nil {
		return EventPage{}, err
	}
	var pending uint64
	for m := range batch.Messages() {
		_, what, _, ok := events.ParseRunEventSubject(m.Subject())
		meta, err := m.Metadata()
		if !ok || err != nil { // the filter makes this impossible; never act on a guess
			continue
		}
		data := m.Data()
		if e, err := events.Decode(m, 0); err == nil {
			data = e.Data
		}
		page.Events = append(page.Events, HistoryEvent{Seq: meta.Sequence.Stream, What: what, Data: data})
		pending = meta.NumPending
	}
	if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
		return EventPage{}, err
	}
	if n := len(page.Events); n > 0 && (pending > 0 || uint64(n) < want) {
		page.Next = strconv.FormatUint(page.Events[n-1].Seq, 10)
	}
	return page, nil
}
