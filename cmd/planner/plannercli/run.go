package plannercli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/toolfleet/toolfleet/internal/inspector"
	"github.com/toolfleet/toolfleet/internal/mcpedge"
	"github.com/toolfleet/toolfleet/internal/ops"
	"github.com/toolfleet/toolfleet/internal/planner"
	"github.com/toolfleet/toolfleet/internal/planner/plannerapi"
	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/internal/telemetry"
)

// Run runs the planner program until ctx ends: the ops server, NATS, the planner and its
// HTTP API with the MCP edge at /mcp (same tokens), then a graceful shutdown.
func Run(ctx context.Context, c Config) error {
	log := c.Ops.Logger("planner")
	models, def, err := c.Models()
	if err != nil {
		return ops.ConfigError(err) // a model unknown, or its key missing: exit 2
	}
	if c.Tracing, err = telemetry.Setup(ctx, "planner"); err != nil {
		return err
	}
	defer c.Tracing.Stop(log) // after the planner stopped: its last spans go out
	part, err := ops.StartPart(c.Ops.Addr, c.NATS, log)
	if err != nil {
		return err
	}
	defer part.Close()
	nc := part.NC
	p, err := New(ctx, nc, c, models, def, part.Metrics, log)
	if err != nil {
		return err
	}
	auth := plannerapi.Auth{Token: c.Token, Tokens: c.Tokens}
	edge, err := mcpedge.Start(ctx, nc, mcpedge.Config{Events: c.Events(), Auth: auth, OperatorRoles: c.OperatorRoles, Log: log})
	if err != nil {
		return err
	}
	defer edge.Close()
	ln, err := net.Listen("tcp", c.HTTPAddr)
	if err != nil {
		return fmt.Errorf("planner API: listen %s: %w", c.HTTPAddr, err)
	}
	// New has created the streams and consumers: runs can start.
	part.Server.SetReady(ops.Connected(nc))
	log.Info().Str("addr", ln.Addr().String()).Str("mcp", mcpedge.Path).Str("default_model", def).Bool("picker", c.UsePicker).Msg("planner API listening")
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return p.Run(gctx) })
	g.Go(func() error {
		return ServeAPI(gctx, ln, inspector.Mount(mcpedge.Mount(plannerapi.Handler(p, auth), edge.Handler())))
	})
	err = g.Wait()
	if dErr := nc.Drain(); dErr != nil && err == nil {
		err = dErr
	}
	return err
}

// New builds the planner of c over nc with the given models, def the default one. It is
// the one place both the planner program and the all-in-one fleet turn settings into a
// planner.Config.
func New(ctx context.Context, nc *nats.Conn, c Config, models map[string]provider.Model, def string,
	metrics *prometheus.Registry, log zerolog.Logger) (*planner.Planner, error) {
	cfg := planner.Config{Models: models, DefaultModel: def, Events: c.Events(), Log: log, Prices: c.Prices,
		OperatorRoles: c.OperatorRoles, ModelRoles: c.ModelRoles, NoUsage: !c.Usage, MaxStarting: c.MaxStarting, MaxStall: c.MaxStall,
		StepLease: c.StepLease}
	if metrics != nil { // a nil *Registry in the interface would not read as "none"
		cfg.Metrics = metrics
	}
	if c.Tracing != nil {
		cfg.TracerProvider = c.Tracing.Provider
	}
	if c.UsePicker {
		cfg.Picker = planner.NewPickerClient(nc, 2*time.Second)
	}
	return planner.New(ctx, nc, cfg)
}

// ServeAPI serves the planner's HTTP API h on ln until ctx ends, then shuts it down,
// letting requests in progress finish for up to 10 seconds.
func ServeAPI(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	failed := make(chan error, 1)
	go func() { failed <- srv.Serve(ln) }()
	select {
	case err := <-failed:
		return err
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := srv.Shutdown(shut)
	<-failed // Serve returns once Shutdown has closed the listener
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
