package executorcli

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/internal/ops"
	"github.com/toolfleet/toolfleet/internal/telemetry"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/executor"
	"github.com/toolfleet/toolfleet/pkg/mcptool"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Run runs the executor program until ctx ends: it builds the registry (connecting to the
// tools file's MCP servers, see [Config.Tools]), serves the ops server, connects to NATS
// and runs the executor; on ctx's end the executor finishes or
// hands back its calls within the grace period and Run returns nil. /readyz answers 200
// once NATS is connected and every tool's consumer is being consumed.
//
// When an MCP server's tools change (added, changed or removed), a new executor over the
// registry as it is then takes over: it starts beside the running one (both consume the
// same durable consumers, as replicas do, so no call waits), and once it serves every
// tool, the previous one stops taking calls and finishes those in flight within the grace
// period. An executor builds its consumers and catalog entries when it starts, so this
// is how a new tool gets served and the catalog shows the new definitions; the entries
// of removed tools expire with the catalog's TTL.
func Run(ctx context.Context, c Config) error {
	log := c.Ops.Logger("executor")
	changed := make(chan struct{}, 1)
	reg, hooks, servers, err := c.Tools(ctx, log, func(server string, ch mcptool.Change) {
		if len(ch.Added)+len(ch.Updated)+len(ch.Removed) == 0 {
			return
		}
		log.Info().Str("mcp_server", server).Strs("added", ch.Added).Strs("updated", ch.Updated).Strs("removed", ch.Removed).
			Msg("the MCP server's tools changed; a new executor takes over to serve them")
		select {
		case changed <- struct{}{}:
		default:
		}
	})
	if err != nil {
		return err
	}
	defer servers.Close()
	c.PolicyHooks = hooks
	if c.Tracing, err = telemetry.Setup(ctx, "executor"); err != nil {
		return err
	}
	defer c.Tracing.Stop(log) // after the executor stopped: its last spans go out
	part, err := ops.StartPart(c.Ops.Addr, c.NATS, log)
	if err != nil {
		return err
	}
	defer part.Close()
	nc := part.NC
	var current atomic.Pointer[executor.Executor]
	part.Server.SetReady(ops.Connected(nc), func() error {
		ex := current.Load()
		if ex == nil {
			return errors.New("executor not created yet")
		}
		return Serving(ex)()
	})
	runErr := serveHandingOver(ctx, changed, log, func(ctx context.Context) (*running, error) {
		ex, err := New(nc, reg, c, part.Metrics, log)
		if err != nil {
			return nil, err
		}
		log.Info().Str("executor", ex.ID()).Strs("tools", toolNames(reg)).Int("concurrency", c.Concurrency).
			Dur("grace_period", c.GracePeriod).Msg("executor starting")
		return launch(ctx, ex, toolNames(reg)), nil
	}, func(ex *executor.Executor) { current.Store(ex) }, func(ctx context.Context, gone []string) {
		// A tool that nobody serves any more leaves the catalog now, not when its entry
		// expires, so that planners stop offering it and its calls are answered
		// no_such_tool after the usual wait.
		js, err := jetstream.New(nc)
		if err == nil {
			var cat *jsutil.Catalog
			if cat, err = jsutil.OpenCatalog(ctx, js, c.Events()); err == nil {
				for _, name := range gone {
					err = errors.Join(err, cat.Delete(ctx, name))
				}
			}
		}
		if err != nil {
			log.Warn().Err(err).Strs("tools", gone).Msg("cannot remove tools no longer served from the catalog; their entries expire")
		}
	})
	if err := nc.Drain(); err != nil && runErr == nil {
		runErr = err
	}
	return runErr
}

// handOverDelay lets a burst of list changes settle before a new executor takes over.
const handOverDelay = 500 * time.Millisecond

// running is an executor whose Run is under way.
type running struct {
	ex     *executor.Executor
	tools  []string // what it serves
	cancel context.CancelFunc
	done   chan error
}

func launch(ctx context.Context, ex *executor.Executor, tools []string) *running {
	ctx, cancel := context.WithCancel(ctx)
	r := &running{ex: ex, tools: tools, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- ex.Run(ctx) }()
	return r
}

// serveHandingOver runs the executor start makes until ctx ends or it fails; at each
// signal on changed it starts another and, once that one serves, stops the previous one
// and calls forget with the tools the previous one served and the new one does not.
// A replacement that cannot start is logged and the running executor goes on.
func serveHandingOver(ctx context.Context, changed <-chan struct{}, log zerolog.Logger,
	start func(context.Context) (*running, error), use func(*executor.Executor), forget func(context.Context, []string)) error {
	cur, err := start(ctx)
	if err != nil {
		return err
	}
	use(cur.ex)
	for {
		select {
		case err := <-cur.done:
			cur.cancel()
			return err
		case <-changed:
		}
		select {
		case err := <-cur.done:
			cur.cancel()
			return err
		case <-time.After(handOverDelay):
		}
		next, err := start(ctx)
		if err != nil {
			log.Error().Err(err).Msg("cannot create the executor taking over; the running one goes on")
			continue
		}
		select {
		case <-next.ex.Ready():
		case err := <-next.done:
			next.cancel()
			if ctx.Err() == nil {
				log.Error().Err(err).Msg("the executor taking over did not start; the running one goes on")
			}
			continue
		case err := <-cur.done:
			next.cancel()
			<-next.done
			cur.cancel()
			return err
		}
		use(next.ex)
		cur.cancel()
		if err := <-cur.done; err != nil {
			log.Warn().Err(err).Msg("the executor handed over stopped with an error")
		}
		var gone []string
		for _, name := range cur.tools {
			if !slices.Contains(next.tools, name) {
				gone = append(gone, name)
			}
		}
		if len(gone) > 0 {
			forget(ctx, gone)
		}
		log.Info().Str("executor", next.ex.ID()).Strs("no_longer_served", gone).Msg("executor handed over: the new one serves every tool")
		cur = next
	}
}

// Events is the JetStream settings the executor creates streams with.
func (c Config) Events() events.Config {
	return events.Config{Replicas: c.StreamReplicas, Shards: c.Shards}
}

// New builds the executor of c over nc and reg, its metrics on metrics (nil: none, and
// the hot path records nothing). It is the one place both the executor program and the
// all-in-one fleet turn settings into options.
func New(nc *nats.Conn, reg *tools.Registry, c Config, metrics *prometheus.Registry, log zerolog.Logger) (*executor.Executor, error) {
	opts := []executor.Option{
		executor.WithConcurrency(c.Concurrency),
		executor.WithGracePeriod(c.GracePeriod),
		executor.WithExecutorID(c.ExecutorID),
		executor.WithStreamConfig(c.Events()),
		executor.WithLogger(log),
		executor.WithOperatorRoles(c.OperatorRoles...),
	}
	if metrics != nil {
		opts = append(opts, executor.WithMetrics(metrics))
	}
	for tool, h := range c.PolicyHooks {
		opts = append(opts, executor.WithPolicyHook(tool, h))
	}
	if c.Tracing != nil {
		opts = append(opts, executor.WithTracerProvider(c.Tracing.Provider), executor.WithTraceContent(c.Tracing.CaptureContent))
	}
	return executor.New(nc, reg, opts...)
}

// Serving is the executor's own readiness: it holds once ex serves every tool
// (executor.Executor.Ready).
func Serving(ex *executor.Executor) ops.Check {
	return func() error {
		select {
		case <-ex.Ready():
			return nil
		default:
			return errors.New("executor not serving its tools yet")
		}
	}
}

func toolNames(reg *tools.Registry) []string {
	names := make([]string, 0, reg.Len())
	for _, d := range reg.Definitions() {
		names = append(names, d.Name)
	}
	return names
}
