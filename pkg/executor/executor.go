package executor

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Executor runs the calls of the tools in its registry, taken from JetStream, and
// publishes their results. Create it with [New], start it with [Executor.Run]. Any
// number of Executors (replicas) serving the same tools share the work.
type Executor struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	reg    *tools.Registry
	o      options
	cfg    events.Config
	source string
	m      *metrics

	inflight  jetstream.KeyValue
	approvals jetstream.KeyValue
	// limits is nil unless a served tool declares a limit (see limits.go).
	limits *limiter
	// calls are the calls streams (one per shard) the janitor reads; lookups find
	// stored results, one queue per results shard.
	calls   []jetstream.Stream
	lookups []*resultLookups
	// cancels hears and finds the cancels of calls (cancel.go).
	cancels *cancels
	// payloads stores outputs too large for a result by reference (claimcheck.go).
	payloads *jsutil.Payloads

	ready     chan struct{} // closed once Run serves every tool
	readyOnce sync.Once
	catalog   *jsutil.Catalog
	workers   map[string]*worker
	// secrets are each tool's resolved secrets, by tool name; see [tools.Secret].
	secrets map[string]tools.Secrets
	// waits says, by tool name, why its calls wait for an approval (absent: they run);
	// set once in Run before any call is taken.
	waits map[string]string

	// runDone is closed when calls in flight are cancelled (the grace period is over):
	// results still being retried then give up and their calls are handed back.
	runDone <-chan struct{}

	// tracer makes the calls' execute_tool spans (trace.go).
	tracer trace.Tracer

	// handlers run the calls on reused goroutines (handlers.go).
	handlers *handlers

	mu       sync.Mutex // guards stopping and wg.Add
	stopping bool
	quit     chan struct{} // closed once stopping: calls waiting for a place are handed back
	wg       sync.WaitGroup
	// held are the messages (heldKey) this replica holds, taken and not settled yet: a
	// delivery of one of them again is not taken twice (take).
	held sync.Map
}

// New returns an executor serving every tool of reg over nc. It checks the options; it
// does not touch the server until [Executor.Run].
func New(nc *nats.Conn, reg *tools.Registry, opts ...Option) (*Executor, error) {
	if nc == nil {
		return nil, fmt.Errorf("%w: nil NATS connection", ErrInvalidOption)
	}
	if reg == nil || len(reg.Definitions()) == 0 {
		return nil, fmt.Errorf("%w: the registry has no tools to serve", ErrInvalidOption)
	}
	o := defaultOptions()
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	for tool := range o.policy {
		if _, ok := reg.Lookup(tool); !ok {
			return nil, invalid("policy hook of %s: this executor does not serve that tool", tool)
		}
	}
	cfg := o.stream.WithDefaults()
	if o.maxAckPending > 0 {
		cfg.MaxAckPending = o.maxAckPending
	}
	secrets, err := resolveSecrets(reg)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096), jetstream.WithPublishAsyncTimeout(publishTryTimeout))
	if err != nil {
		return nil, fmt.Errorf("executor: jetstream: %w", err)
	}
	m, err := newMetrics(o.metrics)
	if err != nil {
		return nil, err
	}
	return &Executor{nc: nc, js: js, reg: reg, o: o, cfg: cfg, m: m, secrets: secrets, payloads: jsutil.NewPayloads(js, cfg),
		tracer: newTracer(o), handlers: newHandlers(), source: "/toolfleet/executor/" + o.id, ready: make(chan struct{}), quit: make(chan struct{})}, nil
}

// Ready is closed once Run serves every tool: the streams exist, the tools are in the
// catalog and each tool's consumer is being consumed. A readiness probe waits for it.
func (ex *Executor) Ready() <-chan struct{} { return ex.ready }

// ID is the replica's id, as written in results.
func (ex *Executor) ID() string { return ex.o.id }

// Run ensures the streams, publishes the served tools to the catalog and runs calls
// until ctx ends. Then it stops taking calls, lets the calls in flight finish within the
// grace period, cancels and hands back (Nak) the ones still running, waits for the
// results already being published, and returns nil. Start-up failures are returned.
// Nothing Run started runs after it returns: the catalog refresh, the janitor and the
// approval sweeps have stopped too.
func (ex *Executor) Run(ctx context.Context) (err error) {
	// A stop requested while the executor is still setting up is a stop, not a failure:
	// whatever was set up is torn down below, and nothing was taken yet.
	defer func() {
		if err != nil && ctx.Err() != nil {
			err = nil
		}
	}()
	if err := jsutil.RetrySetup(ctx, ex.setUp, ex.setupRetry("ensure streams and buckets")); err != nil {
		return fmt.Errorf("executor: %w", err)
	}

	// runCtx is the context calls run under; it outlives ctx by the grace period, so
	// calls in flight can finish after shutdown starts. The result look-ups serve calls
	// until the last one is done, so they stop with it.
	runCtx, cancelRun := context.WithCancel(context.WithoutCancel(ctx))
	ex.runDone = runCtx.Done()
	var lookups sync.WaitGroup
	defer func() { cancelRun(); lookups.Wait() }()
	for _, stream := range ex.cfg.ResultStreams() {
		l := newLookups(ex.nc, stream)
		ex.lookups = append(ex.lookups, l)
		lookups.Go(func() { l.run(runCtx) })
	}
	// The background work (catalog refresh, janitor, approval sweeps) stops before the
	// calls in flight are waited for, and Run returns only once all of it has.
	bgCtx, cancelBackground := context.WithCancel(context.WithoutCancel(ctx))
	var background sync.WaitGroup
	stopBackground := func() { cancelBackground(); background.Wait() }
	defer stopBackground()

	defs := ex.reg.Definitions()
	ex.waits = approvalReasons(ex.reg, defs)
	// Cancels are heard before any call is taken.
	if ex.cancels, err = ex.listenCancels(ctx, defs); err != nil {
		return err
	}
	defer ex.cancels.close()
	lookups.Go(func() { ex.cancels.lookups.run(runCtx) })
	if err := ex.publishCatalog(ctx, defs); err != nil {
		return err
	}
	background.Go(func() {
		ex.catalog.Refresh(bgCtx, defs, func(err error) { ex.o.log.Warn().Err(err).Msg("refresh catalog") })
	})

	// The pulls end with ctx, or at a failed start.
	pullCtx, stopPulling := context.WithCancel(ctx)
	defer stopPulling()
	startErr := ex.startWorkers(pullCtx, runCtx, defs)
	if startErr == nil {
		ex.serve(ctx, bgCtx, &background)
	}
	// Shutdown, also after a failed start: calls already taken must finish or go back.
	ex.shutDown(stopPulling, stopBackground, cancelRun)
	if startErr != nil {
		return startErr // nil after all if ctx ended (see the deferred check above)
	}
	ex.o.log.Info().Str("executor", ex.o.id).Msg("executor stopped")
	return nil
}

// approvalReasons says, by tool name, why the calls of defs wait for an approval
// (absent: they run).
func approvalReasons(reg *tools.Registry, defs []tools.Definition) map[string]string {
	waits := make(map[string]string)
	for _, def := range defs {
		if why := reg.ApprovalReason(def.Name); why != "" {
			waits[def.Name] = why
		}
	}
	return waits
}

// publishCatalog puts defs in the catalog, trying again until ctx ends. It comes before
// any call is taken: the janitors of other replicas must see the tools before any call
// of them is old enough to be answered no_such_tool.
func (ex *Executor) publishCatalog(ctx context.Context, defs []tools.Definition) error {
	err := jsutil.RetrySetup(ctx, func(ctx context.Context) error {
		return ex.catalog.PutAll(ctx, defs)
	}, ex.setupRetry("publish the catalog"))
	if err != nil {
		return fmt.Errorf("executor: %w", err)
	}
	return nil
}

// startWorkers starts the worker of each tool of defs, pulling its calls under pullCtx
// and running them under runCtx, until one cannot start. ex.workers holds the ones
// started, whose pulls stopPulls ends.
func (ex *Executor) startWorkers(pullCtx, runCtx context.Context, defs []tools.Definition) error {
	ex.workers = make(map[string]*worker, len(defs))
	for _, def := range defs {
		w, err := ex.startWorker(pullCtx, runCtx, def)
		if err != nil {
			return err
		}
		ex.workers[def.Name] = w
	}
	return nil
}

// serve starts the background work of the workers (each approval sweep, the janitor)
// under bgCtx, owned by background, says the executor is ready, and waits for ctx to
// end.
func (ex *Executor) serve(ctx, bgCtx context.Context, background *sync.WaitGroup) {
	for _, w := range ex.workers {
		if ex.needsApproval(w.def.Name) {
			background.Go(func() { ex.sweepApprovals(bgCtx, w) })
		}
	}
	background.Go(func() { ex.janitor(bgCtx) })
	for name := range ex.workers {
		ex.m.serve(name, 1)
	}
	ex.readyOnce.Do(func() { close(ex.ready) })
	ex.o.log.Info().Str("executor", ex.o.id).Int("tools", len(ex.workers)).Msg("executor running")
	<-ctx.Done()
	for name := range ex.workers { // it stops serving them now
		ex.m.serve(name, -1)
	}
}

// shutDown stops taking calls and the background work, lets the calls in flight finish
// within the grace period (then cancelRun cancels the rest, which are handed back),
// and waits for the results being published, 5s at most. It returns once the pulls have
// ended too.
func (ex *Executor) shutDown(stopPulling, stopBackground func(), cancelRun context.CancelFunc) {
	ex.o.log.Info().Str("executor", ex.o.id).Msg("executor stopping")
	ex.mu.Lock()
	ex.stopping = true
	close(ex.quit)
	ex.mu.Unlock()
	pullsDone := ex.stopPulls(stopPulling)
	stopBackground()
	ex.waitInFlight(cancelRun)
	ex.handlers.stop()
	select {
	case <-ex.js.PublishAsyncComplete():
	case <-time.After(5 * time.Second):
		ex.o.log.Warn().Msg("results still unacknowledged at shutdown; their calls will be redelivered")
	}
	<-pullsDone
}

// stopPulls ends the workers' pulls and returns a channel closed once every one has
// returned. Each consumer's last pull ends on its own within pullExpiry, its calls
// handed back (slots.go); stopPulls waits for that up to 5s longer, so that a pull that
// does not end (on a connection that is closed, say) does not hold up the calls in
// flight: the caller waits for the channel once they are done.
func (ex *Executor) stopPulls(stopPulling func()) <-chan struct{} {
	stopPulling()
	done := make(chan struct{})
	go func() {
		for _, w := range ex.workers {
			w.pulling.Wait()
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(pullExpiry + 5*time.Second):
		ex.o.log.Warn().Msg("pulls still running past their expiry; the shutdown goes on and waits for them last")
	}
	return done
}

// setUp ensures the streams and buckets and opens what the executor uses of them.
func (ex *Executor) setUp(ctx context.Context) (err error) {
	if err := jsutil.Ensure(ctx, ex.js, ex.cfg); err != nil {
		return err
	}
	if ex.inflight, err = ex.js.KeyValue(ctx, events.BucketInflight); err != nil {
		return fmt.Errorf("open %s: %w", events.BucketInflight, err)
	}
	if ex.approvals, err = ex.js.KeyValue(ctx, events.BucketApprovals); err != nil {
		return fmt.Errorf("open %s: %w", events.BucketApprovals, err)
	}
	ex.calls = ex.calls[:0]
	for _, name := range ex.cfg.CallStreams() {
		calls, err := ex.js.Stream(ctx, name)
		if err != nil {
			return fmt.Errorf("open %s: %w", name, err)
		}
		ex.calls = append(ex.calls, calls)
	}
	if err := ex.setUpLimits(ctx); err != nil {
		return err
	}
	ex.catalog, err = jsutil.OpenCatalog(ctx, ex.js, ex.cfg)
	return err
}

// setupRetry logs a start-up step that failed and will be tried again.
func (ex *Executor) setupRetry(what string) func(error, time.Duration) {
	return func(err error, wait time.Duration) {
		ex.o.log.Warn().Err(err).Dur("retry_in", wait).Msg("executor start: cannot " + what + " yet (is NATS up?); retrying")
	}
}

// waitInFlight waits for the calls in flight for the grace period, then cancels the
// rest (they hand their messages back) and waits for them to return.
func (ex *Executor) waitInFlight(cancelRun context.CancelFunc) {
	done := make(chan struct{})
	go func() { ex.wg.Wait(); close(done) }()
	select {
	case <-done:
		return
	case <-time.After(ex.o.grace):
	}
	ex.o.log.Warn().Dur("grace", ex.o.grace).Msg("grace period over: cancelling calls in flight and handing them back")
	cancelRun()
	<-done
}

// track registers a call handler; false once the executor is stopping.
func (ex *Executor) track() bool {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if ex.stopping {
		return false
	}
	ex.wg.Add(1)
	return true
}
