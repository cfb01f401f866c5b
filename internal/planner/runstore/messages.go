package runstore

import (
	"context"
	"fmt"
	"strconv"

	"github.com/toolfleet/toolfleet/internal/planner/runrec"
	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// MessageRecord is one record of messages added to a run after its start (a follow-up,
// a reminder): toolfleet.runlog.<run>.msg.<k>, written once. The k-th record is part of
// the run once its control state counts it (Injected > k); the model sees it at the
// first step asked after that (the step record's Seen says how many it saw).
type MessageRecord struct {
	Key      string             `json:"key,omitempty"`
	Messages []provider.Message `json:"messages"`
	// Tools is a change of the run's tools made with the messages.
	Tools *runrec.ToolsChange `json:"tools,omitempty"`
	// By is the caller who added the record: applying it makes the caller one of the
	// run's actors when it is not the owner (auth.go).
	By events.Identity `json:"by,omitzero"`
	// Edit, on a resume's record, edits the model's conversation before Messages join
	// it (pause.go); the run's own record of the conversation keeps the original.
	Edit *runrec.ConversationEdit `json:"edit,omitempty"`
}

// PutMessage writes message record k of run unless one is there, and reports whether
// this write stored it.
func (l *Log) PutMessage(ctx context.Context, run string, k int, rec *MessageRecord) (bool, error) {
	return l.putOnce(ctx, Subject(run, "msg", strconv.Itoa(k)), rec)
}

// Injection returns message record k of run (see [MessageRecord]).
func (l *Log) Injection(ctx context.Context, run string, k int) (*MessageRecord, error) {
	c := l.cache(run)
	l.mu.Lock()
	rec := c.injects[k]
	l.mu.Unlock()
	if rec != nil {
		return rec, nil
	}
	rec = &MessageRecord{}
	if err := l.get(ctx, l.log, Subject(run, "msg", strconv.Itoa(k)), rec); err != nil {
		return nil, fmt.Errorf("message record %d of run %s: %w", k, run, err)
	}
	l.mu.Lock()
	c.injects[k] = rec
	l.mu.Unlock()
	return rec, nil
}

// Injected appends to msgs the messages of records seen..upTo-1 of run and returns them
// with the count of records they cover: the run's record of its conversation, without
// the edits of resumes (see modelInjected).
func (l *Log) Injected(ctx context.Context, run string, msgs []provider.Message, seen, upTo int) ([]provider.Message, int, error) {
	return l.injectedAs(ctx, run, msgs, seen, upTo, false)
}

// ModelInjected is Injected as the model sees it: the edits of resumes applied.
func (l *Log) ModelInjected(ctx context.Context, run string, msgs []provider.Message, seen, upTo int) ([]provider.Message, int, error) {
	return l.injectedAs(ctx, run, msgs, seen, upTo, true)
}

func (l *Log) injectedAs(ctx context.Context, run string, msgs []provider.Message, seen, upTo int, edited bool) ([]provider.Message, int, error) {
	if upTo <= seen {
		return msgs, seen, nil
	}
	msgs = msgs[:len(msgs):len(msgs)] // appends copy: a cached slice is shared
	for k := seen; k < upTo; k++ {
		rec, err := l.Injection(ctx, run, k)
		if err != nil {
			return nil, seen, err
		}
		if edited && rec.Edit != nil {
			if msgs, err = rec.Edit.Apply(msgs); err != nil {
				return nil, seen, fmt.Errorf("%w: message record %d of run %s: %v", ErrNoRecord, k, run, err)
			}
		}
		msgs = append(msgs, rec.Messages...)
	}
	return msgs, upTo, nil
}
