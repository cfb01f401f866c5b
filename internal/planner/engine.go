package planner

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/pkg/events"
)

// Planner runs agent runs: it asks a model, publishes the model's tool calls to the fleet,
// gathers their results and asks again, until a stop condition ends the run. All state
// lives in JetStream, and every planner replica consumes the same durable consumers, so
// any replica continues any run and a restart loses nothing.
type Planner struct {
	nc   *nats.Conn
	js   jetstream.JetStream
	cfg  Config
	log  zerolog.Logger
	runs store
	cat  *catalogView

	mu        sync.Mutex
	deadlines map[string]time.Time // running runs by id, for the timeout sweeper
}

// New connects a planner to JetStream, creating the streams, consumers and buckets it
// needs if they are missing. Call Run to start serving.
func New(ctx context.Context, nc *nats.Conn, cfg Config) (*Planner, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("planner: jetstream: %w", err)
	}
	if err := events.Ensure(ctx, js, cfg.Events); err != nil {
		return nil, fmt.Errorf("planner: %w", err)
	}
	kv, err := ensurePlannerStorage(ctx, js, cfg.Events)
	if err != nil {
		return nil, fmt.Errorf("planner: %w", err)
	}
	catalog, err := events.OpenCatalog(ctx, js, cfg.Events)
	if err != nil {
		return nil, fmt.Errorf("planner: %w", err)
	}
	p := &Planner{nc: nc, js: js, cfg: cfg, log: cfg.Log.With().Str("planner", cfg.ID).Logger(),
		runs: store{kv: kv}, cat: newCatalogView(catalog, cfg.Log), deadlines: map[string]time.Time{}}
	return p, nil
}

// Run serves until ctx ends: it follows the tool catalog, takes run steps and results from
// their durable consumers, relays approval requests and ends runs whose time is up. On
// return, messages being handled were either finished or left for redelivery.
func (p *Planner) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := p.cat.start(ctx); err != nil {
		return fmt.Errorf("planner: catalog: %w", err)
	}
	if err := p.watchRuns(ctx); err != nil {
		return fmt.Errorf("planner: watch runs: %w", err)
	}
	type consumer struct {
		stream, name, filter string
		ackWait              time.Duration
		handle               func(context.Context, jetstream.Msg)
	}
	consumers := []consumer{
		// A step's model call may outlast the ack wait: in-progress acks keep it (keepAlive).
		{streamPlan, consumerPlan, planSubjectPrefix + ">", p.cfg.Events.AckWait.D(), p.handleAdvance},
		{events.StreamResults, consumerResults, "toolfleet.result.>", p.cfg.Events.AckWait.D(), p.handleResult},
		{events.StreamEvents, consumerApprovals, "toolfleet.event.approval.requested.>", p.cfg.Events.AckWait.D(), p.handleApprovalRequest},
	}
	var wg sync.WaitGroup
	var stops []jetstream.ConsumeContext
	for _, c := range consumers {
		cons, err := p.js.CreateOrUpdateConsumer(ctx, c.stream, jetstream.ConsumerConfig{
			Durable: c.name, FilterSubject: c.filter, AckPolicy: jetstream.AckExplicitPolicy,
			AckWait: c.ackWait, MaxDeliver: -1, MaxAckPending: 1000, DeliverPolicy: deliverPolicy(c.stream),
		})
		if err != nil {
			return fmt.Errorf("planner: consumer %s: %w", c.name, err)
		}
		handle := c.handle
		cc, err := cons.Consume(func(m jetstream.Msg) {
			wg.Add(1)
			go func() { defer wg.Done(); handle(ctx, m) }()
		}, jetstream.PullMaxMessages(64))
		if err != nil {
			return fmt.Errorf("planner: consume %s: %w", c.name, err)
		}
		stops = append(stops, cc)
	}
	go p.sweep(ctx)
	<-ctx.Done()
	for _, cc := range stops {
		cc.Stop()
	}
	wg.Wait()
	return nil
}

// deliverPolicy: a new planner consumer of results and events starts at new messages, not
// at a week of history; the plan stream is a work queue and starts at the beginning.
func deliverPolicy(stream string) jetstream.DeliverPolicy {
	if stream == streamPlan {
		return jetstream.DeliverAllPolicy
	}
	return jetstream.DeliverNewPolicy
}

// newRunID returns a run id: "r" and a NUID, letters and digits only, so that a call id
// "<run>-<step>-<n>" can be split back into its run.
func newRunID() string { return "r" + nuid.Next() }

// callID is the fleet id of the n-th call of step in run. It is deterministic so that a
// step resumed after a crash publishes the same ids and JetStream drops the repeats.
func callID(run string, step, n int) string { return fmt.Sprintf("%s-%d-%d", run, step, n) }

// runOfCall returns the run id part of a call id made by callID.
func runOfCall(call string) (string, bool) {
	for i := 0; i < len(call); i++ {
		if call[i] == '-' {
			return call[:i], i > 0
		}
	}
	return "", false
}

// ack acknowledges m, logging a failure (the message is then redelivered, and handlers
// are idempotent).
func (p *Planner) ack(m jetstream.Msg) {
	if err := m.Ack(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		p.log.Warn().Err(err).Str("subject", m.Subject()).Msg("ack failed; the message will be redelivered")
	}
}
