// Package clientmetrics exports a zonemq producer's send counters to
// Prometheus, for applications that serve their own /metrics. It is a
// separate package so that the client SDK itself needs nothing but the
// standard library.
//
//	reg := prometheus.NewRegistry()
//	reg.MustRegister(clientmetrics.NewProducerCollector(producer, "orders"))
//
// The metrics (docs/metrics.md) carry the labels producer (the name given
// here) and idc (the producer's own IDC).
package clientmetrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/zonemq/zonemq/client"
)

// ProducerCollector is a prometheus.Collector reading a Producer's Stats at
// scrape time; the send path pays nothing for it. Safe for concurrent use.
type ProducerCollector struct {
	p                                         *client.Producer
	sent, cross, retries, failures, failovers *prometheus.Desc
	lastFailover, isolated                    *prometheus.Desc
}

// NewProducerCollector returns a collector for p. name tells producers of one
// process apart (the producer label); idc is the producer's own IDC.
func NewProducerCollector(p *client.Producer, name, idc string) *ProducerCollector {
	labels := prometheus.Labels{"producer": name, "idc": idc}
	desc := func(n, help string, vars ...string) *prometheus.Desc {
		return prometheus.NewDesc("zonemq_client_"+n, help, vars, labels)
	}
	return &ProducerCollector{
		p:            p,
		sent:         desc("sends_total", "Sends stored (a batch counts once), by the IDC of the broker that stored them.", "target_idc"),
		cross:        desc("cross_idc_sends_total", "Sends stored by a broker of another IDC; stays 0 while the own IDC is healthy."),
		retries:      desc("send_retries_total", "Failed send attempts after which another broker was tried."),
		failures:     desc("send_failures_total", "Sends that returned an error to the application."),
		failovers:    desc("failovers_total", "Times sends moved from the own IDC to another IDC."),
		lastFailover: desc("last_failover_timestamp_seconds", "Unix time of the last failover; 0 before the first."),
		isolated:     desc("isolated_brokers", "Brokers the producer avoids now after a failed attempt."),
	}
}

// Describe sends the metric descriptions.
func (c *ProducerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.sent, c.cross, c.retries, c.failures, c.failovers, c.lastFailover, c.isolated} {
		ch <- d
	}
}

// Collect sends a snapshot of the producer's counters.
func (c *ProducerCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.p.Stats()
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	for idc, n := range st.SentByIDC {
		counter(c.sent, n, idc)
	}
	counter(c.cross, st.CrossIDC)
	counter(c.retries, st.Retries)
	counter(c.failures, st.Failures)
	counter(c.failovers, st.Failovers)
	last := 0.0
	if !st.LastFailover.IsZero() {
		last = float64(st.LastFailover.UnixNano()) / 1e9
	}
	ch <- prometheus.MustNewConstMetric(c.lastFailover, prometheus.GaugeValue, last)
	ch <- prometheus.MustNewConstMetric(c.isolated, prometheus.GaugeValue, float64(st.IsolatedBrokers))
}
