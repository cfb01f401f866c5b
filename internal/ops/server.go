package ops

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"
)

// Check is one condition of readiness: nil when it holds, else what is missing.
type Check func() error

// errStarting is /readyz's answer before the program has said what readiness means.
var errStarting = errors.New("starting")

// NewRegistry returns a Prometheus registry with the Go runtime and process collectors,
// to which a part adds its own.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Connected is ready while nc is connected to NATS.
func Connected(nc *nats.Conn) Check {
	return func() error {
		if !nc.IsConnected() {
			return fmt.Errorf("not connected to NATS (%s)", nc.Status())
		}
		return nil
	}
}

// All holds when every check holds, and otherwise says what each failing one misses.
func All(checks ...Check) Check {
	return func() error {
		var errs []error
		for _, c := range checks {
			if err := c(); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}
}

// Server is a program's ops server: /metrics, /healthz and /readyz.
type Server struct {
	http  *http.Server
	addr  string
	ready atomic.Pointer[Check]
	// serving is the goroutine of http.Serve, which Close waits for.
	serving sync.WaitGroup
}

// Start listens on addr and serves reg's metrics and the probes in the background until
// Close. An empty addr serves nothing, and the Server still takes SetReady and Close.
func Start(addr string, reg *prometheus.Registry, log zerolog.Logger) (*Server, error) {
	s := &Server{}
	if addr == "" {
		return s, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("ops server: listen %s: %w", addr, err)
	}
	s.addr = ln.Addr().String()
	s.http = &http.Server{Handler: s.handler(reg), ReadHeaderTimeout: 5 * time.Second}
	s.serving.Go(func() {
		if err := s.http.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Msg("ops server stopped")
		}
	})
	log.Info().Str("addr", s.addr).Msg("ops server listening: /metrics, /healthz, /readyz")
	return s, nil
}

// Addr is the address the server listens on (with the port chosen for ":0"), or empty
// when it is off.
func (s *Server) Addr() string { return s.addr }

// SetReady says what readiness means: /readyz answers 200 once every check passes.
// Until the first call it answers 503 "starting".
func (s *Server) SetReady(checks ...Check) {
	all := All(checks...)
	s.ready.Store(&all)
}

// Ready returns nil when every check passes, else the reasons.
func (s *Server) Ready() error {
	ready := s.ready.Load()
	if ready == nil {
		return errStarting
	}
	return (*ready)()
}

// Close stops serving, letting requests in progress finish for up to 5 seconds.
func (s *Server) Close() {
	if s.http == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.http.Shutdown(ctx); err != nil {
		_ = s.http.Close() // past 5s: the requests still in progress are cut (the listener is closed already)
	}
	s.serving.Wait()
}

func (s *Server) handler(reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := s.Ready(); err != nil {
			http.Error(w, "not ready: "+strings.ReplaceAll(err.Error(), "\n", "; "), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	return mux
}
