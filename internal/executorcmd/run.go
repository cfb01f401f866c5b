package executorcmd

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/ops"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/executor"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Run runs the executor program until ctx ends: it builds the registry, serves the ops
// server, connects to NATS and runs the executor; on ctx's end the executor finishes or
// hands back its calls within the grace period and Run returns nil. /readyz answers 200
// once NATS is connected and every tool's consumer is being consumed.
func Run(ctx context.Context, c Config) error {
	log := c.Ops.Logger("executor")
	reg, err := c.Registry()
	if err != nil {
		return err
	}
	metrics := ops.NewRegistry()
	srv, err := ops.Start(c.Ops.Addr, metrics, log)
	if err != nil {
		return err
	}
	defer srv.Close()
	nc, err := c.NATS.Connect(log)
	if err != nil {
		return err
	}
	defer nc.Close()
	ex, err := New(nc, reg, c, metrics, log)
	if err != nil {
		return err
	}
	started, err := ConsumersStarted(nc, reg)
	if err != nil {
		return err
	}
	srv.SetReady(ops.Connected(nc), started)
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

// ConsumersStarted is the executor's own readiness: it holds once every tool of reg has
// a pull request waiting on its call consumer, that is, the consumers were created and
// are being consumed. It is asked only until it first holds, because a busy replica may
// later have no request waiting. The server counts the requests of every replica, so a
// replica joining a running fleet can read ready a moment before its own consumers
// start; pkg/executor offers no signal of its own to ask instead.
func ConsumersStarted(nc *nats.Conn, reg *tools.Registry) (ops.Check, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	names := toolNames(reg)
	var started atomic.Bool
	return func() error {
		if started.Load() {
			return nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		for _, name := range names {
			cons, err := js.Consumer(ctx, events.StreamCalls, events.ConsumerName(name))
			if err != nil || cons.CachedInfo().NumWaiting == 0 {
				return fmt.Errorf("consumer of tool %s not started", name)
			}
		}
		started.Store(true)
		return nil
	}, nil
}

func toolNames(reg *tools.Registry) []string {
	names := make([]string, 0, reg.Len())
	for _, d := range reg.Definitions() {
		names = append(names, d.Name)
	}
	return names
}
