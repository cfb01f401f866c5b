package picker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/pick"
)

// Config is what the picker binary is configured with.
type Config struct {
	// NATSURL is the server to connect to. Defaults to nats.DefaultURL.
	NATSURL string
	// CredsFile is a NATS credentials file (JWT and nkey seed); empty for none.
	CredsFile string
	// TLSCert and TLSKey are a client certificate; TLSCA a CA file to trust. Empty for none.
	TLSCert, TLSKey, TLSCA string
	// HTTPAddr serves /metrics and /healthz, e.g. ":9090"; empty disables it.
	HTTPAddr string
	// EmbeddingsURL, when set, enables the embedding and hybrid scorers against this
	// OpenAI-compatible server, with EmbeddingsModel and EmbeddingsAPIKey.
	EmbeddingsURL, EmbeddingsModel, EmbeddingsAPIKey string
	// Timeout bounds scoring for requests without their own; see WithDefaultTimeout.
	Timeout time.Duration
	Log     zerolog.Logger
}

// Run connects to NATS, serves picks and the HTTP endpoints until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if cfg.NATSURL == "" {
		cfg.NATSURL = nats.DefaultURL
	}
	nopts := []nats.Option{nats.Name(ServiceName), nats.MaxReconnects(-1),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { cfg.Log.Warn().Err(err).Msg("nats disconnected") }),
		nats.ReconnectHandler(func(nc *nats.Conn) { cfg.Log.Info().Str("url", nc.ConnectedUrl()).Msg("nats reconnected") })}
	if cfg.CredsFile != "" {
		nopts = append(nopts, nats.UserCredentials(cfg.CredsFile))
	}
	if cfg.TLSCert != "" || cfg.TLSKey != "" {
		nopts = append(nopts, nats.ClientCert(cfg.TLSCert, cfg.TLSKey))
	}
	if cfg.TLSCA != "" {
		nopts = append(nopts, nats.RootCAs(cfg.TLSCA))
	}
	nc, err := nats.Connect(cfg.NATSURL, nopts...)
	if err != nil {
		return fmt.Errorf("picker: connect %s: %w", cfg.NATSURL, err)
	}
	defer nc.Close()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	opts := []Option{WithLogger(cfg.Log), WithRegistry(reg), WithDefaultTimeout(cfg.Timeout)}
	if cfg.EmbeddingsURL != "" {
		js, err := jetstreamFor(nc)
		if err != nil {
			return err
		}
		store, err := pick.NewKVVectorStore(ctx, js)
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
		fmt.Fprintf(w, "ok: %d tools, catalog version %d\n", s.catalog.Snapshot().Len(), s.catalog.Snapshot().Version())
	})
	return mux
}
