package picker

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/envflag"
	"github.com/toolfleet/toolfleet/internal/natsconn"
	"github.com/toolfleet/toolfleet/internal/pick"
)

// Config is what the picker binary is configured with; [Flags] fills it from flags and
// the environment.
type Config struct {
	NATS natsconn.Config
	// HTTPAddr serves /metrics and /healthz, e.g. ":9090"; empty disables it.
	HTTPAddr string
	// EmbeddingsURL, when set, enables the embedding and hybrid scorers against this
	// OpenAI-compatible server, with EmbeddingsModel and EmbeddingsAPIKey.
	EmbeddingsURL, EmbeddingsModel, EmbeddingsAPIKey string
	// StreamReplicas is the replicas of the embeddings bucket, created by the picker.
	StreamReplicas int
	// Timeout bounds scoring for requests without their own; see WithDefaultTimeout.
	Timeout time.Duration
	Log     zerolog.Logger
}

// Flags parses the picker's flags (defaults from TOOLFLEET_* environment variables).
func Flags(args []string) (Config, error) {
	var c Config
	fs := flag.NewFlagSet("picker", flag.ContinueOnError)
	c.NATS.Register(fs)
	c.NATS.Name = ServiceName
	fs.StringVar(&c.HTTPAddr, "http", envflag.String("TOOLFLEET_PICKER_HTTP", ":9090"), "address of /metrics and /healthz; empty disables them (env TOOLFLEET_PICKER_HTTP)")
	fs.StringVar(&c.EmbeddingsURL, "embeddings-url", os.Getenv("TOOLFLEET_EMBEDDINGS_URL"), "OpenAI-compatible server for the embedding and hybrid scorers (env TOOLFLEET_EMBEDDINGS_URL)")
	fs.StringVar(&c.EmbeddingsModel, "embeddings-model", envflag.String("TOOLFLEET_EMBEDDINGS_MODEL", "text-embedding-3-small"), "embedding model (env TOOLFLEET_EMBEDDINGS_MODEL)")
	c.EmbeddingsAPIKey = os.Getenv("TOOLFLEET_EMBEDDINGS_API_KEY") // never a flag: flags show in process lists
	var env envflag.Env
	replicas := env.Int("TOOLFLEET_STREAM_REPLICAS", 1)
	fs.IntVar(&c.StreamReplicas, "stream-replicas", replicas, "replicas of the embeddings bucket: 1 on one server, 3 in a cluster (env TOOLFLEET_STREAM_REPLICAS)")
	timeout := env.Duration("TOOLFLEET_PICKER_TIMEOUT", 2*time.Second)
	fs.DurationVar(&c.Timeout, "timeout", timeout, "scoring bound for requests without their own timeout (env TOOLFLEET_PICKER_TIMEOUT)")
	if err := env.Err(); err != nil {
		return c, fmt.Errorf("picker: %w", err)
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	switch {
	case c.StreamReplicas < 1 || c.StreamReplicas > 5:
		return c, fmt.Errorf("picker: stream replicas must be 1 to 5, got %d", c.StreamReplicas)
	case c.Timeout < 0:
		return c, fmt.Errorf("picker: timeout must not be negative, got %s", c.Timeout)
	}
	return c, c.NATS.Validate()
}

// Run connects to NATS, serves picks and the HTTP endpoints until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if cfg.NATS.Name == "" {
		cfg.NATS.Name = ServiceName
	}
	nc, err := cfg.NATS.Connect(cfg.Log)
	if err != nil {
		return fmt.Errorf("picker: %w", err)
	}
	defer nc.Close()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	opts := []Option{WithLogger(cfg.Log), WithRegistry(reg), WithDefaultTimeout(cfg.Timeout)}
	if cfg.EmbeddingsURL != "" {
		js, err := jetstream.New(nc)
		if err != nil {
			return fmt.Errorf("picker: jetstream: %w", err)
		}
		store, err := pick.NewKVVectorStore(ctx, js, max(cfg.StreamReplicas, 1))
		if err != nil {
			return err
		}
		emb := pick.NewEmbedding(&pick.OpenAIEmbedder{BaseURL: cfg.EmbeddingsURL, Model: cfg.EmbeddingsModel,
			APIKey: cfg.EmbeddingsAPIKey}, cfg.EmbeddingsModel, store, cfg.Log)
		opts = append(opts, WithEmbedding(emb))
	}
	svc, err := New(nc, opts...)
	if err != nil {
		return err
	}
	if cfg.HTTPAddr != "" {
		ln, err := net.Listen("tcp", cfg.HTTPAddr)
		if err != nil {
			return fmt.Errorf("picker: listen %s: %w", cfg.HTTPAddr, err)
		}
		srv := &http.Server{Handler: svc.HTTPHandler(), ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				cfg.Log.Error().Err(err).Msg("http server failed")
			}
		}()
		defer srv.Close()
		cfg.Log.Info().Str("addr", ln.Addr().String()).Msg("serving /metrics and /healthz")
	}
	err = svc.Run(ctx)
	if err == nil {
		// Drain lets in-flight replies go out before the connection closes.
		_ = nc.Drain()
	}
	return err
}

// HTTPHandler serves /metrics (Prometheus) and /healthz (200 once the catalog is loaded
// and NATS connected, else 503).
func (s *Service) HTTPHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(s.o.registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if !s.Ready() {
			http.Error(w, "not ready: catalog not loaded or NATS disconnected", http.StatusServiceUnavailable)
			return
		}
		snap := s.catalog.Snapshot()
		fmt.Fprintf(w, "ok: %d tools, catalog version %d\n", snap.Len(), snap.Version())
	})
	return mux
}
