package planner

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolfleet/toolfleet/internal/provider"
)

// metrics are the planner's Prometheus collectors; a nil *metrics records nothing.
type metrics struct {
	started  prometheus.Counter
	finished *prometheus.CounterVec
	steps    prometheus.Counter
	model    *prometheus.HistogramVec
	tokens   *prometheus.CounterVec
	policy   *prometheus.CounterVec
	refused  *prometheus.CounterVec
	waits    prometheus.Histogram
}

func newMetrics(r prometheus.Registerer) (*metrics, error) {
	if r == nil {
		return nil, nil
	}
	m := &metrics{
		started: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "toolfleet", Subsystem: "planner",
			Name: "runs_started_total", Help: "Runs started."}),
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "toolfleet", Subsystem: "planner",
			Name: "runs_finished_total", Help: "Runs finished, by termination (completed, max_steps, timeout, ...)."}, []string{"termination"}),
		steps: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "toolfleet", Subsystem: "planner",
			Name: "steps_total", Help: "Model turns taken."}),
		model: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "toolfleet", Subsystem: "planner",
			Name: "model_call_duration_seconds", Help: "Time of one model call, by model and outcome (ok or error).",
			Buckets: prometheus.ExponentialBuckets(0.01, 2.5, 10)}, []string{"model", "outcome"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "toolfleet", Subsystem: "planner",
			Name: "tokens_total", Help: "Tokens used, by model and kind (input or output)."}, []string{"model", "kind"}),
		policy: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "toolfleet", Subsystem: "planner",
			Name: "policy_decisions_total", Help: "Calls a run's policy hook decided on, by decision (allow, deny, modify, invalid: a modification the schema refused) and by whom (hook, or onError when the hook gave no usable answer)."},
			[]string{"decision", "by"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "toolfleet", Subsystem: "planner",
			Name: "runs_refused_total", Help: "New runs refused with 429 before anything of them was stored, because the planner was saturated, by reason (stall: its writes waited for room longer than MaxStall; starting: MaxStarting runs were being started)."},
			[]string{"reason"}),
		waits: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "toolfleet", Subsystem: "planner",
			Name: "publish_wait_seconds", Help: "Time a write waited for room among the planner's unacknowledged publishes, for each write that found them at their bound (JetStream acknowledging more slowly than the planner writes).",
			Buckets: prometheus.ExponentialBuckets(0.2, 2, 10)}),
	}
	for _, c := range []prometheus.Collector{m.started, m.finished, m.steps, m.model, m.tokens, m.policy, m.refused, m.waits} {
		if err := r.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return nil, err
			}
		}
	}
	return m, nil
}

func (m *metrics) runStarted() {
	if m != nil {
		m.started.Inc()
	}
}

func (m *metrics) runFinished(t Termination) {
	if m != nil {
		m.finished.WithLabelValues(string(t)).Inc()
	}
}

func (m *metrics) modelCall(model string, d time.Duration, u provider.Usage, err error) {
	if m == nil {
		return
	}
	outcome := "ok"
	if err != nil {
		outcome = "error"
	} else {
		m.steps.Inc()
	}
	m.model.WithLabelValues(model, outcome).Observe(d.Seconds())
	m.tokens.WithLabelValues(model, "input").Add(float64(u.InputTokens))
	m.tokens.WithLabelValues(model, "output").Add(float64(u.OutputTokens))
}

func (m *metrics) policyDecision(decision, by string) {
	if m != nil {
		m.policy.WithLabelValues(decision, by).Inc()
	}
}

// runRefused counts a new run refused for backpressure (429), for reason.
func (m *metrics) runRefused(reason string) {
	if m != nil {
		m.refused.WithLabelValues(reason).Inc()
	}
}

// publishWaited records a write that waited d for room among the unacknowledged
// publishes.
func (m *metrics) publishWaited(d time.Duration) {
	if m != nil {
		m.waits.Observe(d.Seconds())
	}
}
