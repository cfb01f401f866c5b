// Package natstest starts real, embedded NATS servers with JetStream for tests: file
// storage in a temporary directory, a free port, and a restart on the same port and
// store directory, the way a crashed pod comes back with its volume.
//
// Most tests start with [StartJetStream] (a server, a connection and the fleet's streams
// and buckets) and wait for what they expect with [Eventually], never a bare sleep.
package natstest

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/toolfleet/toolfleet/pkg/events"
)

// Server is an embedded nats-server with JetStream that a test can stop and restart.
type Server struct {
	tb       testing.TB
	opts     server.Options
	srv      *server.Server
	mappings []events.SubjectMapping // applied again on a restart
}

// Start runs a JetStream server with file storage in t.TempDir() on a free loopback port.
// It is shut down when the test ends.
func Start(tb testing.TB) *Server {
	tb.Helper()
	return StartOnPort(tb, -1)
}

// StartOnPort is Start on a given port (-1 picks a free one): for a part that was
// started before its server, pointed at an address nothing listened on yet.
func StartOnPort(tb testing.TB, port int) *Server {
	tb.Helper()
	return StartWith(tb, func(o *server.Options) { o.Port = port })
}

// StartWith is Start with the server's options changed by opt first, e.g. a max_payload
// as small as a production server's (Start's is 8 MiB).
func StartWith(tb testing.TB, opt func(*server.Options)) *Server {
	tb.Helper()
	s := &Server{tb: tb, opts: server.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: tb.TempDir(),
		NoLog: true, NoSigs: true, MaxPayload: 8 << 20,
	}}
	opt(&s.opts)
	s.start()
	// Later restarts reuse the port the first start picked.
	s.opts.Port = s.srv.Addr().(*net.TCPAddr).Port
	return s
}

func (s *Server) start() {
	s.tb.Helper()
	srv, err := server.NewServer(&s.opts)
	if err != nil {
		s.tb.Fatalf("natstest: new server: %v", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		s.tb.Fatal("natstest: server not ready after 10s")
	}
	s.srv = srv
	s.tb.Cleanup(srv.Shutdown)
	if err := s.applyMappings(); err != nil {
		s.tb.Fatal(err)
	}
}

// MapCalls installs cfg's subject mappings (calls spread over its shards, see
// [events.Config.CallMappings]) in the server's global account, as a deployment's server
// configuration does; they are installed again on a Restart.
func (s *Server) MapCalls(cfg events.Config) {
	s.tb.Helper()
	s.mappings = cfg.CallMappings()
	if err := s.applyMappings(); err != nil {
		s.tb.Fatal(err)
	}
}

func (s *Server) applyMappings() error { return mapOn(s.srv, s.mappings) }

// MapCallsOn is [Server.MapCalls] on a server the test made itself.
func MapCallsOn(srv *server.Server, cfg events.Config) error { return mapOn(srv, cfg.CallMappings()) }

func mapOn(srv *server.Server, mappings []events.SubjectMapping) error {
	acc := srv.GlobalAccount()
	for _, m := range mappings {
		var dests []*server.MapDest
		for _, d := range m.Destinations {
			dests = append(dests, server.NewMapDest(d.Subject, d.Weight))
		}
		if err := acc.AddWeightedMappings(m.Source, dests...); err != nil {
			return fmt.Errorf("natstest: map %s: %w", m.Source, err)
		}
	}
	return nil
}

// URL is the client URL, stable across restarts.
func (s *Server) URL() string { return s.srv.ClientURL() }

// StoreDir is the JetStream storage directory, kept across restarts.
func (s *Server) StoreDir() string { return s.opts.StoreDir }

// Server returns the running server.
func (s *Server) Server() *server.Server { return s.srv }

// Shutdown stops the server and waits until it is down.
func (s *Server) Shutdown() {
	s.srv.Shutdown()
	s.srv.WaitForShutdown()
}

// Restart stops the server and starts it again on the same port and store directory.
func (s *Server) Restart() {
	s.tb.Helper()
	s.Shutdown()
	s.start()
}

// Connect returns a client connection that reconnects forever (so it survives a Restart)
// and is closed when the test ends.
func (s *Server) Connect(opts ...nats.Option) *nats.Conn {
	s.tb.Helper()
	opts = append([]nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(50 * time.Millisecond)}, opts...)
	nc, err := nats.Connect(s.URL(), opts...)
	if err != nil {
		s.tb.Fatalf("natstest: connect: %v", err)
	}
	s.tb.Cleanup(nc.Close)
	return nc
}
