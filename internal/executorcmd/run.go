package executorcmd

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/ops"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/executor"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Run runs the executor program until ctx ends: it builds the registry (connecting to the
// tools file's MCP servers, see [Config.Tools]), serves the ops server, connects to NATS
// and runs the executor; on ctx's end the executor finishes or
// hands back its calls within the grace period and Run returns nil. /readyz answers 200
// once NATS is connected and every tool's consumer is being consumed.
func Run(ctx context.Context, c Config) error {
	log := c.Ops.Logger("executor")
	reg, servers, err := c.Tools(ctx, log)
	if err != nil {
		return err
	}
	defer servers.Close()
	part, err := ops.StartPart(c.Ops.Addr, c.NATS, log)
	if err != nil {
		return err
	}
	defer part.Close()
	nc := part.NC
	ex, err := New(nc, reg, c, part.Metrics, log)
	if err != nil {
		return err
	}
	part.Server.SetReady(ops.Connected(nc), Serving(ex))
	log.Info().Str("executor", ex.ID()).Strs("tools", toolNames(reg)).Int("concurrency", c.Concurrency).
		Dur("grace_period", c.GracePeriod).Msg("executor starting")
	runErr := ex.Run(ctx)
	if err := nc.Drain(); err != nil && runErr == nil {
		runErr = err
	}
	return runErr
}

// Events is the JetStream settings the executor creates streams with.
func (c Config) Events() events.Config { return events.Config{Replicas: c.StreamReplicas} }

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
	}
	if metrics != nil {
		opts = append(opts, executor.WithMetrics(metrics))
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
