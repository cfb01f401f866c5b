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
	cost     *prometheus.CounterVec
	watchUp  *prometheus.GaugeVec
	restarts *prometheus.CounterVec
}

// The planner's watches of its buckets (watch label): the runs bucket (lifecycle.go) and
// the tool catalog (catalog.go).
const (
	watchRuns    = "runs"
	watchCatalog = "catalog"
)

// anonymousTenant is the tenant label of anonymous callers' runs: not a valid tenant
// name (events.Identity), so it cannot be mistaken for one.
const anonymousTenant = "(anonymous)"

// tenantLabel is the tenant label of a run of tenant.
func tenantLabel(tenant string) string {
	if tenant == "" {
		return anonymousTenant
	}
	return tenant
}

// tenantsBounded says why a tenant label is safe to have: its values are the tenants of
// the operator's NATS users and API tokens, a set the operator chose.
const tenantsBounded = ` (the run's, "` + anonymousTenant + `" for anonymous callers': one of the tenants of the operator's NATS users and API tokens, a bounded set)`

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
			Name: "tokens_total", Help: "Tokens used by model calls, by model, kind (input or output) and tenant" + tenantsBounded + "."},
			[]string{"model", "kind", "tenant"}),
		cost: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "toolfleet", Subsystem: "planner",
			Name: "cost_total", Help: "Cost charged to runs (their model's tokens and their calls at the price table's prices, in its currency), by tenant" + tenantsBounded + ", counted by the write that stores it in the run."},
			[]string{"tenant"}),
		watchUp: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "toolfleet", Subsystem: "planner",
			Name: "watch_up", Help: "1 while this replica's watch follows its bucket, 0 while it is broken or being started again, by watch (runs: run index, deadlines, leases, approvals inbox; catalog: the tools runs may call)."},
			[]string{"watch"}),
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "toolfleet", Subsystem: "planner",
			Name: "watch_restarts_total", Help: "Times this replica's watch broke and was started again, by watch (runs, catalog)."},
			[]string{"watch"}),
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
	for _, w := range []string{watchRuns, watchCatalog} { // there, at 0, before a watch starts
		m.watchUp.WithLabelValues(w)
		m.restarts.WithLabelValues(w)
	}
	for _, c := range []prometheus.Collector{m.started, m.finished, m.steps, m.model, m.tokens, m.policy, m.refused, m.waits,
		m.cost, m.watchUp, m.restarts} {
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

// modelCall records a model call of a run of tenant.
func (m *metrics) modelCall(model, tenant string, d time.Duration, u provider.Usage, err error) {
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
	m.tokens.WithLabelValues(model, "input", tenantLabel(tenant)).Add(float64(u.InputTokens))
	m.tokens.WithLabelValues(model, "output", tenantLabel(tenant)).Add(float64(u.OutputTokens))
}

// charged records cost added to a run of tenant.
func (m *metrics) charged(tenant string, cost float64) {
	if m != nil && cost > 0 {
		m.cost.WithLabelValues(tenantLabel(tenant)).Add(cost)
	}
}

// watching records whether the watch follows its bucket now.
func (m *metrics) watching(watch string, up bool) {
	if m == nil {
		return
	}
	v := 0.0
	if up {
		v = 1
	}
	m.watchUp.WithLabelValues(watch).Set(v)
}

// watchRestarted counts the watch started again after it broke.
func (m *metrics) watchRestarted(watch string) {
	if m != nil {
		m.restarts.WithLabelValues(watch).Inc()
	}
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
