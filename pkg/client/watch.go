package client

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/pkg/events"
)

// Watch is a sequence of events of one kind read from a stream, T being their data
// ([events.RunEvent], [events.ApprovalRequest]). It ends when the context it was made
// with ends, or at [Watch.Stop].
type Watch[T any] struct {
	w      *watcher
	ctx    context.Context
	decode func(events.Message) (events.Event, T, error)
}

// Next returns the next event and its data, waiting for it. An event that does not
// decode is returned with its error (an invalid_event *tools.Error); the watch goes on.
// Once the watch's context has ended Next returns its error, and after Stop
// [ErrStopped].
func (w *Watch[T]) Next() (events.Event, T, error) {
	m, err := w.w.next(w.ctx)
	if err != nil {
		var zero T
		return events.Event{}, zero, err
	}
	return w.decode(m)
}

// Stop ends the watch and frees its consumer.
func (w *Watch[T]) Stop() { w.w.stop() }

// ErrStopped is what [Watch.Next] returns after [Watch.Stop].
var ErrStopped = errors.New("client: watch stopped")

// FollowRun returns the lifecycle events of run, from its first, as a planner publishes
// them: started, step_started, text_delta and tool_call_started (the model's answer as
// it streams), model_answered, tool_called, tool_started (Executor, Attempt) and
// tool_progress (from the executors; Detail is a tools.Progress, rate-limited, the
// latest wins), tool_result or tool_error, approval_needed, approval_answered (an answer
// taken by the planner's API; Detail is its [events.Approval]), act_refused (from an
// executor: an approval answer or a cancel of one of the run's calls from a caller that
// may not act on it; Detail is an [events.RefusedAct]), loop_detected, done
// ([events.RunEvent], with its step and time At; an event's Type is [events.RunType] of
// its word, its Detail the planner's record; the planner's package doc has the table).
// The run's last event is "done". The watch ends when ctx ends.
func (c *Client) FollowRun(ctx context.Context, run string) (*Watch[events.RunEvent], error) {
	filter, err := events.RunEventsSubject(c.caller.Tenant, run)
	if err != nil {
		return nil, err
	}
	w, err := c.watch(ctx, events.StreamEvents, filter, jetstream.DeliverAllPolicy)
	if err != nil {
		return nil, fmt.Errorf("follow run %s: %w", run, err)
	}
	return &Watch[events.RunEvent]{w: w, ctx: ctx, decode: func(m events.Message) (events.Event, events.RunEvent, error) {
		e, _, r, err := events.DecodeRunEvent(m)
		return e, r, err
	}}, nil
}

// WatchApprovals returns the approval requests published from now on, of every tool, as
// executors park calls of unsafe tools — of the client's tenant only, for a client
// [WithIdentity]; answer each with [Client.Answer] before its ExpiresAt. The watch ends
// when ctx ends.
func (c *Client) WatchApprovals(ctx context.Context) (*Watch[events.ApprovalRequest], error) {
	filter, err := events.ApprovalRequestsFilter(c.caller.Tenant)
	if err != nil {
		return nil, err
	}
	w, err := c.watch(ctx, events.StreamEvents, filter, jetstream.DeliverNewPolicy)
	if err != nil {
		return nil, fmt.Errorf("watch approvals: %w", err)
	}
	return &Watch[events.ApprovalRequest]{w: w, ctx: ctx, decode: events.DecodeApprovalRequest}, nil
}

// watcher reads one filter of a stream with an ordered consumer: no durable state on the
// server, gone with the watcher.
type watcher struct {
	it      jetstream.MessagesContext
	stopped chan struct{}
	once    sync.Once
	unhook  func() bool
}

// watch starts reading filter on stream; the reading stops when ctx ends.
func (c *Client) watch(ctx context.Context, stream, filter string, deliver jetstream.DeliverPolicy) (*watcher, error) {
	cons, err := c.js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{filter}, DeliverPolicy: deliver})
	if err != nil {
		return nil, ctxErr(ctx, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return nil, err
	}
	w := &watcher{it: it, stopped: make(chan struct{})}
	w.unhook = context.AfterFunc(ctx, it.Stop)
	return w, nil
}

// next waits for the next message; ctx is the watch's context.
func (w *watcher) next(ctx context.Context) (jetstream.Msg, error) {
	m, err := w.it.Next()
	if err == nil {
		return m, nil
	}
	select {
	case <-w.stopped:
		return nil, ErrStopped
	default:
	}
	return nil, ctxErr(ctx, err)
}

func (w *watcher) stop() {
	w.once.Do(func() {
		close(w.stopped)
		w.unhook()
		w.it.Stop()
	})
}
