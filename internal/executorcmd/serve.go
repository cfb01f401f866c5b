package executorcmd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/executor"
)

// Serve runs the executor binary until ctx ends: it builds the registry, connects to
// NATS, serves /metrics, /healthz and /readyz, and runs the executor; on ctx's end the
// executor finishes or hands back its calls within the grace period and Serve returns
// nil.
func Serve(ctx context.Context, c Config, log zerolog.Logger) error {
	reg, err := c.Registry()
	if err != nil {
		return err
	}
	nc, err := c.NATS.Connect(log)
	if err != nil {
		return err
	}
	defer nc.Close()

	promReg := prometheus.NewRegistry()
	promReg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	ex, err := executor.New(nc, reg,
		executor.WithConcurrency(c.Concurrency),
		executor.WithGracePeriod(c.GracePeriod),
		executor.WithExecutorID(c.ExecutorID),
		executor.WithStreamConfig(events.Config{Replicas: c.StreamReplicas}),
		executor.WithMetrics(promReg),
		executor.WithLogger(log))
	if err != nil {
		return err
	}

	var srv *http.Server
	if c.MetricsAddr != "" {
		ln, err := net.Listen("tcp", c.MetricsAddr)
		if err != nil {
			return fmt.Errorf("metrics: listen %s: %w", c.MetricsAddr, err)
		}
		srv = &http.Server{Handler: probes(promReg, nc.IsConnected), ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				log.Error().Err(err).Msg("metrics server stopped")
			}
		}()
		log.Info().Str("addr", ln.Addr().String()).Msg("metrics, healthz and readyz listening")
	}
	names := make([]string, 0, reg.Len())
	for _, d := range reg.Definitions() {
		names = append(names, d.Name)
	}
	log.Info().Strs("tools", names).Str("executor", ex.ID()).Msg("executor starting")
	runErr := ex.Run(ctx)
	if srv != nil {
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	}
	if err := nc.Drain(); err != nil && runErr == nil {
		runErr = err
	}
	return runErr
}

// probes serves /metrics, /healthz (the process is alive) and /readyz (it is connected
// to NATS, so it can take calls).
func probes(reg *prometheus.Registry, connected func() bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !connected() {
			http.Error(w, "not connected to NATS", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	return mux
}
