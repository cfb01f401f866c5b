package executor

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/tick"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// worker serves one tool on this replica: the tool class's shared durable consumer and a
// semaphore bounding the calls running here.
type worker struct {
	def       tools.Definition
	sem       chan struct{}
	consumers []jetstream.ConsumeContext
}

// startWorker sets the worker of def up under ctx; its calls run under runCtx.
func (ex *Executor) startWorker(ctx, runCtx context.Context, def tools.Definition) (*worker, error) {
	n := ex.o.concurrency
	if c, ok := ex.o.concurrencyByTool[def.Name]; ok {
		n = c
	}
	w := &worker{def: def, sem: make(chan struct{}, n)}
	ex.bindLimits(def, w.sem)
	cc, err := ex.cfg.CallConsumer(def.Name)
	if err != nil {
		return nil, fmt.Errorf("executor: tool %s: %w", def.Name, err)
	}
	// One consumer on each calls stream (shard). Pull as many as may run, no more (split
	// over the shards, which the server's random mapping fills evenly): a call waiting in
	// a client buffer is a call another replica could be running.
	// Pulls are renewed within a second of a lost consumer leader (see
	// events.ConsumeOptions): a tool waits out an election, not nats.go's 30s default.
	streams := ex.cfg.CallStreams()
	pull := max(1, (n+len(streams)-1)/len(streams))
	for _, stream := range streams {
		var cons jetstream.Consumer
		err = events.RetrySetup(ctx, func(ctx context.Context) (err error) {
			cons, err = ex.js.CreateOrUpdateConsumer(ctx, stream, cc)
			return err
		}, ex.setupRetry("create the consumer of "+def.Name+" on "+stream))
		if err != nil {
			w.stop()
			return nil, fmt.Errorf("executor: consumer for tool %s on %s: %w", def.Name, stream, err)
		}
		consume, err := cons.Consume(func(msg jetstream.Msg) { ex.dispatch(runCtx, w, msg, ex.handleCall) },
			events.ConsumeOptions(pull, ex.consumeErr(events.ConsumerName(def.Name)+" on "+stream))...)
		if err != nil {
			w.stop()
			return nil, fmt.Errorf("executor: consume tool %s on %s: %w", def.Name, stream, err)
		}
		w.consumers = append(w.consumers, consume)
	}
	if ex.needsApproval(def.Name) {
		ac, err := ex.cfg.ApprovalConsumer(def.Name)
		if err != nil {
			w.stop()
			return nil, err
		}
		var acons jetstream.Consumer
		err = events.RetrySetup(ctx, func(ctx context.Context) (err error) {
			acons, err = ex.js.CreateOrUpdateConsumer(ctx, events.StreamEvents, ac)
			return err
		}, ex.setupRetry("create the approval consumer of "+def.Name))
		if err != nil {
			w.stop()
			return nil, fmt.Errorf("executor: approval consumer for tool %s: %w", def.Name, err)
		}
		answers, err := acons.Consume(func(msg jetstream.Msg) { ex.dispatch(runCtx, w, msg, ex.handleAnswer) },
			events.ConsumeOptions(n, ex.consumeErr(events.ApprovalConsumerName(def.Name)))...)
		if err != nil {
			w.stop()
			return nil, fmt.Errorf("executor: consume approvals of tool %s: %w", def.Name, err)
		}
		w.consumers = append(w.consumers, answers)
	}
	return w, nil
}

// consumeErr logs the errors of consumer's Consume at warn (identical ones at most every
// 10s, see events.ConsumeOptions): a lost heartbeat, no responders or a leadership change
// is why a tool takes no calls, and an operator must see it.
func (ex *Executor) consumeErr(consumer string) func(error, int) {
	return func(err error, repeats int) {
		ex.o.log.Warn().Err(err).Str("consumer", consumer).Int("repeats", repeats).
			Msg("consume: pulling calls failed; pulling again")
	}
}

// dispatch runs handle for msg under ctx on a goroutine of its own (which Run waits for)
// once a slot of w is free. While it waits for a slot it keeps msg alive; once the
// executor stops it hands msg back.
func (ex *Executor) dispatch(ctx context.Context, w *worker, msg jetstream.Msg, handle func(context.Context, *worker, jetstream.Msg)) {
	if !ex.track() {
		_ = msg.Nak()
		return
	}
	select {
	case w.sem <- struct{}{}:
	default:
		stop := ex.keepAlive(msg)
		w.sem <- struct{}{}
		stop()
	}
	ex.handlers.run(func() {
		defer ex.wg.Done()
		defer func() { <-w.sem }()
		handle(ctx, w, msg)
	})
}

// keepAlive tells JetStream every third of the ack wait that msg is still being worked
// on, so that a long call is not redelivered to another replica. It returns the stop.
func (ex *Executor) keepAlive(msg jetstream.Msg) (stop func()) {
	return tick.Repeat(ex.cfg.AckWait.D()/3, func() { _ = msg.InProgress() })
}

// stop stops the worker's consumers started so far (a start-up that failed half way).
func (w *worker) stop() {
	for _, c := range w.consumers {
		c.Stop()
	}
}
