package executor

import (
	"context"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/internal/tick"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// worker serves one tool on this replica: the tool class's shared durable consumers
// (one per calls stream, plus its approval answers' when it needs approval) and the
// places for its calls here, which the consumers are pulled for (slots.go).
type worker struct {
	def     tools.Definition
	slots   *slots
	pulling sync.WaitGroup
}

// startWorker sets the worker of def up under ctx and pulls its calls until ctx ends;
// its calls run under runCtx.
func (ex *Executor) startWorker(ctx, runCtx context.Context, def tools.Definition) (*worker, error) {
	n := ex.o.concurrency
	if c, ok := ex.o.concurrencyByTool[def.Name]; ok {
		n = c
	}
	w := &worker{def: def, slots: newSlots(n)}
	ex.bindLimits(def, w.slots)
	cc, err := ex.cfg.CallConsumer(def.Name)
	if err != nil {
		return nil, fmt.Errorf("executor: tool %s: %w", def.Name, err)
	}
	// One consumer on each calls stream (shard), each pulled for its share of the free
	// places (the server's random mapping fills the shards evenly).
	// Pulls are renewed within a second of a lost consumer leader (see
	// jsutil.PullHeartbeat): a tool waits out an election, not nats.go's 30s default.
	streams := ex.cfg.CallStreams()
	share := (n + len(streams) - 1) / len(streams)
	for _, stream := range streams {
		var cons jetstream.Consumer
		err = jsutil.RetrySetup(ctx, func(ctx context.Context) (err error) {
			cons, err = ex.js.CreateOrUpdateConsumer(ctx, stream, cc)
			return err
		}, ex.setupRetry("create the consumer of "+def.Name+" on "+stream))
		if err != nil {
			return nil, fmt.Errorf("executor: consumer for tool %s on %s: %w", def.Name, stream, err)
		}
		w.slots.add(cons, events.ConsumerName(def.Name)+" on "+stream, share, ex.handleCall)
	}
	if ex.needsApproval(def.Name) {
		ac, err := ex.cfg.ApprovalConsumer(def.Name)
		if err != nil {
			return nil, err
		}
		var acons jetstream.Consumer
		err = jsutil.RetrySetup(ctx, func(ctx context.Context) (err error) {
			acons, err = ex.js.CreateOrUpdateConsumer(ctx, events.StreamEvents, ac)
			return err
		}, ex.setupRetry("create the approval consumer of "+def.Name))
		if err != nil {
			return nil, fmt.Errorf("executor: approval consumer for tool %s: %w", def.Name, err)
		}
		// Answers are rare (a human's, a policy's): one at a time, in hand beyond the
		// places (most 0), so that the calls' pulls are not held back by an idle one.
		w.slots.add(acons, events.ApprovalConsumerName(def.Name), 0, ex.handleAnswer)
	}
	for _, p := range w.slots.pullers {
		w.pulling.Go(func() { ex.pull(ctx, runCtx, w, p) })
	}
	return w, nil
}

// consumeErr logs the errors of consumer's Consume at warn (identical ones at most every
// 10s, see jsutil.ConsumeOptions): a lost heartbeat, no responders or a leadership change
// is why a tool takes no calls, and an operator must see it.
func (ex *Executor) consumeErr(consumer string) func(error, int) {
	return func(err error, repeats int) {
		ex.o.log.Warn().Err(err).Str("consumer", consumer).Int("repeats", repeats).
			Msg("consume: pulling calls failed; pulling again")
	}
}

// keepAlive tells JetStream every third of the ack wait that msg is still being worked
// on, so that a long call is not redelivered to another replica. It returns the stop.
func (ex *Executor) keepAlive(msg jetstream.Msg) (stop func()) {
	return tick.Repeat(ex.cfg.AckWait.D()/3, func() { _ = msg.InProgress() })
}
