package executor

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolfleet/toolfleet/pkg/events"
)

// metrics are the executor's Prometheus collectors; a nil *metrics records nothing, so
// the hot path pays one nil check when metrics are off (the default).
type metrics struct {
	calls        *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	inFlight     *prometheus.GaugeVec
	retries      *prometheus.CounterVec
	redeliveries *prometheus.CounterVec
	deadLetters  *prometheus.CounterVec
	parked       *prometheus.CounterVec
	answered     *prometheus.CounterVec
	policy       *prometheus.CounterVec
	refused      *prometheus.CounterVec
	queueWait    *prometheus.HistogramVec
	serving      *prometheus.GaugeVec
	// The approvals of a tool as its sweep last saw them in the bucket (sweepApprovals):
	// every replica serving the tool sees the same bucket, so alerts take the max (the
	// min of the expiry), never the sum.
	waiting    *prometheus.GaugeVec
	nextExpiry *prometheus.GaugeVec
	expired    *prometheus.CounterVec
}

func newMetrics(r prometheus.Registerer) (*metrics, error) {
	if r == nil {
		return nil, nil
	}
	m := &metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "toolfleet", Subsystem: "executor",
			Name: "calls_total", Help: "Calls answered, by tool and result status."}, []string{"tool", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "toolfleet", Subsystem: "executor",
			Name: "call_duration_seconds", Help: "Time from taking a call to its answer, by tool.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10)}, []string{"tool"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "toolfleet", Subsystem: "executor",
			Name: "in_flight", Help: "Calls running now, by tool."}, []string{"tool"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "toolfleet", Subsystem: "executor",
			Name: "retries_total", Help: "Attempts retried after a retryable failure, by tool."}, []string{"tool"}),
		redeliveries: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "toolfleet", Subsystem: "executor",
			Name: "redeliveries_total", Help: "Calls delivered again by JetStream (crash, ack timeout, hand-back), by tool."}, []string{"tool"}),
		deadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "toolfleet", Subsystem: "executor",
			Name: "dead_letters_total", Help: "Messages set aside on the dead-letter subject, by tool."}, []string{"tool"}),
		parked: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "toolfleet", Subsystem: "executor",
			Name: "approvals_requested_total", Help: "Calls parked to wait for an approval, by tool."}, []string{"tool"}),
		answered: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "toolfleet", Subsystem: "executor",
			Name: "already_answered_total", Help: "Calls found answered already (a stored result), so not run or answered again, by tool."}, []string{"tool"}),
		policy: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "toolfleet", Subsystem: "executor",
			Name: "policy_decisions_total", Help: "Calls a tool's policy hook decided on, by tool, decision (allow, deny, modify, invalid: a modification the schema refused) and by whom (hook, or onError when the hook gave no usable answer)."},
			[]string{"tool", "decision", "by"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "toolfleet", Subsystem: "executor",
			Name: "refused_acts_total", Help: "Approval answers and cancels refused because their sender may not act on the call (events.MayAct), by tool and act (approval_answer, cancel)."},
			[]string{"tool", "act"}),
		queueWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "toolfleet", Subsystem: "executor",
			Name: "queue_wait_seconds", Help: "Time a call waited in its tool's queue, from its storing in the calls stream (the server's clock) to an executor starting to handle its first delivery, by tool.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 11)}, []string{"tool"}),
		serving: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "toolfleet", Subsystem: "executor",
			Name: "serving", Help: "Executors consuming calls of the tool in this process (1 each, from the start of its consumers to shutdown), by tool; summed over replicas, the executors serving a tool."},
			[]string{"tool"}),
		waiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "toolfleet", Subsystem: "executor",
			Name: "approvals_waiting", Help: "Calls parked for an approval and not answered yet, by tool, as this replica's last sweep of the approvals bucket saw them (every replica serving the tool sees them all: take the max, not the sum)."},
			[]string{"tool"}),
		nextExpiry: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "toolfleet", Subsystem: "executor",
			Name: "approvals_next_expiry_timestamp_seconds", Help: "Unix time at which the first of the tool's unanswered approvals expires (its call is then denied), as this replica's last sweep saw them; absent while none waits."},
			[]string{"tool"}),
		expired: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "toolfleet", Subsystem: "executor",
			Name: "approvals_expired_total", Help: "Calls denied because no approval answer arrived before their approval expired, by tool (counted once, by the replica whose sweep denied the call)."},
			[]string{"tool"}),
	}
	var err error
	m.calls = register(r, m.calls, &err)
	m.duration = register(r, m.duration, &err)
	m.inFlight = register(r, m.inFlight, &err)
	m.retries = register(r, m.retries, &err)
	m.redeliveries = register(r, m.redeliveries, &err)
	m.deadLetters = register(r, m.deadLetters, &err)
	m.parked = register(r, m.parked, &err)
	m.answered = register(r, m.answered, &err)
	m.policy = register(r, m.policy, &err)
	m.refused = register(r, m.refused, &err)
	m.queueWait = register(r, m.queueWait, &err)
	m.serving = register(r, m.serving, &err)
	m.waiting = register(r, m.waiting, &err)
	m.nextExpiry = register(r, m.nextExpiry, &err)
	m.expired = register(r, m.expired, &err)
	if err != nil {
		return nil, fmt.Errorf("%w: register metrics: %v", ErrInvalidOption, err)
	}
	return m, nil
}

// register registers c, or reuses the collector already registered under its name (two
// executors in one process share one registry).
func register[C prometheus.Collector](r prometheus.Registerer, c C, errp *error) C {
	if err := r.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		*errp = errors.Join(*errp, err)
	}
	return c
}

func (m *metrics) finished(tool string, s events.Status, d time.Duration) {
	if m == nil {
		return
	}
	m.calls.WithLabelValues(tool, string(s)).Inc()
	m.duration.WithLabelValues(tool).Observe(d.Seconds())
}

func (m *metrics) started(tool string) {
	if m != nil {
		m.inFlight.WithLabelValues(tool).Inc()
	}
}

func (m *metrics) stopped(tool string) {
	if m != nil {
		m.inFlight.WithLabelValues(tool).Dec()
	}
}

func (m *metrics) retry(tool string) {
	if m != nil {
		m.retries.WithLabelValues(tool).Inc()
	}
}

func (m *metrics) redelivery(tool string) {
	if m != nil {
		m.redeliveries.WithLabelValues(tool).Inc()
	}
}

func (m *metrics) deadLettered(tool string) {
	if m != nil {
		m.deadLetters.WithLabelValues(tool).Inc()
	}
}

func (m *metrics) parkedCall(tool string) {
	if m != nil {
		m.parked.WithLabelValues(tool).Inc()
	}
}

func (m *metrics) alreadyAnswered(tool string) {
	if m != nil {
		m.answered.WithLabelValues(tool).Inc()
	}
}

func (m *metrics) policyDecision(tool, decision, by string) {
	if m != nil {
		m.policy.WithLabelValues(tool, decision, by).Inc()
	}
}

func (m *metrics) refusedAct(tool, act string) {
	if m != nil {
		m.refused.WithLabelValues(tool, act).Inc()
	}
}

// queued records how long a call of tool waited in its queue: from its storing in the
// stream (stored, the server's clock) to now. A host clock behind the server's counts 0.
func (m *metrics) queued(tool string, stored time.Time) {
	if m != nil {
		m.queueWait.WithLabelValues(tool).Observe(max(time.Since(stored).Seconds(), 0))
	}
}

// serve counts an executor of this process consuming calls of tool (n: 1 when it
// starts, -1 when it stops).
func (m *metrics) serve(tool string, n float64) {
	if m != nil {
		m.serving.WithLabelValues(tool).Add(n)
	}
}

// waitingApprovals is what one sweep saw of a tool's parked calls: how many wait for
// their answer, and the first expiry among them.
type waitingApprovals struct {
	n     int
	first time.Time
}

// saw counts p when it still waits for its answer (not being carried out or denied).
func (w *waitingApprovals) saw(p parked) {
	if p.State != statePending {
		return
	}
	w.n++
	if w.first.IsZero() || p.ExpiresAt.Before(w.first) {
		w.first = p.ExpiresAt
	}
}

// approvalsSwept shows what a sweep of tool's approvals saw. The expiry counter is made
// at 0 here too, so that an alert sees its first increase.
func (m *metrics) approvalsSwept(tool string, w waitingApprovals) {
	if m == nil {
		return
	}
	m.expired.WithLabelValues(tool)
	m.waiting.WithLabelValues(tool).Set(float64(w.n))
	if w.n == 0 {
		m.nextExpiry.DeleteLabelValues(tool)
		return
	}
	m.nextExpiry.WithLabelValues(tool).Set(float64(w.first.UnixNano()) / 1e9)
}

func (m *metrics) approvalExpired(tool string) {
	if m != nil {
		m.expired.WithLabelValues(tool).Inc()
	}
}
