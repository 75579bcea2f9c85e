package client

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/zonemq/zonemq/internal/idc"
	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// brokerInfo is one broker (master and slaves) as a route lists it.
type brokerInfo struct {
	name    string
	cluster string
	idc     string // BrokerData.zoneName
	addrs   map[int64]string
}

func (b *brokerInfo) master() string { return b.addrs[protocol.MasterID] }

// readAddr is where consumers read the broker's queues: its master, or,
// while the group has no master, its lowest-id replica (which serves reads,
// offsets and locks with the same log).
func (b *brokerInfo) readAddr() string {
	if m := b.master(); m != "" {
		return m
	}
	best, addr := int64(-1), ""
	for id, a := range b.addrs {
		if best < 0 || id < best {
			best, addr = id, a
		}
	}
	return addr
}

// route is a topic's route with its brokers indexed by name.
type route struct {
	topic string
	data  *protocol.TopicRouteData
	// raw is the name server's body, compared to notice changes.
	raw     []byte
	brokers map[string]*brokerInfo
	// notFound means the name server does not know the topic (every
	// broker hosting it is gone, or it was never created).
	notFound bool

	// sendQueuesOnce builds sendQueues on first use; a route never changes
	// once built (a refresh makes a new one), so the send path reads it
	// without locks or allocation.
	sendQueuesOnce sync.Once
	sendQueuesList []writeQueue
}

// autoCreateQueueNums caps the queues a producer uses on the auto-create
// template's brokers (rocketmq-client-go's defaultTopicQueueNums).
const autoCreateQueueNums = 4

// sendQueues are the queues a producer sends to: writeQueues, capped per
// broker for the auto-create template TBW102.
func (r *route) sendQueues() []writeQueue {
	r.sendQueuesOnce.Do(func() {
		limit := 0
		if r.topic == protocol.AutoCreateTopicKey {
			limit = autoCreateQueueNums
		}
		r.sendQueuesList = r.writeQueues(limit)
		for i := range r.sendQueuesList {
			r.sendQueuesList[i].autoCreate = limit > 0
		}
	})
	return r.sendQueuesList
}

func newRoute(topic string, data *protocol.TopicRouteData, raw []byte) *route {
	r := &route{topic: topic, data: data, raw: raw, brokers: map[string]*brokerInfo{}}
	for _, bd := range data.BrokerDatas {
		addrs := make(map[int64]string, len(bd.BrokerAddrs))
		for id, a := range bd.BrokerAddrs {
			addrs[id] = a
		}
		// A group may span IDCs: its IDC is its master's, or while it has
		// none, the replica's that serves it (brokerAddrZones).
		zoned := bd
		zoned.RefreshZoneName()
		r.brokers[bd.BrokerName] = &brokerInfo{name: bd.BrokerName, cluster: bd.Cluster, idc: zoned.ZoneName, addrs: addrs}
	}
	return r
}

// writeQueue is a queue a producer may send to.
type writeQueue struct {
	broker  *brokerInfo
	queueID int
	// autoCreate marks a queue of the auto-create template TBW102: sending
	// there makes the broker create the topic.
	autoCreate bool
}

// writeQueues lists the writable queues of brokers with a master, sorted by
// broker name and queue id. limit > 0 caps the queues per broker (the
// auto-create template's defaultTopicQueueNums).
func (r *route) writeQueues(limit int) []writeQueue {
	var out []writeQueue
	qds := slices.Clone(r.data.QueueDatas)
	sort.Slice(qds, func(i, j int) bool { return qds[i].BrokerName < qds[j].BrokerName })
	for _, qd := range qds {
		b := r.brokers[qd.BrokerName]
		if b == nil || b.master() == "" || !protocol.Writeable(qd.Perm) {
			continue
		}
		n := qd.WriteQueueNums
		if limit > 0 && n > limit {
			n = limit
		}
		for i := 0; i < n; i++ {
			out = append(out, writeQueue{broker: b, queueID: i})
		}
	}
	return out
}

// readBroker is a broker's readable queues of a topic.
type readBroker struct {
	broker *brokerInfo
	queues int
}

// readBrokers lists the brokers with readable queues and an address to
// read them at (a master, or a replica while the group has none), sorted
// by name.
func (r *route) readBrokers() []readBroker {
	var out []readBroker
	for _, qd := range r.data.QueueDatas {
		b := r.brokers[qd.BrokerName]
		if b == nil || b.readAddr() == "" || !protocol.Readable(qd.Perm) || qd.ReadQueueNums <= 0 {
			continue
		}
		out = append(out, readBroker{broker: b, queues: qd.ReadQueueNums})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].broker.name < out[j].broker.name })
	return out
}

// idcHasLiveBroker reports whether the route has a broker of IDC x with a
// master and readable and writable queues: the input of
// idc.EligibleConsumers.
func (r *route) idcHasLiveBroker(x string) bool { return r.idcHasLiveBrokerExcept(x, nil) }

// idcHasLiveBrokerExcept is idcHasLiveBroker not counting the brokers whose
// master address is in skip.
func (r *route) idcHasLiveBrokerExcept(x string, skip map[string]bool) bool {
	for _, qd := range r.data.QueueDatas {
		b := r.brokers[qd.BrokerName]
		if b == nil || b.master() == "" || !idc.Same(b.idc, x) || skip[b.master()] {
			continue
		}
		if protocol.Readable(qd.Perm) && protocol.Writeable(qd.Perm) && qd.ReadQueueNums > 0 && qd.WriteQueueNums > 0 {
			return true
		}
	}
	return false
}

// routeTable caches topic routes, refreshes them every RouteRefreshInterval
// and on demand, and reports changes.
type routeTable struct {
	c *core

	mu       sync.Mutex
	topics   map[string]*route
	inflight map[string]*routeFetch
	// listeners are told when a topic's route changed (or first appeared).
	listeners []func(topic string, old, cur *route)

	refreshCh chan struct{}
	// hurryUntil, while in the future, makes the refresh loop re-read every
	// route every suspectRefreshInterval: a broker in the routes stopped
	// answering (see hurry).
	hurryUntil time.Time
}

type routeFetch struct {
	done chan struct{}
	r    *route
	err  error
}

func newRouteTable(c *core) *routeTable {
	return &routeTable{
		c:         c,
		topics:    map[string]*route{},
		inflight:  map[string]*routeFetch{},
		refreshCh: make(chan struct{}, 1),
	}
}

// onChange registers fn; call before the client starts.
func (t *routeTable) onChange(fn func(topic string, old, cur *route)) {
	t.mu.Lock()
	t.listeners = append(t.listeners, fn)
	t.mu.Unlock()
}

// cached returns the cached route of topic, if any.
func (t *routeTable) cached(topic string) *route {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.topics[topic]
}

// get returns the cached route of topic, fetching it the first time.
func (t *routeTable) get(ctx context.Context, topic string) (*route, error) {
	if r := t.cached(topic); r != nil {
		return r, nil
	}
	return t.fetch(ctx, topic)
}

// fetch asks a name server for topic's route now; concurrent callers for
// one topic share one request. When no name server answers, the cached
// route (if any) is kept and the error returned.
func (t *routeTable) fetch(ctx context.Context, topic string) (*route, error) {
	t.mu.Lock()
	if f, ok := t.inflight[topic]; ok {
		t.mu.Unlock()
		select {
		case <-f.done:
			return f.r, f.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	f := &routeFetch{done: make(chan struct{})}
	t.inflight[topic] = f
	t.mu.Unlock()

	f.r, f.err = t.query(ctx, topic)

	t.mu.Lock()
	delete(t.inflight, topic)
	old := t.topics[topic]
	changed := false
	if f.err == nil {
		changed = old == nil || old.notFound != f.r.notFound || !bytes.Equal(old.raw, f.r.raw)
		if changed {
			t.topics[topic] = f.r
		} else {
			f.r = old // keep pointer identity for unchanged routes
		}
	}
	listeners := slices.Clone(t.listeners)
	t.mu.Unlock()
	close(f.done)
	if changed {
		t.c.logger.Info("route changed", "topic", topic, "brokers", describeBrokers(f.r))
		for _, fn := range listeners {
			fn(topic, old, f.r)
		}
	}
	return f.r, f.err
}

func (t *routeTable) query(ctx context.Context, topic string) (*route, error) {
	h := protocol.GetRouteInfoRequestHeader{Topic: topic, ZoneName: t.c.cfg.IDC, ZoneMode: t.c.cfg.ZoneMode && t.c.cfg.IDC != ""}
	resp, addr, err := t.c.ns.invoke(ctx, func() *remoting.Command {
		return request(protocol.GetRouteInfoByTopic, h.Ext(), nil)
	})
	if err != nil {
		return nil, err
	}
	switch protocol.ResponseCode(resp.Code) {
	case protocol.Success:
	case protocol.TopicNotExist:
		return &route{topic: topic, data: &protocol.TopicRouteData{}, brokers: map[string]*brokerInfo{}, notFound: true}, nil
	default:
		return nil, responseError(protocol.GetRouteInfoByTopic, addr, resp)
	}
	data, err := protocol.DecodeTopicRouteData(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("zonemq client: route of %s from %s: %w", topic, addr, err)
	}
	return newRoute(topic, data, slices.Clone(resp.Body)), nil
}

// triggerRefresh asks the refresh loop to re-read every route now (after a
// send or pull failure, or a broker's notice).
func (t *routeTable) triggerRefresh() {
	select {
	case t.refreshCh <- struct{}{}:
	default:
	}
}

// suspectRefreshInterval is how often every route is re-read while a
// broker in the routes fails its heartbeats. A hung broker (its connections
// stay open, nothing answers) closes nothing, so nothing else tells the
// client when the name server expires it (about 3 s after it went silent);
// without this the consumer would learn it up to RouteRefreshInterval
// later, and keep its IDC's consumers off other IDCs' queues meanwhile.
const suspectRefreshInterval = 500 * time.Millisecond

// hurry asks for routes to be re-read now and every suspectRefreshInterval
// for the next d, because a broker in them is failing. Every consumer that
// sees the failure hurries alike, and each only reads what the name server
// says — nobody decides alone that a broker is dead, so every consumer's
// allocation is still computed from the same routes. Callers extend the
// window while the failure lasts; once the broker has left the routes (or
// answers again) it ends by itself, back to the normal interval.
func (t *routeTable) hurry(d time.Duration) {
	until := time.Now().Add(d)
	t.mu.Lock()
	was := time.Now().Before(t.hurryUntil)
	if until.After(t.hurryUntil) {
		t.hurryUntil = until
	}
	t.mu.Unlock()
	if !was {
		t.triggerRefresh()
	}
}

// hurrying reports whether a hurry window is open.
func (t *routeTable) hurrying() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return time.Now().Before(t.hurryUntil)
}

// refreshAll re-reads every cached route, or with degradedOnly only those
// that lack a live broker of the client's own IDC.
func (t *routeTable) refreshAll(ctx context.Context, degradedOnly bool) {
	t.mu.Lock()
	topics := make([]string, 0, len(t.topics))
	for topic, r := range t.topics {
		if !degradedOnly || t.degraded(r) {
			topics = append(topics, topic)
		}
	}
	t.mu.Unlock()
	for _, topic := range topics {
		if _, err := t.fetch(ctx, topic); err != nil && ctx.Err() == nil {
			t.c.logger.Debug("route refresh failed; keeping the last route", "topic", topic, "err", err)
		}
	}
}

// degraded reports whether r has no broker of the client's own IDC with a
// master (or does not exist): the client is running on other IDCs, or
// waiting for the topic, and wants to notice the change quickly.
func (t *routeTable) degraded(r *route) bool {
	if r.notFound {
		return true
	}
	if t.c.cfg.IDC == "" {
		return false
	}
	for _, b := range r.brokers {
		if idc.Same(b.idc, t.c.cfg.IDC) && b.master() != "" {
			return false
		}
	}
	return true
}

// degradedRefreshInterval is how often routes without an own-IDC broker are
// re-read, so traffic returns to a recovered IDC within about a second
// rather than a full RouteRefreshInterval. It costs one small request per
// such topic per second, only while the IDC is degraded.
const degradedRefreshInterval = time.Second

// refreshLoop refreshes every route every RouteRefreshInterval, degraded
// ones every degradedRefreshInterval, all of them every
// suspectRefreshInterval while hurried, and all of them on demand — at most
// once per 50 ms, so a burst of failures costs one round of queries.
func (t *routeTable) refreshLoop(ctx context.Context) {
	tick := min(t.c.cfg.RouteRefreshInterval, degradedRefreshInterval)
	tk := time.NewTicker(tick)
	defer tk.Stop()
	lastFull := time.Now()
	for {
		full := true
		var hurryC <-chan time.Time
		var hurryT *time.Timer
		if t.hurrying() {
			hurryT = time.NewTimer(suspectRefreshInterval)
			hurryC = hurryT.C
		}
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
			full = time.Since(lastFull) >= t.c.cfg.RouteRefreshInterval-tick/2
		case <-hurryC:
		case <-t.refreshCh:
		}
		if hurryT != nil {
			hurryT.Stop()
		}
		if full {
			lastFull = time.Now()
		}
		t.refreshAll(ctx, !full)
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// brokerAddrs lists the addresses of every broker (masters and slaves) in
// the cached routes of topics.
func (t *routeTable) brokerAddrs(topics []string) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	seen := map[string]bool{}
	var out []string
	for _, topic := range topics {
		r := t.topics[topic]
		if r == nil {
			continue
		}
		for _, b := range r.brokers {
			for _, a := range b.addrs {
				if a != "" && !seen[a] {
					seen[a] = true
					out = append(out, a)
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

func describeBrokers(r *route) []string {
	var out []string
	for _, b := range r.brokers {
		out = append(out, fmt.Sprintf("%s@%s/%s", b.name, b.readAddr(), b.idc))
	}
	sort.Strings(out)
	return out
}
