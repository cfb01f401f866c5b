package planner

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/tick"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// The tools' recent calls (GET /v1/tools' "recent", toolstats.go) are counted from the
// broker: every replica reads the results streams from recentWindow ago on, with an
// ordered consumer per shard, and counts each result stored there by its tool, status
// and executor. So a call counts once it has its result, whoever made it (a planner's
// run on any replica, a client calling the fleet straight), and a replica that starts
// counts the window's calls it did not see. What it costs: each replica reads every
// result once more (its own durable consumer shares them between replicas); the
// result's data is decoded into three fields, its output skipped.

// resultFacts is what the count reads of a result.
type resultFacts struct {
	Status   events.Status `json:"status"`
	Tool     string        `json:"tool"`
	Executor string        `json:"executor"`
}

// countResults counts the results of the window and then each new one, until ctx ends.
func (p *Planner) countResults(ctx context.Context) {
	done := make(chan struct{})
	streams := p.cfg.Events.ResultStreams()
	for _, stream := range streams {
		go func() {
			defer func() { done <- struct{}{} }()
			p.countStream(ctx, stream)
		}()
	}
	for range streams {
		<-done
	}
}

// countStream counts the results stored in stream, from recentWindow ago on, until ctx
// ends; it starts again (from where it was) when the consumer cannot be made.
func (p *Planner) countStream(ctx context.Context, stream string) {
	b := tick.Backoff{First: 100 * time.Millisecond, Max: 5 * time.Second, Jitter: 0.2}
	start := p.cfg.Now().Add(-recentWindow)
	for ctx.Err() == nil {
		cons, err := p.js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{events.AllResults}, DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &start})
		if err == nil {
			var cc jetstream.ConsumeContext
			if cc, err = cons.Consume(func(m jetstream.Msg) { p.countResult(m) }); err == nil {
				<-ctx.Done()
				cc.Stop()
				return
			}
		}
		p.log.Warn().Err(err).Str("stream", stream).Msg("counting the tools' recent calls: cannot read the results; trying again")
		if !b.Sleep(ctx) {
			return
		}
		start = p.cfg.Now().Add(-recentWindow)
	}
}

// countResult counts the result m in its tool's recent calls.
func (p *Planner) countResult(m jetstream.Msg) {
	meta, err := m.Metadata()
	if err != nil {
		return
	}
	e, err := events.Decode(m, 0)
	if err != nil || e.Type != events.TypeResult {
		return
	}
	var r resultFacts
	if e.DataAs(&r) != nil || r.Tool == "" {
		return
	}
	p.index.stats.add(r.Tool, meta.Timestamp, r.Status != events.StatusOK, r.Executor, p.cfg.Now())
}
