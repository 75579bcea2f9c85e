package addrsrv

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/zonemq/zonemq/internal/metrics"
)

// probeMetrics are one name server's probe counters and latency histogram,
// resolved once at New so a probe touches no label map.
type probeMetrics struct {
	ok, failed prometheus.Counter
	latency    prometheus.Observer
}

// addrsrvMetrics is the address server's Prometheus instrumentation
// (docs/metrics.md).
type addrsrvMetrics struct {
	probes   *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	byState  map[*namesrvState]probeMetrics
	up       *prometheus.Desc
	aliveIDC *prometheus.Desc
}

func newAddrsrvMetrics(idc string, states []*namesrvState) *addrsrvMetrics {
	labels := prometheus.Labels{"idc": idc}
	m := &addrsrvMetrics{
		probes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "zonemq", Subsystem: "addrsrv", Name: "probes_total", ConstLabels: labels,
			Help: "Probes of each name server, by result (ok or fail).",
		}, []string{"namesrv", "namesrv_idc", "result"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "zonemq", Subsystem: "addrsrv", Name: "probe_latency_seconds", ConstLabels: labels,
			Help:    "Time of one probe of a name server (dial included on a fresh connection), failed ones too.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 3, 10),
		}, []string{"namesrv", "namesrv_idc"}),
		byState: map[*namesrvState]probeMetrics{},
		up: prometheus.NewDesc("zonemq_addrsrv_namesrv_up",
			"1 while the name server is listed (alive, or not probed yet), else 0.", []string{"namesrv", "namesrv_idc"}, labels),
		aliveIDC: prometheus.NewDesc("zonemq_addrsrv_namesrvs_alive",
			"Name servers listed as alive, by their IDC.", []string{"namesrv_idc"}, labels),
	}
	for _, st := range states {
		m.byState[st] = probeMetrics{
			ok:      m.probes.WithLabelValues(st.Addr, st.IDC, "ok"),
			failed:  m.probes.WithLabelValues(st.Addr, st.IDC, "fail"),
			latency: m.latency.WithLabelValues(st.Addr, st.IDC),
		}
	}
	return m
}

// probed records one probe's outcome and duration.
func (m *addrsrvMetrics) probed(st *namesrvState, d time.Duration, err error) {
	pm := m.byState[st] // read-only after New
	if pm.latency == nil {
		return
	}
	pm.latency.Observe(d.Seconds())
	if err == nil {
		pm.ok.Inc()
	} else {
		pm.failed.Inc()
	}
}

// RegisterMetrics registers the address server's metrics with reg.
func (s *Server) RegisterMetrics(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{s.metrics.probes, s.metrics.latency, addrsrvCollector{s}} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// addrsrvCollector reads the name servers' states at scrape time.
type addrsrvCollector struct{ s *Server }

// Describe sends the metric descriptions.
func (c addrsrvCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.s.metrics.up
	ch <- c.s.metrics.aliveIDC
}

// Collect sends the current states.
func (c addrsrvCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.s.metrics
	alive := map[string]int{}
	for _, ns := range c.s.Namesrvs() {
		v := 0.0
		if ns.Alive {
			v = 1
			alive[ns.IDC]++
		} else if _, ok := alive[ns.IDC]; !ok {
			alive[ns.IDC] = 0
		}
		ch <- prometheus.MustNewConstMetric(m.up, prometheus.GaugeValue, v, ns.Addr, ns.IDC)
	}
	for idc, n := range alive {
		ch <- prometheus.MustNewConstMetric(m.aliveIDC, prometheus.GaugeValue, float64(n), idc)
	}
}

// listenMetrics binds --metrics-listen when set.
func (s *Server) listenMetrics() (*metrics.Endpoint, error) {
	if s.opts.MetricsListen == "" {
		return nil, nil
	}
	ep, err := metrics.Listen(s.opts.MetricsListen, s.logger, s.RegisterMetrics)
	if err != nil {
		return nil, fmt.Errorf("addrsrv: %w", err)
	}
	return ep, nil
}

// MetricsAddr is the bound metrics address, "" without --metrics-listen.
func (s *Server) MetricsAddr() string { return s.metricsEP.Addr() }
