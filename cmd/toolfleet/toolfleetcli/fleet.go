package toolfleetcli

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/cmd/executor/executorcli"
	"github.com/toolfleet/toolfleet/cmd/picker/pickercli"
	"github.com/toolfleet/toolfleet/cmd/planner/plannercli"
	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/internal/natsconn"
	"github.com/toolfleet/toolfleet/internal/ops"
	"github.com/toolfleet/toolfleet/internal/planner"
	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/internal/telemetry"
	"github.com/toolfleet/toolfleet/pkg/events"
)

//go:embed demo.yaml
var demoScript []byte

// ScriptedModelName is the name of the offline scripted model in the fleet.
const ScriptedModelName = "scripted/demo"

// Options configure an all-in-one fleet.
type Options struct {
	// DataDir holds JetStream's files; empty: a temporary directory removed on Stop.
	DataDir string
	// NATSHost and NATSPort are where the embedded server listens; port -1 picks a free
	// one. Default 127.0.0.1 and -1.
	NATSHost string
	NATSPort int
	// SandboxRoot is the directory of the file tools; empty: a temporary one with a
	// sample file, removed on Stop.
	SandboxRoot string
	// HTTPAllowlist are the hosts http_get may reach (see builtin.Config); empty: no
	// http_get, so the demo needs no network.
	HTTPAllowlist []string
	// Log receives the parts' logs. Default: none.
	Log zerolog.Logger
	// Metrics receives the executor's and the picker's metrics. Default: none for the
	// executor, a private registry for the picker.
	Metrics *prometheus.Registry
	// Tracing is what the executor and the planner trace with. Default: their own
	// default, the global provider.
	Tracing *telemetry.Tracing
	// Model names the runs' default model as TOOLFLEET_MODEL does (a spec as
	// provider.New reads it, keys from the environment); empty: TOOLFLEET_MODEL, else
	// the scripted demo model. The scripted demo model is served either way.
	Model string
	// Prices is the planner's price table (see planner.LoadPrices): runs' costs and
	// limits.costBudget. Default: none.
	Prices planner.PriceTable
	// OperatorRoles may act on other roles' runs and calls of their tenant: the planner's
	// and the executor's (planner.Config.OperatorRoles, executor.WithOperatorRoles).
	OperatorRoles []string
	// ToolsFile is an executor tools file (see pkg/toolsfile): its command and HTTP
	// tools and MCP servers are served beside the built-ins. Empty: none.
	ToolsFile string
	// Admission bounds the planner's admission of new runs (-max-starting, -max-stall);
	// zero: the planner's defaults.
	Admission plannercli.Admission
}

// Fleet is an embedded JetStream server with an executor serving the built-in tools, the
// picker service and a planner, all in this process.
type Fleet struct {
	Server  *server.Server
	NC      *nats.Conn
	Planner *planner.Planner
	// Model is the name of the model runs use by default: the one TOOLFLEET_MODEL names,
	// or the scripted demo model.
	Model string
	// Sandbox is the directory of the file tools; DataDir holds JetStream's files.
	Sandbox, DataDir string
	// Tools are the names of the tools the executor serves, in registration order.
	Tools []string

	cancel  context.CancelFunc
	wg      sync.WaitGroup
	errs    chan error
	cleanup []func()
	ready   ops.Check
}

// Start starts the fleet; Stop ends it.
func Start(ctx context.Context, o Options) (f *Fleet, err error) {
	f = &Fleet{errs: make(chan error, 4)}
	defer func() {
		if err != nil {
			f.Stop()
		}
	}()
	if o.NATSHost == "" {
		o.NATSHost = "127.0.0.1"
	}
	if o.NATSPort == 0 {
		o.NATSPort = -1
	}
	f.DataDir, err = dirOrTemp(f, o.DataDir, "toolfleet-data-")
	if err != nil {
		return f, err
	}
	f.Sandbox, err = dirOrTemp(f, o.SandboxRoot, "toolfleet-sandbox-")
	if err != nil {
		return f, err
	}
	if o.SandboxRoot == "" {
		sample := "order 1: 17 widgets\norder 2: 25 widgets\n"
		if err := os.WriteFile(filepath.Join(f.Sandbox, "orders.txt"), []byte(sample), 0o644); err != nil {
			return f, err
		}
	}

	// The configuration is checked (the model, the tools file) before any port is
	// bound: a mistake is exit 2 with its own message, even where the ports are taken.
	models, def, err := models(o.Model)
	err = ops.ConfigError(err) // a model unknown, or its key missing: exit 2
	if err != nil {
		return f, err
	}
	f.Model = def
	// The parts are the programs' own building blocks, with the fleet's settings.
	// The executor and the planner decide who may act on a call with the same operator
	// roles (events.MayAct).
	exCfg := executorcli.Config{Concurrency: 64, ExecutorID: "allinone", GracePeriod: executorcli.DefaultGracePeriod,
		SandboxRoot: f.Sandbox, HTTPAllowlist: o.HTTPAllowlist, Tracing: o.Tracing, ToolsFile: o.ToolsFile,
		OperatorRoles: o.OperatorRoles}
	// As the executor program does (a bad tools file is a configuration error, exit 2):
	// the file's MCP servers run until the executor has stopped (Stop runs the cleanups
	// after the parts).
	reg, hooks, servers, err := exCfg.Tools(ctx, o.Log, nil)
	if err != nil {
		return f, err
	}
	f.cleanup = append(f.cleanup, servers.Close)
	exCfg.PolicyHooks = hooks
	for _, d := range reg.Definitions() {
		f.Tools = append(f.Tools, d.Name)
	}

	srv, err := server.NewServer(&server.Options{Host: o.NATSHost, Port: o.NATSPort, JetStream: true,
		StoreDir: f.DataDir, NoLog: true, NoSigs: true, MaxPayload: 8 << 20})
	if err != nil {
		return f, fmt.Errorf("embedded nats-server: %w", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		return f, errors.New("embedded nats-server not ready after 10s")
	}
	f.Server = srv
	f.cleanup = append(f.cleanup, func() { finishJetStreamAPI(srv); srv.Shutdown(); srv.WaitForShutdown() })
	connect := func(name string) (*nats.Conn, error) {
		nc, err := nats.Connect(srv.ClientURL(), nats.Name(name), nats.InProcessServer(srv), natsconn.LogErrors(o.Log))
		if err != nil {
			return nil, fmt.Errorf("connect %s: %w", name, err)
		}
		f.cleanup = append(f.cleanup, nc.Close)
		return nc, nil
	}
	if f.NC, err = connect("toolfleet"); err != nil {
		return f, err
	}

	exNC, err := connect("toolfleet-executor")
	if err != nil {
		return f, err
	}
	ex, err := executorcli.New(exNC, reg, exCfg, o.Metrics, o.Log)
	if err != nil {
		return f, err
	}
	pkNC, err := connect("toolfleet-picker")
	if err != nil {
		return f, err
	}
	pk, err := pickercli.NewService(ctx, pkNC, pickercli.Config{Timeout: 2 * time.Second, Learn: true}, o.Metrics, o.Log)
	if err != nil {
		return f, err
	}
	f.ready = ops.All(ops.Connected(f.NC), executorcli.Serving(ex), pickercli.Indexed(pk))
	plNC, err := connect("toolfleet-planner")
	if err != nil {
		return f, err
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	f.cancel = cancel
	f.serve(func() error { return ex.Run(runCtx) })
	f.serve(func() error { return pk.Run(runCtx) })
	// The executor creates the streams and the catalog; the planner starts once the
	// catalog lists the tools, so that the first run can name them.
	if err := waitCatalog(ctx, f.NC, exCfg.Events(), reg.Len()); err != nil {
		return f, err
	}
	p, err := plannercli.New(ctx, plNC, plannercli.Config{UsePicker: true, Usage: true, Tracing: o.Tracing,
		Prices: o.Prices, OperatorRoles: o.OperatorRoles, Admission: o.Admission}, models, def, o.Metrics, o.Log)
	if err != nil {
		return f, err
	}
	f.Planner = p
	f.serve(func() error { return p.Run(runCtx) })
	return f, nil
}

// models returns the offline models (the demo's script and the echo model, which a run
// picks by name) and, when spec (else TOOLFLEET_MODEL) names one, that model, which is
// then the default.
func models(spec string) (map[string]provider.Model, string, error) {
	s, err := provider.ParseScript(demoScript)
	if err != nil {
		return nil, "", err
	}
	scripted, err := provider.NewScripted(s)
	if err != nil {
		return nil, "", err
	}
	ms := map[string]provider.Model{ScriptedModelName: scripted, provider.EchoModelName: provider.NewEcho()}
	real, err := provider.FromEnv()
	if spec != "" {
		if real, err = provider.FromSpec(spec); err != nil {
			err = fmt.Errorf("-model (TOOLFLEET_MODEL) %s: %w", spec, err)
		}
	}
	switch {
	case errors.Is(err, provider.ErrNoModel):
		return ms, ScriptedModelName, nil
	case err != nil:
		return nil, "", err
	}
	ms[real.Name()] = real
	return ms, real.Name(), nil
}

func (f *Fleet) serve(run func() error) {
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		if err := run(); err != nil {
			f.errs <- err
		}
	}()
}

// Ready is the fleet's readiness: NATS connected, the executor's consumers started and
// the picker's index built. The planner is ready once Start has returned.
func (f *Fleet) Ready() error { return f.ready() }

// Err reports the first part that stopped with an error, if any.
func (f *Fleet) Err() <-chan error { return f.errs }

// Stop stops every part (the executor finishes or hands back its calls), then the server,
// and removes temporary directories.
func (f *Fleet) Stop() {
	if f.cancel != nil {
		f.cancel()
	}
	f.wg.Wait()
	for i := len(f.cleanup) - 1; i >= 0; i-- {
		f.cleanup[i]()
	}
	f.cleanup = nil
}

// finishJetStreamAPI waits, up to 5 seconds, until srv has served the JetStream API
// requests it took. A part stopped while it set up (an executor creating its streams
// when the fleet's start failed) has returned, but the server may still be creating what
// it asked for; a shutdown in the middle would leave that stream's store running.
func finishJetStreamAPI(srv *server.Server) {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		jsz, err := srv.Jsz(nil)
		if err != nil || jsz.API.Inflight == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func dirOrTemp(f *Fleet, dir, pattern string) (string, error) {
	if dir != "" {
		return dir, os.MkdirAll(dir, 0o755)
	}
	d, err := os.MkdirTemp("", pattern)
	if err != nil {
		return "", err
	}
	f.cleanup = append(f.cleanup, func() { _ = os.RemoveAll(d) })
	return d, nil
}

// waitCatalog waits until the catalog lists n tools.
func waitCatalog(ctx context.Context, nc *nats.Conn, cfg events.Config, n int) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	var cat *jsutil.Catalog
	for {
		if cat == nil { // the bucket exists once the executor has run jsutil.Ensure
			cat, _ = jsutil.OpenCatalog(ctx, js, cfg)
		}
		if cat != nil {
			if defs, err := cat.List(ctx); err == nil && len(defs) >= n {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the executor did not publish its tools: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
