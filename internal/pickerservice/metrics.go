package pickerservice

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolfleet/toolfleet/pkg/pick"
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

// tuningCollector shows what self-tuning chose for each tenant, read from the learned
// index at each scrape (it keeps no copy of its own).
type tuningCollector struct{ l *pick.Learned }

var (
	tuningWeight = prometheus.NewDesc("toolfleet_picker_tuning_weight",
		"Weight of the learned field in the tenant's picks (chosen by self-tuning, or the default).", []string{"tenant"}, nil)
	tuningCoUsage = prometheus.NewDesc("toolfleet_picker_tuning_co_usage",
		"Co-usage lift in the tenant's picks (0: off).", []string{"tenant"}, nil)
	tuningPower = prometheus.NewDesc("toolfleet_picker_tuning_power",
		"Power of the learned share in the tenant's picks (2 squared, 1 linear).", []string{"tenant"}, nil)
	tuningTuned = prometheus.NewDesc("toolfleet_picker_tuning_tuned",
		"1 when the tenant's settings were chosen from its usage, 0 while it has too little and ranks with the defaults.", []string{"tenant"}, nil)
	tuningHeldOut = prometheus.NewDesc("toolfleet_picker_tuning_held_out_runs",
		"Runs of the tenant's usage log (its most recent fifth) the settings were scored on.", []string{"tenant"}, nil)
	tuningNDCG = prometheus.NewDesc("toolfleet_picker_tuning_held_out_ndcg",
		"nDCG@10 (0..1) on the held-out runs of the chosen setting and of the defaults.", []string{"tenant", "setting"}, nil)
)

func (c tuningCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{tuningWeight, tuningCoUsage, tuningPower, tuningTuned, tuningHeldOut, tuningNDCG} {
		ch <- d
	}
}

func (c tuningCollector) Collect(ch chan<- prometheus.Metric) {
	for _, t := range c.l.Tunings() {
		tuned := 0.0
		if t.Tuned {
			tuned = 1
		}
		ch <- prometheus.MustNewConstMetric(tuningWeight, prometheus.GaugeValue, t.Tuning.Weight, t.Tenant)
		ch <- prometheus.MustNewConstMetric(tuningCoUsage, prometheus.GaugeValue, t.Tuning.CoUsage, t.Tenant)
		ch <- prometheus.MustNewConstMetric(tuningPower, prometheus.GaugeValue, float64(t.Tuning.Power), t.Tenant)
		ch <- prometheus.MustNewConstMetric(tuningTuned, prometheus.GaugeValue, tuned, t.Tenant)
		ch <- prometheus.MustNewConstMetric(tuningHeldOut, prometheus.GaugeValue, float64(t.HeldOut), t.Tenant)
		if t.Tuned {
			ch <- prometheus.MustNewConstMetric(tuningNDCG, prometheus.GaugeValue, t.Score, t.Tenant, "chosen")
			ch <- prometheus.MustNewConstMetric(tuningNDCG, prometheus.GaugeValue, t.DefaultScore, t.Tenant, "defaults")
		}
	}
}
