package ops

import (
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/natsconn"
)

// Part is what every program runs on: its ops server, the registry that server's
// /metrics serves, and its NATS connection.
type Part struct {
	Server  *Server
	Metrics *prometheus.Registry
	NC      *nats.Conn
}

// StartPart starts the ops server on addr and connects to NATS as conn says. Close
// undoes both, the connection first.
func StartPart(addr string, conn natsconn.Config, log zerolog.Logger) (*Part, error) {
	metrics := NewRegistry()
	srv, err := Start(addr, metrics, log)
	if err != nil {
		return nil, err
	}
	nc, err := conn.Connect(log)
	if err != nil {
		srv.Close()
		return nil, err
	}
	return &Part{Server: srv, Metrics: metrics, NC: nc}, nil
}

// Close closes the connection and stops the ops server.
func (p *Part) Close() {
	p.NC.Close()
	p.Server.Close()
}
