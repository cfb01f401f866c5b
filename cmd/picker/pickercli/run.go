package pickercli

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/ops"
	"github.com/toolfleet/toolfleet/internal/pickerservice"
	"github.com/toolfleet/toolfleet/pkg/pick"
)

// Run runs the picker program until ctx ends: the ops server, NATS and the
// toolfleet-picker service.
func Run(ctx context.Context, c Config) error {
	log := c.Ops.Logger(pickerservice.ServiceName)
	part, err := ops.StartPart(c.Ops.Addr, c.NATS, log)
	if err != nil {
		return fmt.Errorf("picker: %w", err)
	}
	defer part.Close()
	nc := part.NC
	svc, err := NewService(ctx, nc, c, part.Metrics, log)
	if err != nil {
		return err
	}
	part.Server.SetReady(ops.Connected(nc), Indexed(svc))
	err = svc.Run(ctx)
	if err == nil {
		// Drain lets in-flight replies go out before the connection closes; one that
		// fails (the connection is gone) leaves nothing to do, and the stop is still clean.
		_ = nc.Drain()
	}
	return err
}

// NewService builds the picker service of c over nc, its metrics on metrics. It is the
// one place both the picker program and the all-in-one fleet turn settings into options.
func NewService(ctx context.Context, nc *nats.Conn, c Config, metrics *prometheus.Registry, log zerolog.Logger) (*pickerservice.Service, error) {
	opts := []pickerservice.Option{pickerservice.WithLogger(log), pickerservice.WithRegistry(metrics), pickerservice.WithDefaultTimeout(c.Timeout)}
	if c.EmbeddingsURL != "" {
		js, err := jetstream.New(nc)
		if err != nil {
			return nil, fmt.Errorf("picker: jetstream: %w", err)
		}
		store, err := pick.NewKVVectorStore(ctx, js, max(c.StreamReplicas, 1))
		if err != nil {
			return nil, err
		}
		emb := pick.NewEmbedding(&pick.OpenAIEmbedder{BaseURL: c.EmbeddingsURL, Model: c.EmbeddingsModel,
			APIKey: c.EmbeddingsAPIKey}, c.EmbeddingsModel, store, log)
		opts = append(opts, pickerservice.WithEmbedding(emb))
	}
	if c.Learn {
		l, err := pick.NewLearned(pick.LearnConfig{Share: c.ShareUsage})
		if err != nil {
			return nil, err
		}
		opts = append(opts, pickerservice.WithLearning(l))
	}
	return pickerservice.New(nc, opts...)
}

// errNotIndexed is the picker's own unreadiness.
var errNotIndexed = errors.New("catalog not indexed yet (the executors create its bucket)")

// Indexed is the picker's own readiness: its index of the catalog is built.
func Indexed(svc *pickerservice.Service) ops.Check {
	return func() error {
		if !svc.Ready() {
			return errNotIndexed
		}
		return nil
	}
}
