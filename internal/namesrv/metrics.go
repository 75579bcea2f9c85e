package namesrv

import (
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/zonemq/zonemq/internal/metrics"
)

// namesrvMetrics is the name server's Prometheus collector (docs/metrics.md).
// Everything but the removal counters is read from the tables at scrape
// time.
type namesrvMetrics struct {
	mu          sync.Mutex
	removals    map[string]int64 // by broker IDC
	lastRemoval time.Time

	brokersAlive, removalsTotal, lastRemovalTime, clients, topics *prometheus.Desc
}

func newNamesrvMetrics(idc string) *namesrvMetrics {
	labels := prometheus.Labels{"idc": idc}
	desc := func(name, help string, vars ...string) *prometheus.Desc {
		return prometheus.NewDesc("zonemq_namesrv_"+name, help, vars, labels)
	}
	return &namesrvMetrics{
		removals:        map[string]int64{},
		brokersAlive:    desc("brokers_alive", "Broker addresses registered and alive on this name server, by the broker's IDC (zoneName).", "broker_idc"),
		removalsTotal:   desc("broker_removals_total", "Broker addresses removed from the routes (connection closed, heartbeat expired, unregistered), by the broker's IDC: each one moves clients' traffic elsewhere.", "broker_idc"),
		lastRemovalTime: desc("last_broker_removal_timestamp_seconds", "Unix time of the last broker removal; 0 before the first."),
		clients:         desc("clients", "Live zonemq SDK clients (heartbeat 9001), by the client's IDC and role.", "client_idc", "role"),
		topics:          desc("topics", "Topics in the route table."),
	}
}

// removed counts one broker removal.
func (m *namesrvMetrics) removed(rm removal) {
	m.mu.Lock()
	m.removals[rm.zoneName]++
	m.lastRemoval = time.Now()
	m.mu.Unlock()
}

// RegisterMetrics registers the name server's metrics with reg.
func (s *Server) RegisterMetrics(reg prometheus.Registerer) error {
	return reg.Register(namesrvCollector{s})
}

// namesrvCollector reads the server's tables at scrape time.
type namesrvCollector struct{ s *Server }

// Describe sends the metric descriptions.
func (c namesrvCollector) Describe(ch chan<- *prometheus.Desc) {
	m := c.s.metrics
	for _, d := range []*prometheus.Desc{m.brokersAlive, m.removalsTotal, m.lastRemovalTime, m.clients, m.topics} {
		ch <- d
	}
}

// Collect sends the current values.
func (c namesrvCollector) Collect(ch chan<- prometheus.Metric) {
	s, m := c.s, c.s.metrics
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for zone, n := range s.routes.aliveByZone() {
		gauge(m.brokersAlive, float64(n), zone)
	}
	m.mu.Lock()
	for zone, n := range m.removals {
		ch <- prometheus.MustNewConstMetric(m.removalsTotal, prometheus.CounterValue, float64(n), zone)
	}
	last := 0.0
	if !m.lastRemoval.IsZero() {
		last = float64(m.lastRemoval.UnixNano()) / 1e9
	}
	m.mu.Unlock()
	gauge(m.lastRemovalTime, last)
	type idcRole struct{ idc, role string }
	counts := map[idcRole]int{}
	for _, ci := range s.clients.list("") {
		counts[idcRole{ci.IDC, ci.Role}]++
	}
	for k, n := range counts {
		gauge(m.clients, float64(n), k.idc, k.role)
	}
	gauge(m.topics, float64(len(s.routes.topics())))
}

// aliveByZone counts the registered broker addresses by their IDC.
func (t *routeTable) aliveByZone() map[string]int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := map[string]int{}
	for _, bd := range t.brokerAddrTable {
		for _, addr := range bd.BrokerAddrs {
			if _, ok := t.brokerLiveTable[addr]; ok {
				out[bd.ZoneName]++
			}
		}
	}
	return out
}

// listenMetrics binds --metrics-listen when set.
func (s *Server) listenMetrics() (*metrics.Endpoint, error) {
	if s.opts.MetricsListen == "" {
		return nil, nil
	}
	ep, err := metrics.Listen(s.opts.MetricsListen, s.logger, s.RegisterMetrics)
	if err != nil {
		return nil, fmt.Errorf("namesrv: %w", err)
	}
	return ep, nil
}

// MetricsAddr is the bound metrics address, "" without --metrics-listen.
func (s *Server) MetricsAddr() string { return s.metricsEP.Addr() }
