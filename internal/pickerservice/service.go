package pickerservice

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/internal/tick"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/pick"
)

// Names on the wire.
const (
	// ServiceName is the micro service name.
	ServiceName = "toolfleet-picker"
	// ServiceVersion is the micro service version (semver).
	ServiceVersion = "0.1.0"
	// EndpointName is the name of the pick endpoint.
	EndpointName = "pick"
	// PickSubject is the subject of the pick endpoint (defined once, in pkg/events).
	PickSubject = events.PickSubject
	// QueueGroup is the queue group replicas share.
	QueueGroup = "toolfleet-picker"
	// CatalogBucket is the JetStream KV bucket of tool definitions that executors publish
	// (defined once, in pkg/events).
	CatalogBucket = events.BucketCatalog
)

// ErrInvalidOption reports a bad option of New.
var ErrInvalidOption = errors.New("picker: invalid option")

// Option configures a Service.
type Option func(*options) error

type options struct {
	log         zerolog.Logger
	scorers     map[string]pick.Scorer
	timeout     time.Duration
	concurrency int
	registry    *prometheus.Registry
	bucket      string
	warm        func(context.Context, *pick.Snapshot) error
	learned     *pick.Learned
}

// WithLogger sets the logger. Defaults to zerolog.Nop().
func WithLogger(l zerolog.Logger) Option {
	return func(o *options) error { o.log = l; return nil }
}

// WithScorer makes a scorer available to requests under name ("bm25" is always there).
func WithScorer(name string, s pick.Scorer) Option {
	return func(o *options) error {
		if name == "" || s == nil {
			return fmt.Errorf("%w: a scorer needs a name and a value", ErrInvalidOption)
		}
		o.scorers[name] = s
		return nil
	}
}

// WithEmbedding makes the embedding scorer available as "embedding" and the hybrid (RRF
// of BM25 and embeddings) as "hybrid", and embeds every tool after each catalog change
// so that picks find the vectors ready.
func WithEmbedding(e *pick.Embedding) Option {
	return func(o *options) error {
		if e == nil {
			return fmt.Errorf("%w: nil embedding scorer", ErrInvalidOption)
		}
		o.scorers["embedding"] = e
		o.scorers["hybrid"] = &pick.Hybrid{Semantic: e}
		o.warm = e.Warm
		return nil
	}
}

// WithDefaultTimeout bounds scoring for requests that set no timeout of their own; past
// it a pick falls back to registration order. Defaults to 2s; 0 means no bound.
func WithDefaultTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 {
			return fmt.Errorf("%w: timeout must not be negative, got %s", ErrInvalidOption, d)
		}
		o.timeout = d
		return nil
	}
}

// WithConcurrency is how many picks this replica serves at once: one micro endpoint each
// ("pick", then "pick-2", "pick-3", ... on the same subject and queue group), each
// serving its requests one at a time, so that `nats micro stats` counts every request,
// error and processing time as it was. Defaults to 1: a BM25 pick takes tens of
// microseconds; raise it (or add replicas) for the embedding and hybrid scorers, which
// wait on an HTTP call.
func WithConcurrency(n int) Option {
	return func(o *options) error {
		if n < 1 {
			return fmt.Errorf("%w: concurrency must be at least 1, got %d", ErrInvalidOption, n)
		}
		o.concurrency = n
		return nil
	}
}

// WithRegistry registers the service's metrics in r. Defaults to a private registry,
// available from [Service.Registry].
func WithRegistry(r *prometheus.Registry) Option {
	return func(o *options) error { o.registry = r; return nil }
}

// WithCatalogBucket overrides the catalog bucket name (tests and side-by-side fleets).
// Defaults to [CatalogBucket].
func WithCatalogBucket(name string) Option {
	return func(o *options) error {
		if name == "" {
			return fmt.Errorf("%w: empty bucket name", ErrInvalidOption)
		}
		o.bucket = name
		return nil
	}
}

// Service is one picker replica.
type Service struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	o       options
	catalog *pick.Catalog
	ready   atomic.Bool
	// replayed is set once the usage stream's records at start are learned.
	replayed atomic.Bool
	// serving counts the requests being served on goroutines of their own; stopped, set
	// when Run returns, ends that (see handle).
	stopMu  sync.Mutex
	stopped bool
	serving sync.WaitGroup
	m       *metrics
}

// New prepares a replica on nc; Run starts it.
func New(nc *nats.Conn, opts ...Option) (*Service, error) {
	o := options{log: zerolog.Nop(), scorers: map[string]pick.Scorer{"bm25": pick.BM25{}},
		timeout: 2 * time.Second, concurrency: 1, bucket: CatalogBucket}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if o.registry == nil {
		o.registry = prometheus.NewRegistry()
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("picker: jetstream: %w", err)
	}
	cat, err := pick.NewCatalog(nil)
	if err != nil {
		return nil, err
	}
	s := &Service{nc: nc, js: js, o: o, catalog: cat}
	s.m, err = newMetrics(o.registry)
	if err != nil {
		return nil, err
	}
	if o.learned != nil {
		if err := o.registry.Register(tuningCollector{o.learned}); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Registry returns the registry holding the service's metrics.
func (s *Service) Registry() *prometheus.Registry { return s.o.registry }

// Ready reports whether the catalog has been loaded and the service is answering.
func (s *Service) Ready() bool { return s.ready.Load() && s.usageReplayed() && s.nc.IsConnected() }

// usageReplayed reports whether the usage stream has been replayed (true when the
// service does not learn).
func (s *Service) usageReplayed() bool { return s.o.learned == nil || s.replayed.Load() }

// Catalog returns the live catalog the service picks from.
func (s *Service) Catalog() *pick.Catalog { return s.catalog }

// Run waits for the catalog bucket, watches it and serves picks until ctx ends, then
// stops the micro service (finishing the requests in flight) and returns nil; it returns
// an error when the service cannot be set up or the watch fails.
func (s *Service) Run(ctx context.Context) error {
	kv, err := s.catalogBucket(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	ctx, stopWatch := context.WithCancel(ctx) // the watch ends with Run, however Run ends
	defer stopWatch()
	changes, err := jsutil.NewCatalog(kv, events.Config{}).Watch(ctx)
	if err != nil {
		return fmt.Errorf("picker: watch %s: %w", s.o.bucket, err)
	}

	svc, err := micro.AddService(s.nc, micro.Config{Name: ServiceName, Version: ServiceVersion,
		Description: "ranks the toolfleet tool catalog against a request (pickTools)",
		QueueGroup:  QueueGroup})
	if err != nil {
		return fmt.Errorf("picker: add service: %w", err)
	}
	s.stopMu.Lock()
	s.stopped = false // a Service may be run again
	s.stopMu.Unlock()
	// Stop unsubscribes, then the requests in flight finish.
	defer func() {
		if err := svc.Stop(); err != nil { // an endpoint not drained: the requests it holds go unanswered
			s.o.log.Warn().Err(err).Msg("picker: stop the service")
		}
		s.stopMu.Lock()
		s.stopped = true
		s.stopMu.Unlock()
		s.serving.Wait()
	}()
	for i := range s.o.concurrency {
		name := EndpointName
		if i > 0 {
			name = fmt.Sprintf("%s-%d", EndpointName, i+1)
		}
		if err := svc.AddEndpoint(name, micro.HandlerFunc(s.handle), micro.WithEndpointSubject(PickSubject),
			micro.WithEndpointMetadata(map[string]string{"format": "application/json"})); err != nil {
			return fmt.Errorf("picker: add endpoint: %w", err)
		}
	}
	// The server has the endpoint's subscription once a flush returns; only then may the
	// replica report ready.
	if err := s.nc.FlushTimeout(10 * time.Second); err != nil {
		return fmt.Errorf("picker: flush subscriptions: %w", err)
	}
	s.o.log.Info().Str("subject", PickSubject).Str("bucket", s.o.bucket).Msg("picker serving")
	if s.o.learned != nil {
		var following sync.WaitGroup
		defer following.Wait()
		defer stopWatch() // before the wait, however Run ends
		replayed := make(chan struct{})
		following.Go(func() {
			// The learned index is rebuilt and tuned by its Run from the end of the
			// replay on (tuning half a log would choose on part of it), until Run ends.
			select {
			case <-replayed:
			case <-ctx.Done():
				return
			}
			s.replayed.Store(true)
			if err := s.o.learned.Run(ctx, s.catalog); err != nil {
				s.o.log.Error().Err(err).Msg("picker: learned index not kept fresh (picks rebuild it themselves)")
			}
		})
		following.Go(func() {
			done := sync.OnceFunc(func() { close(replayed) })
			if err := s.followUsage(ctx, done); err != nil && ctx.Err() == nil {
				// Picks go on with what was learned (nothing, when the stream could not be
				// opened); the program's logs say why no more is.
				s.o.log.Error().Err(err).Msg("picker: usage stream no longer followed")
				done()
			}
		})
	}
	return s.watch(ctx, changes)
}

// catalogBucket opens the catalog bucket, waiting for it to exist: the parts that own
// the fleet's streams and buckets create it (jsutil.Ensure); the picker may only read
// it. A server that is down or restarting is waited for too (each failure logged); it
// gives up only when ctx ends.
func (s *Service) catalogBucket(ctx context.Context) (jetstream.KeyValue, error) {
	b := tick.Backoff{First: 50 * time.Millisecond, Max: 2 * time.Second}
	logged := false
	for {
		kv, err := s.js.KeyValue(ctx, s.o.bucket)
		if err == nil {
			return kv, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		wait := b.Next()
		if !errors.Is(err, jetstream.ErrBucketNotFound) {
			s.o.log.Warn().Err(err).Str("bucket", s.o.bucket).Dur("retry_in", wait).Msg("cannot open the catalog bucket yet (is NATS up?); retrying")
		} else if !logged {
			s.o.log.Info().Str("bucket", s.o.bucket).Msg("waiting for the catalog bucket (created by executors)")
			logged = true
		}
		if !tick.Sleep(ctx, wait) {
			return nil, ctx.Err()
		}
	}
}
