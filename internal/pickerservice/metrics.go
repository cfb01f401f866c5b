package pickerservice

import (
	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	requests   *prometheus.CounterVec
	latency    *prometheus.HistogramVec
	fallbacks  prometheus.Counter
	reindex    prometheus.Histogram
	tools      prometheus.Gauge
	version    prometheus.Gauge
	badEntries prometheus.Counter
	usage      *prometheus.CounterVec
}

func newMetrics(r prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolfleet_picker_requests_total",
			Help: "Pick requests by outcome (ok, bad_request, unavailable, scorer_error)."}, []string{"outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "toolfleet_picker_pick_seconds",
			Help:    "Time to pick, by scorer (decode to reply).",
			Buckets: prometheus.ExponentialBuckets(25e-6, 2, 16)}, []string{"scorer"}),
		fallbacks: prometheus.NewCounter(prometheus.CounterOpts{Name: "toolfleet_picker_fallbacks_total",
			Help: "Picks whose scoring timed out and fell back to registration order."}),
		reindex: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "toolfleet_picker_reindex_seconds",
			Help: "Time to apply a batch of catalog changes to the index.", Buckets: prometheus.ExponentialBuckets(1e-4, 4, 10)}),
		tools: prometheus.NewGauge(prometheus.GaugeOpts{Name: "toolfleet_picker_catalog_tools",
			Help: "Tools in the current index."}),
		version: prometheus.NewGauge(prometheus.GaugeOpts{Name: "toolfleet_picker_catalog_version",
			Help: "Version of the current index; grows with every applied change."}),
		badEntries: prometheus.NewCounter(prometheus.CounterOpts{Name: "toolfleet_picker_catalog_bad_entries_total",
			Help: "Catalog entries that were not valid definitions (their tools are withdrawn)."}),
	}
	m.usage = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolfleet_picker_usage_records_total",
		Help: "Usage records read from the usage stream, by outcome (learned, dropped)."}, []string{"outcome"})
	for _, c := range []prometheus.Collector{m.requests, m.latency, m.fallbacks, m.reindex, m.tools, m.version, m.badEntries, m.usage} {
		if err := r.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
