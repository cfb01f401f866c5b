package planner

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/toolfleet/toolfleet/internal/envflag"
	"github.com/toolfleet/toolfleet/internal/natsconn"
	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// ServeConfig configures the planner binary: where NATS is, where the HTTP API listens,
// and which models runs may use.
type ServeConfig struct {
	NATS natsconn.Config
	// HTTPAddr is the API's listen address. Env TOOLFLEET_HTTP_ADDR; default :8080.
	HTTPAddr string
	// Token, when set, protects the API with a bearer token. Env TOOLFLEET_API_TOKEN.
	Token string
	// Scripts are scripted models by name, "name=path" (repeatable flag -script).
	Scripts []string
	// StreamReplicas is the replicas of streams and buckets. Env TOOLFLEET_STREAM_REPLICAS;
	// default 1.
	StreamReplicas int
	// UsePicker asks the toolfleet-picker service for candidates on large tool sets.
	UsePicker bool
	Log       zerolog.Logger
}

// Flags parses the planner's flags and environment.
func Flags(args []string) (ServeConfig, error) {
	var c ServeConfig
	var env envflag.Env
	fs := flag.NewFlagSet("planner", flag.ContinueOnError)
	c.NATS.Register(fs)
	fs.StringVar(&c.HTTPAddr, "http-addr", envflag.String("TOOLFLEET_HTTP_ADDR", ":8080"), "HTTP API listen address (env TOOLFLEET_HTTP_ADDR)")
	c.Token = os.Getenv("TOOLFLEET_API_TOKEN")
	fs.Func("script", "a scripted model, name=path to its YAML or JSON script (repeatable)", func(s string) error {
		if !strings.Contains(s, "=") {
			return fmt.Errorf("want name=path, got %q", s)
		}
		c.Scripts = append(c.Scripts, s)
		return nil
	})
	fs.IntVar(&c.StreamReplicas, "stream-replicas", env.Int("TOOLFLEET_STREAM_REPLICAS", 1), "replicas of streams and buckets: 1 on one server, 3 in a cluster (env TOOLFLEET_STREAM_REPLICAS)")
	fs.BoolVar(&c.UsePicker, "picker", true, "ask the toolfleet-picker service for candidates when a run has many tools")
	if err := env.Err(); err != nil {
		return c, fmt.Errorf("planner: %w", err)
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	c.NATS.Name = "toolfleet-planner"
	return c, nil
}

// Models builds the models a planner serves: the one TOOLFLEET_MODEL names (with its
// keys from the environment), and every scripted model. It is an error to have none.
func (c ServeConfig) Models() (map[string]provider.Model, string, error) {
	models := map[string]provider.Model{}
	def := ""
	m, err := provider.FromEnv()
	switch {
	case err == nil:
		models[m.Name()] = m
		def = m.Name()
	case !errors.Is(err, provider.ErrNoModel):
		return nil, "", err
	}
	for _, s := range c.Scripts {
		name, path, _ := strings.Cut(s, "=")
		sm, err := provider.LoadScripted(path)
		if err != nil {
			return nil, "", err
		}
		models[name] = sm
		if def == "" {
			def = name
		}
	}
	if len(models) == 0 {
		return nil, "", fmt.Errorf("no model: set TOOLFLEET_MODEL (e.g. openai/gpt-4o-mini, anthropic/claude-sonnet-4-5, ollama/llama3.1) or give -script name=path")
	}
	return models, def, nil
}

// Serve runs the planner binary until ctx ends: connect, serve runs and the HTTP API,
// then shut down gracefully.
func Serve(ctx context.Context, c ServeConfig) error {
	models, def, err := c.Models()
	if err != nil {
		return err
	}
	nc, err := c.NATS.Connect(c.Log)
	if err != nil {
		return err
	}
	defer nc.Close()
	cfg := Config{Models: models, DefaultModel: def, Events: events.Config{Replicas: c.StreamReplicas}, Log: c.Log}
	if c.UsePicker {
		cfg.Picker = NewPickerClient(nc, 2*time.Second)
	}
	p, err := New(ctx, nc, cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", c.HTTPAddr)
	if err != nil {
		return fmt.Errorf("planner: listen %s: %w", c.HTTPAddr, err)
	}
	srv := &http.Server{Handler: p.Handler(c.Token), ReadHeaderTimeout: 10 * time.Second}
	c.Log.Info().Str("addr", ln.Addr().String()).Str("default_model", def).Msg("planner API listening")
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return p.Run(gctx) })
	g.Go(func() error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return srv.Shutdown(shut)
	})
	err = g.Wait()
	if dErr := nc.Drain(); dErr != nil && err == nil {
		err = dErr
	}
	return err
}
