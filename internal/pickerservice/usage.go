package pickerservice

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/pick"
)

// UsageScorer is the name requests give the learned scorer; it is also the scorer of a
// request that names none while the service learns.
const UsageScorer = "usage"

// WithLearning makes the service learn from the usage stream ([events.StreamUsage]):
// on start it replays the stream into l (Ready waits for the replay), then follows it.
// Picks that name no scorer, or "usage", rank with l.Scorer of their tenant
// (options.tenant); "bm25" still ranks cold.
func WithLearning(l *pick.Learned) Option {
	return func(o *options) error {
		if l == nil {
			return fmt.Errorf("%w: nil learned index", ErrInvalidOption)
		}
		o.learned = l
		return nil
	}
}

// Learned is what the service learns from, or nil when it does not learn.
func (s *Service) Learned() *pick.Learned { return s.o.learned }

// followUsage replays and follows the usage stream into the learned index until ctx
// ends; replayed is called once the records present at the start are folded in. An
// ordered consumer (ephemeral, restarted by the client after a gap) reads it: every
// replica learns every record.
func (s *Service) followUsage(ctx context.Context, replayed func()) error {
	var cons jetstream.Consumer
	err := jsutil.RetrySetup(ctx, func(ctx context.Context) error {
		if err := jsutil.EnsureUsage(ctx, s.js, events.Config{}); err != nil {
			return err
		}
		var err error
		cons, err = s.js.OrderedConsumer(ctx, events.StreamUsage, jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{events.AllUsage}, DeliverPolicy: jetstream.DeliverAllPolicy})
		return err
	}, func(err error, wait time.Duration) {
		s.o.log.Warn().Err(err).Dur("retry_in", wait).Msg("picker: cannot open the usage stream yet; retrying")
	})
	if err != nil {
		return err
	}
	// The records to replay are those up to the stream's last one now.
	stream, err := s.js.Stream(ctx, events.StreamUsage)
	if err != nil {
		return fmt.Errorf("picker: usage stream: %w", err)
	}
	start, last := time.Now(), stream.CachedInfo().State.LastSeq
	if last == 0 {
		replayed()
	}
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("picker: usage stream: %w", err)
	}
	defer context.AfterFunc(ctx, it.Stop)()
	for {
		m, err := it.Next()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return nil
			}
			return fmt.Errorf("picker: usage stream: %w", err)
		}
		s.learn(m)
		if last > 0 {
			if meta, err := m.Metadata(); err == nil && meta.Sequence.Stream >= last {
				last = 0
				s.o.learned.Refresh()
				st := s.o.learned.Stats()
				s.o.log.Info().Int64("records", st.Folded).Int64("dropped", st.Dropped).Int("tools", st.Tools).
					Dur("took", time.Since(start)).Msg("usage replayed")
				replayed()
			}
		}
	}
}

// learn folds one usage record in; one that does not decode is logged and skipped.
func (s *Service) learn(m jetstream.Msg) {
	_, u, err := events.DecodeUsage(m)
	if err == nil {
		err = s.o.learned.Learn(pick.Usage{Tenant: u.Tenant, Run: u.RunID, Tool: u.Tool, Request: u.Request,
			Key: u.ToolKey, At: u.At})
	}
	if err != nil {
		s.m.usage.WithLabelValues("dropped").Inc()
		s.o.log.Debug().Err(err).Str("subject", m.Subject()).Msg("usage record not learned")
		return
	}
	s.m.usage.WithLabelValues("learned").Inc()
}
