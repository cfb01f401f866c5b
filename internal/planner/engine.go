package planner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/internal/planner/budget"
	"github.com/toolfleet/toolfleet/internal/planner/runstore"
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
	runs *runstore.Store
	rlog *runstore.Log
	// budgets charges and reserves over the runs' trees (package budget).
	budgets *budget.Tree
	// payloads stores what goes by reference (claim check): run contexts (runcontext.go).
	payloads *jsutil.Payloads
	cat      *catalogView
	// index summarizes every stored run for the lists (runindex.go), fed by watchRuns.
	index *runIndex

	consumers []consumer

	// replica names this replica uniquely, in the leases of the steps it takes (local.go).
	replica string
	// local runs the steps this replica takes itself (local.go).
	local localSteps

	mu        sync.Mutex
	deadlines map[string]time.Time // running runs by id, for the timeout sweeper
	leases    map[string]leaseDue  // leased steps by run id, for the lease sweeper

	m *metrics
	// win is the window of the planner's asynchronous publishes: every one goes through
	// it, waiting for room when JetStream falls behind; admit refuses new runs while it
	// stays full (admission.go).
	win   *jsutil.Window
	admit *admission
	// tracer makes the runs' and model calls' spans (trace.go).
	tracer trace.Tracer
	// runSpans holds the invoke_agent spans of the runs this replica started, by run id,
	// until the run finishes (see trace.go).
	runSpans sync.Map
	// storing holds, by run id, a channel closed when this replica has stored the state
	// of a step whose calls went out before it (see takeStep): a result that comes back
	// first waits for it here rather than going back to the stream.
	storing sync.Map
}

// publishAckTimeout is how long the planner's asynchronous publishes wait for their
// PubAck.
const publishAckTimeout = 5 * time.Second

// New connects a planner to JetStream, creating the streams, consumers and buckets it
// needs if they are missing, and loads the tool catalog. Runs may be started as soon as
// it returns; Run takes their steps.
func New(ctx context.Context, nc *nats.Conn, cfg Config) (*Planner, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Metrics)
	if err != nil {
		return nil, fmt.Errorf("planner: metrics: %w", err)
	}
	// Run events are published without waiting for their acknowledgement (emit): a
	// failure to store one is logged here.
	// An asynchronous publish whose PubAck never comes (sent to a server that died) fails
	// after publishAckTimeout instead of waiting for ever; at most maxPendingPublishes
	// wait for theirs (admission.go).
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(publishAckTimeout),
		jetstream.WithPublishAsyncMaxPending(maxPendingPublishes),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, m *nats.Msg, err error) {
			// A twin of the event being stored (10158) is stored, or its own publisher says.
			if strings.HasPrefix(m.Subject, "toolfleet.event.") && !jsutil.IsAlreadyAnswered(err) && !jsutil.IsWriteInProgress(err) {
				cfg.Log.Warn().Err(err).Str("subject", m.Subject).Msg("run event not stored")
			}
		}))
	if err != nil {
		return nil, fmt.Errorf("planner: jetstream: %w", err)
	}
	win := jsutil.NewWindow(js, m.publishWaited)
	// A planner started while its server is down or restarting waits for it.
	var kv jetstream.KeyValue
	var catalog *jsutil.Catalog
	var rlog *runstore.Log
	err = jsutil.RetrySetup(ctx, func(ctx context.Context) (err error) {
		if kv, err = jsutil.EnsurePlanner(ctx, js, cfg.Events); err != nil {
			return err
		}

		if rlog, err = runstore.NewLog(ctx, js, cfg.Events, win); err != nil {
			return err
		}
		catalog, err = jsutil.OpenCatalog(ctx, js, cfg.Events)
		return err
	}, func(err error, wait time.Duration) {
		cfg.Log.Warn().Err(err).Dur("retry_in", wait).Msg("planner start: cannot ensure streams and buckets yet (is NATS up?); retrying")
	})
	if err != nil {
		return nil, fmt.Errorf("planner: %w", err)
	}
	// The old run log stays until the operator deletes it: the planner's NATS user may not.
	if retired, err := jsutil.RunLogRetired(ctx, js); err != nil {
		cfg.Log.Warn().Err(err).Msg("planner start: cannot tell whether the old run log is retired")
	} else if retired {
		cfg.Log.Info().Str("stream", events.StreamRunLog).Str("journal", events.StreamJournal).
			Msg("the run log of an earlier version is copied into the journal and no longer used; delete it: nats stream rm " + events.StreamRunLog)
	}
	cfg.NoUsage = cfg.NoUsage || !ensureUsage(ctx, js, cfg)
	p := &Planner{win: win, admit: &admission{maxStarting: int64(cfg.MaxStarting), maxStall: cfg.MaxStall, win: win, m: m},
		nc: nc, js: js, cfg: cfg, log: cfg.Log.With().Str("planner", cfg.ID).Logger(),
		cat: newCatalogView(catalog, cfg.Log, m), deadlines: map[string]time.Time{}, leases: map[string]leaseDue{}, m: m,
		replica: cfg.ID + "-" + nuid.Next(), tracer: newTracer(cfg), index: newRunIndex()}
	// The parts the planner coordinates: the journal (the runs bucket and the run log),
	// the budgets of run trees over it, and the claim-check store.
	p.runs = runstore.NewStore(kv, js, nc)
	p.runs.Finished = p.finished
	p.runs.Charged = func(r *Run, cost float64) { m.charged(r.Tenant, cost) }
	p.runs.BeforeCommit = cfg.BeforeStepCommit
	p.runs.Batches = runstore.BatchesStagedInMemory(rlog.JournalConfig())
	p.rlog = rlog
	p.budgets = &budget.Tree{Runs: p.runs, Prices: cfg.Prices, Now: cfg.Now, ModelTimeout: cfg.ModelTimeout, Lease: p.leaseDuration()}
	p.payloads = jsutil.NewPayloads(js, cfg.Events)
	if err := p.cat.load(ctx); err != nil {
		return nil, fmt.Errorf("planner: catalog: %w", err)
	}
	if err := p.createConsumers(ctx); err != nil {
		return nil, fmt.Errorf("planner: %w", err)
	}
	return p, nil
}

// consumer is one of the planner's durable consumers and what handles its messages.
type consumer struct {
	name   string
	cons   jetstream.Consumer
	handle func(context.Context, jetstream.Msg)
}

// createConsumers creates (or updates) the planner's durable consumers. It runs in New,
// before any run can start, so that no result or approval request of a run is published
// before the consumer that must see it exists (results and events are read from new
// messages on, not from a week of history).
func (p *Planner) createConsumers(ctx context.Context) error {
	// Their ack wait is the step lease, not the calls' AckWait: a message held by a
	// replica that died moves within it, and one being handled is kept alive (Run).
	specs := []struct {
		name   string
		handle func(context.Context, jetstream.Msg)
	}{
		{events.PlannerStepsConsumer, p.handleAdvance},
		{events.PlannerResultsConsumer, p.handleResult},
		{events.PlannerApprovalsConsumer, p.handleApprovalRequest},
	}
	for _, c := range specs {
		streams, cc, err := p.cfg.Events.PlannerConsumer(c.name)
		if err != nil {
			return err
		}
		cc.AckWait = p.leaseDuration()
		for _, stream := range streams { // results: one consumer on each shard
			cons, err := p.js.CreateOrUpdateConsumer(ctx, stream, cc)
			if err != nil {
				return fmt.Errorf("consumer %s on %s: %w", c.name, stream, err)
			}
			p.consumers = append(p.consumers, consumer{name: c.name, cons: cons, handle: c.handle})
		}
	}
	return nil
}

// Connected reports whether the planner's NATS connection is up: whether it can serve
// (the API's readiness).
func (p *Planner) Connected() bool { return p.nc.IsConnected() }

// Run serves until ctx ends: it follows the tool catalog, takes run steps and results from
// their durable consumers, relays approval requests and ends runs whose time is up. On
// return, messages being handled were either finished or left for redelivery, and
// nothing Run started still runs.
func (p *Planner) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	// Run returns only once every goroutine it started has: the catalog and runs
	// watches, the sweeper, and the handlers of messages taken.
	var background sync.WaitGroup
	defer func() { cancel(); background.Wait() }()
	runsWatch, err := jsutil.Watch(ctx, p.runs.KV(), jetstream.AllKeys)
	if err != nil {
		return fmt.Errorf("planner: watch runs: %w", err)
	}
	background.Go(func() { p.watchRuns(ctx, runsWatch) })
	background.Go(func() { p.cat.follow(ctx) })
	background.Go(func() { p.countResults(ctx) })
	var handlers sync.WaitGroup
	var stops []jetstream.ConsumeContext
	defer func() {
		for _, cc := range stops {
			cc.Stop()
		}
		// No handler starts once a consumer is closed (Closed never fires on a closed
		// connection: do not hang on it).
		deadline := time.After(5 * time.Second)
		for _, cc := range stops {
			select {
			case <-cc.Closed():
			case <-deadline:
			}
		}
		handlers.Wait()
	}()
	for _, c := range p.consumers {
		handle, name := c.handle, c.name
		// Pulls are renewed within a second of a lost consumer leader, and consume errors
		// are logged at warn (see jsutil.ConsumeOptions).
		cc, err := c.cons.Consume(func(m jetstream.Msg) {
			handlers.Go(func() {
				// The message stays this replica's while it is handled, however long
				// (local.go): a step's claim, a result, an approval request.
				stop := p.keepAlive(m)
				defer stop()
				handle(ctx, m)
			})
		}, jsutil.ConsumeOptions(64, func(err error, repeats int) {
			p.log.Warn().Err(err).Str("consumer", name).Int("repeats", repeats).Msg("consume: pulling failed; pulling again")
		})...)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("planner: consume %s: %w", c.name, err)
		}
		stops = append(stops, cc)
	}
	// Steps this replica takes itself (local.go) run until it stops, before the
	// handlers are waited for: a step stopped midway goes to the plan stream.
	p.local.open(ctx)
	defer p.local.close()
	background.Go(func() { p.sweep(ctx) })
	background.Go(func() {
		if err := p.serveControl(ctx); err != nil {
			p.log.Error().Err(err).Msg("the run control endpoint over NATS is not served")
		}
	})
	<-ctx.Done()
	return nil
}

// newRunID returns a run id: "r" and a NUID, letters and digits only, so that a call id
// "<run>-<step>-<n>" can be split back into its run.
func newRunID() string { return "r" + nuid.Next() }

// plannerRun reports whether id can be the id of a planner run: a new run's (newRunID)
// or a nested run's (childID: "c", then its parent's id and the call's step and
// position, each after "_"). Callers of the fleet choose run ids of their own for the
// calls they make; their results need no look-up in the runs bucket.
func plannerRun(id string) bool {
	nested := 0
	for strings.HasPrefix(id[nested:], "c") {
		nested++
	}
	root, rest := id[nested:], ""
	if len(root) > newRunIDLen {
		root, rest = root[:newRunIDLen], root[newRunIDLen:]
	}
	if len(root) != newRunIDLen || root[0] != 'r' || !alphanumeric(root[1:]) {
		return false
	}
	// rest is "_<step>_<n>" once per level of nesting.
	numbers := strings.Split(rest, "_")
	if numbers[0] != "" || len(numbers)-1 != 2*nested {
		return false
	}
	for _, n := range numbers[1:] {
		if n == "" || strings.Trim(n, "0123456789") != "" {
			return false
		}
	}
	return true
}

var newRunIDLen = len(newRunID())

func alphanumeric(s string) bool {
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
			return false
		}
	}
	return true
}

// callID is the fleet id of the n-th call of step in run. It is deterministic so that a
// step resumed after a crash publishes the same ids and JetStream drops the repeats.
func callID(run string, step, n int) string { return fmt.Sprintf("%s-%d-%d", run, step, n) }

// runOfCall returns the run id part of a call id made by callID.
func runOfCall(call string) (string, bool) {
	run, _, ok := strings.Cut(call, "-")
	return run, ok && run != ""
}

// ack acknowledges m, logging a failure (the message is then redelivered, and handlers
// are idempotent).
func (p *Planner) ack(m jetstream.Msg) {
	if err := m.Ack(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		p.log.Warn().Err(err).Str("subject", m.Subject()).Msg("ack failed; the message will be redelivered")
	}
}
