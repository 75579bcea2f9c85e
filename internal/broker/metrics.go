package broker

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/zonemq/zonemq/internal/metrics"

	"github.com/zonemq/zonemq/internal/idc"
	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/store"
)

// The broker's Prometheus metrics (docs/metrics.md lists them). Counters
// that move per message are plain atomics in a per-topic (or per
// topic/group, per client IDC) struct found once per request in a sync.Map
// keyed by strings the request already holds, so the hot path allocates no
// label strings and takes no Prometheus lock; Collect turns them into
// constant metrics at scrape time. Gauges (commit-log size, disk use, lag,
// connections, parked pulls) are read at scrape time too.

// latencyBuckets spans 50 µs to ~3 s: a put to the page cache, a send with
// fsync, a hung disk.
var latencyBuckets = prometheus.ExponentialBuckets(0.00005, 2.5, 13)

// flowCounters counts the messages and bytes of one flow (a topic in, or a
// topic read by a group).
type flowCounters struct{ messages, bytes atomic.Int64 }

// topicGroup keys the outbound flows.
type topicGroup struct{ topic, group string }

// queueOfGroup keys the last reader of a queue.
type queueOfGroup struct {
	group, topic string
	queueID      int32
}

// connIDCKey is the remoting.Conn value holding a *connIDC.
type connIDCKey struct{}

// connIDC caches a connection's client IDC. Until a heartbeat registered
// the connection, the registry is searched again at most once per
// idcRecheck, so an unregistered producer's sends do not each scan it.
type connIDC struct {
	idc     string
	known   bool
	checked time.Time
}

// idcRecheck is how often an unregistered connection's IDC is looked for.
const idcRecheck = time.Second

// brokerMetrics holds the broker's counters and histograms.
type brokerMetrics struct {
	s *Server

	sendLatency  prometheus.Histogram
	putLatency   prometheus.Histogram
	flushLatency prometheus.Histogram

	in       sync.Map // topic → *flowCounters
	out      sync.Map // topicGroup → *flowCounters
	crossIn  sync.Map // client IDC → *atomic.Int64
	crossOut sync.Map // client IDC → *atomic.Int64
	inByIDC  sync.Map // client IDC ("" unknown) → *atomic.Int64
	outByIDC sync.Map // client IDC ("" unknown) → *atomic.Int64

	takeovers    atomic.Int64
	lastTakeover atomic.Int64 // unix nanoseconds; 0 before the first

	readersMu sync.Mutex
	readers   map[queueOfGroup]string // the IDC of each queue's last reader

	descs brokerDescs
}

// brokerDescs are the descriptions of the metrics built at scrape time.
type brokerDescs struct {
	messagesIn, bytesIn, messagesOut, bytesOut *prometheus.Desc
	crossIn, crossOut                          *prometheus.Desc
	inByIDC, outByIDC                          *prometheus.Desc
	takeovers, lastTakeover                    *prometheus.Desc
	commitLogBytes, commitLogMax               *prometheus.Desc
	diskUsed, diskMax                          *prometheus.Desc
	lag, connections, parkedPulls              *prometheus.Desc
	producerGroups, consumerGroups, topics     *prometheus.Desc
	startTime                                  *prometheus.Desc
}

func newBrokerMetrics(s *Server) *brokerMetrics {
	labels := prometheus.Labels{"cluster": s.opts.Cluster, "broker": s.opts.BrokerName, "idc": s.opts.IDC}
	hist := func(name, help string) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "zonemq", Subsystem: "broker", Name: name, Help: help,
			ConstLabels: labels, Buckets: latencyBuckets,
		})
	}
	desc := func(name, help string, vars ...string) *prometheus.Desc {
		return prometheus.NewDesc("zonemq_broker_"+name, help, vars, labels)
	}
	return &brokerMetrics{
		s:            s,
		sendLatency:  hist("send_latency_seconds", "Time to serve one send request (single or batch), store and flush wait included."),
		putLatency:   hist("store_put_latency_seconds", "Time of one store put (append, dispatch and, with sync flush, the fsync wait except for plain sends, answered after it by the broker)."),
		flushLatency: hist("store_flush_latency_seconds", "Time of one commit-log fsync."),
		readers:      map[queueOfGroup]string{},
		descs: brokerDescs{
			messagesIn:     desc("messages_in_total", "Messages stored from producers, by topic (rocketmq-exporter: rocketmq_producer_tps as a rate).", "topic"),
			bytesIn:        desc("bytes_in_total", "Message body bytes stored from producers, by topic (rocketmq_producer_message_size as a rate).", "topic"),
			messagesOut:    desc("messages_out_total", "Messages returned to consumers' pulls, by topic and group (rocketmq_consumer_tps as a rate).", "topic", "group"),
			bytesOut:       desc("bytes_out_total", "Stored record bytes returned to consumers' pulls, by topic and group (rocketmq_consumer_message_size as a rate).", "topic", "group"),
			crossIn:        desc("cross_idc_messages_in_total", "Messages stored here from producers of another IDC, by the producer's IDC; stays 0 while every IDC is healthy.", "client_idc"),
			crossOut:       desc("cross_idc_messages_out_total", "Messages read from here by consumers of another IDC, by the consumer's IDC; stays 0 while every IDC is healthy.", "client_idc"),
			inByIDC:        desc("client_messages_in_total", "Messages stored from producers, by the producer's IDC (\"\" for stock clients): where each IDC's producers send.", "client_idc"),
			outByIDC:       desc("client_messages_out_total", "Messages returned to pulls, by the consumer's IDC (\"\" for stock clients): where each IDC's consumers read.", "client_idc"),
			takeovers:      desc("takeovers_total", "Times a queue of this broker began to be read by a consumer of another IDC, after one of a different IDC read it: consumers moving between IDCs in a failover or a fail-back."),
			lastTakeover:   desc("last_takeover_timestamp_seconds", "Unix time of the last takeover; 0 before the first."),
			commitLogBytes: desc("commitlog_bytes", "Bytes of commit log kept on disk (max offset minus min offset)."),
			commitLogMax:   desc("commitlog_max_offset", "The commit log's write position (bytes ever written)."),
			diskUsed:       desc("disk_used_ratio", "Used fraction of the file system holding the store (rocketmq_brokeruntime_commitlogdir_capacity_* as a ratio)."),
			diskMax:        desc("disk_max_used_ratio", "The disk guard: above this used ratio sends are refused (diskMaxUsedRatio)."),
			lag:            desc("consumer_lag_messages", "Messages not yet consumed: the queue's max offset minus the group's committed offset (rocketmq_group_diff).", "group", "topic", "queue"),
			connections:    desc("connections", "Open client and name-server connections."),
			parkedPulls:    desc("parked_pulls", "Long-polling pulls waiting for a message."),
			producerGroups: desc("producer_groups", "Producer groups with a live member."),
			consumerGroups: desc("consumer_groups", "Consumer groups with a live member."),
			topics:         desc("topics", "Topics this broker holds, system topics included."),
			startTime:      desc("start_time_seconds", "Unix time the broker started."),
		},
	}
}

// RegisterMetrics registers the broker's metrics with reg (a registry served
// on --metrics-listen).
func (s *Server) RegisterMetrics(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{s.metrics, s.metrics.sendLatency, s.metrics.putLatency, s.metrics.flushLatency} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// storeObservers returns the store hooks that feed the put and flush
// histograms.
func (m *brokerMetrics) storeObservers() (put, flush func(time.Duration)) {
	return func(d time.Duration) { m.putLatency.Observe(d.Seconds()) },
		func(d time.Duration) { m.flushLatency.Observe(d.Seconds()) }
}

// isSendCode reports whether code is one of the send requests.
func isSendCode(code protocol.RequestCode) bool {
	switch code {
	case protocol.SendMessage, protocol.SendMessageV2, protocol.SendBatchMessage, protocol.SendReplyMessage:
		return true
	}
	return false
}

// instrumentSend wraps a send handler: it times the request and counts the
// messages it stored.
func (m *brokerMetrics) instrumentSend(h remoting.Handler) remoting.Handler {
	return func(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
		start := time.Now()
		resp := h(ctx, c, req)
		if resp != nil { // nil: kept by the send batch, which reports it (inlinesends.go)
			m.sendDone(c, req, resp, time.Since(start))
		}
		return resp
	}
}

// sendDone reports one answered send request and how long it took.
func (m *brokerMetrics) sendDone(c *remoting.Conn, req, resp *remoting.Command, took time.Duration) {
	m.sendLatency.Observe(took.Seconds())
	if protocol.ResponseCode(resp.Code).SendSucceeded() {
		m.sent(c, req, resp)
	}
}

// sent counts one successful send request.
func (m *brokerMetrics) sent(c *remoting.Conn, req, resp *remoting.Command) {
	topic := req.Ext("topic")
	if topic == "" {
		topic = req.Ext("b") // SEND_MESSAGE_V2 and batches
	}
	n := int64(1)
	if protocol.RequestCode(req.Code) == protocol.SendBatchMessage {
		n = int64(strings.Count(resp.Ext("msgId"), ",") + 1)
	}
	f := loadOrNew[string, flowCounters](&m.in, topic)
	f.messages.Add(n)
	f.bytes.Add(int64(len(req.Body)))
	from := m.s.clientIDC(c)
	loadOrNew[string, atomic.Int64](&m.inByIDC, from).Add(n)
	if from != "" && from != m.s.opts.IDC {
		loadOrNew[string, atomic.Int64](&m.crossIn, from).Add(n)
	}
}

// pulled counts one answered pull (direct or parked) that returned messages.
func (m *brokerMetrics) pulled(p *pullRequest, code protocol.ResponseCode, res store.GetResult) {
	if code != protocol.Success || len(res.Messages) == 0 {
		return
	}
	var size int64
	for _, r := range res.Messages {
		size += int64(len(r))
	}
	n := int64(len(res.Messages))
	h := &p.header
	f := loadOrNew[topicGroup, flowCounters](&m.out, topicGroup{h.Topic, h.ConsumerGroup})
	f.messages.Add(n)
	f.bytes.Add(size)
	from := m.s.clientIDC(p.conn)
	loadOrNew[string, atomic.Int64](&m.outByIDC, from).Add(n)
	if from != "" && from != m.s.opts.IDC {
		loadOrNew[string, atomic.Int64](&m.crossOut, from).Add(n)
	}
	if from == "" {
		return
	}
	key := queueOfGroup{h.ConsumerGroup, h.Topic, h.QueueID}
	m.readersMu.Lock()
	prev, seen := m.readers[key]
	if prev != from {
		m.readers[key] = from
	}
	m.readersMu.Unlock()
	if seen && prev != from && from != m.s.opts.IDC {
		m.takeovers.Add(1)
		m.lastTakeover.Store(time.Now().UnixNano())
	}
}

// loadOrNew returns the *V stored under k, storing a new one first if none.
func loadOrNew[K comparable, V any](m *sync.Map, k K) *V {
	if v, ok := m.Load(k); ok {
		return v.(*V)
	}
	v, _ := m.LoadOrStore(k, new(V))
	return v.(*V)
}

// clientIDC returns the IDC carried by the client id a connection's
// heartbeats registered ("" for stock clients and unregistered
// connections), cached on the connection (see connIDC).
func (s *Server) clientIDC(c *remoting.Conn) string {
	if c == nil {
		return ""
	}
	cached, _ := c.Value(connIDCKey{}).(*connIDC)
	if cached != nil && (cached.known || time.Since(cached.checked) < idcRecheck) {
		return cached.idc
	}
	// Concurrent requests on one connection may both search; each stores a
	// fresh value, never mutates a shared one.
	next := &connIDC{checked: time.Now()}
	if id, ok := s.registry.clientIDOf(c); ok {
		next.idc, next.known = idc.IDCOfClientID(id), true
	}
	c.SetValue(connIDCKey{}, next)
	return next.idc
}

// clientIDOf returns the client id registered on conn.
func (r *clientRegistry) clientIDOf(conn *remoting.Conn) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, g := range r.producers {
		if ch, ok := g[conn]; ok {
			return ch.clientID, true
		}
	}
	for _, g := range r.consumers {
		if ch, ok := g.channels[conn]; ok {
			return ch.clientID, true
		}
	}
	return "", false
}

// Describe sends the descriptions of the scrape-time metrics.
func (m *brokerMetrics) Describe(ch chan<- *prometheus.Desc) {
	d := &m.descs
	for _, x := range []*prometheus.Desc{d.messagesIn, d.bytesIn, d.messagesOut, d.bytesOut, d.crossIn, d.crossOut, d.inByIDC, d.outByIDC,
		d.takeovers, d.lastTakeover, d.commitLogBytes, d.commitLogMax, d.diskUsed, d.diskMax, d.lag,
		d.connections, d.parkedPulls, d.producerGroups, d.consumerGroups, d.topics, d.startTime} {
		ch <- x
	}
}

// Collect reads the counters and the broker's state.
func (m *brokerMetrics) Collect(ch chan<- prometheus.Metric) {
	d, s := &m.descs, m.s
	counter := func(desc *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(desc *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, labels...)
	}
	m.in.Range(func(k, v any) bool {
		f := v.(*flowCounters)
		counter(d.messagesIn, f.messages.Load(), k.(string))
		counter(d.bytesIn, f.bytes.Load(), k.(string))
		return true
	})
	m.out.Range(func(k, v any) bool {
		f, tg := v.(*flowCounters), k.(topicGroup)
		counter(d.messagesOut, f.messages.Load(), tg.topic, tg.group)
		counter(d.bytesOut, f.bytes.Load(), tg.topic, tg.group)
		return true
	})
	m.crossIn.Range(func(k, v any) bool { counter(d.crossIn, v.(*atomic.Int64).Load(), k.(string)); return true })
	m.crossOut.Range(func(k, v any) bool { counter(d.crossOut, v.(*atomic.Int64).Load(), k.(string)); return true })
	m.inByIDC.Range(func(k, v any) bool { counter(d.inByIDC, v.(*atomic.Int64).Load(), k.(string)); return true })
	m.outByIDC.Range(func(k, v any) bool { counter(d.outByIDC, v.(*atomic.Int64).Load(), k.(string)); return true })
	counter(d.takeovers, m.takeovers.Load())
	last := 0.0
	if ns := m.lastTakeover.Load(); ns != 0 {
		last = float64(ns) / 1e9
	}
	gauge(d.lastTakeover, last)

	minOff, maxOff := s.store.CommitLogMinOffset(), s.store.CommitLogMaxOffset()
	gauge(d.commitLogBytes, float64(max(maxOff-minOff, 0)))
	gauge(d.commitLogMax, float64(maxOff))
	gauge(d.diskUsed, s.store.DiskUsedRatio())
	gauge(d.diskMax, s.store.DiskMaxUsedRatio())
	for _, g := range s.groups.names() {
		for topic, queues := range s.store.GroupOffsets(g) {
			for q, off := range queues {
				lag := max(s.store.MaxOffset(topic, q)-off, 0)
				gauge(d.lag, float64(lag), g, topic, strconv.Itoa(int(q)))
			}
		}
	}
	gauge(d.connections, float64(len(s.remoting.Conns())))
	gauge(d.parkedPulls, float64(s.pulls.parked()))
	pg, cg, _ := s.registry.counts()
	gauge(d.producerGroups, float64(pg))
	gauge(d.consumerGroups, float64(cg))
	gauge(d.topics, float64(s.topics.len()))
	gauge(d.startTime, float64(s.bootTime.UnixNano())/1e9)
}

// listenMetrics binds --metrics-listen when set.
func (s *Server) listenMetrics() error {
	if s.opts.MetricsListen == "" {
		return nil
	}
	ep, err := metrics.Listen(s.opts.MetricsListen, s.logger, s.RegisterMetrics)
	if err != nil {
		return err
	}
	s.metricsEP = ep
	return nil
}

// MetricsAddr is the bound metrics address, "" without --metrics-listen.
func (s *Server) MetricsAddr() string { return s.metricsEP.Addr() }

// runtimeInfo adds the per-client-IDC flows to GET_BROKER_RUNTIME_INFO, so
// a console (or `zonemq admin broker stats`) sees where each IDC's clients
// send and read without scraping /metrics: "idc1=120;idc2=3".
func (m *brokerMetrics) runtimeInfo(table map[string]string) {
	flat := func(sm *sync.Map) string {
		var parts []string
		sm.Range(func(k, v any) bool {
			parts = append(parts, k.(string)+"="+strconv.FormatInt(v.(*atomic.Int64).Load(), 10))
			return true
		})
		sort.Strings(parts)
		return strings.Join(parts, ";")
	}
	table["zonemqMsgInByClientIDC"] = flat(&m.inByIDC)
	table["zonemqMsgOutByClientIDC"] = flat(&m.outByIDC)
	table["zonemqTakeovers"] = strconv.FormatInt(m.takeovers.Load(), 10)
}
