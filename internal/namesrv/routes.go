package namesrv

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// errConnClosed is returned by a registration whose connection closed while
// it was being served: recording it would leave a broker that no close
// event will ever remove.
var errConnClosed = errors.New("the connection closed while the registration was being served")

// brokerLive is what the name server knows about one registered broker
// address beyond the route: when it was last heard from and over which
// connection.
type brokerLive struct {
	brokerName   string
	clusterName  string
	brokerID     int64
	haServerAddr string
	lastUpdate   time.Time
	timeout      time.Duration
	dataVersion  protocol.DataVersion
	conn         *remoting.Conn
	// masterEpoch is the controller epoch its registration claimed (0
	// outside controller mode); see elected.go.
	masterEpoch int64
	// needFull asks the broker for a full registration: a client deleted
	// one of its topics from the routes, and only the broker's own topic
	// table says whether it still hosts it.
	needFull bool
}

// routeTable holds RocketMQ's RouteInfoManager tables. Every field below mu
// is guarded by it (see the package comment).
type routeTable struct {
	defaultExpiry time.Duration
	// maxEntries caps the (broker, topic) pairs of all brokers (0: none);
	// topicCounts is each broker name's topic count toward it.
	maxEntries  int
	topicCounts map[string]int
	entries     int
	// claimHold, instances and groupInstances keep a slot for the data
	// directory that held it (instances.go).
	claimHold      time.Duration
	instances      map[slotKey]instanceSeen
	groupInstances map[string]map[string]time.Time

	mu sync.RWMutex
	// topicQueueTable: topic → brokerName → that broker's queues of it.
	topicQueueTable map[string]map[string]protocol.QueueData
	// brokerAddrTable: brokerName → cluster, addresses by broker id, IDC.
	brokerAddrTable map[string]*protocol.BrokerData
	// clusterAddrTable: cluster → brokerNames.
	clusterAddrTable map[string]map[string]struct{}
	// brokerLiveTable: brokerAddr → liveness.
	brokerLiveTable map[string]*brokerLive
	// filterServerTable: brokerAddr → its filter servers.
	filterServerTable map[string][]string
	// connBrokers: connection → broker addresses registered over it, so a
	// closed connection removes exactly its brokers.
	connBrokers map[*remoting.Conn]map[string]struct{}
	// claims: connection → its latest registration refused for a held
	// slot (see ownership.go).
	claims map[*remoting.Conn]slotClaim
}

func newRouteTable(defaultExpiry time.Duration, maxEntries int, claimHold time.Duration) *routeTable {
	return &routeTable{
		defaultExpiry:     defaultExpiry,
		maxEntries:        maxEntries,
		claimHold:         claimHold,
		instances:         make(map[slotKey]instanceSeen),
		groupInstances:    make(map[string]map[string]time.Time),
		topicCounts:       make(map[string]int),
		topicQueueTable:   make(map[string]map[string]protocol.QueueData),
		brokerAddrTable:   make(map[string]*protocol.BrokerData),
		clusterAddrTable:  make(map[string]map[string]struct{}),
		brokerLiveTable:   make(map[string]*brokerLive),
		filterServerTable: make(map[string][]string),
		connBrokers:       make(map[*remoting.Conn]map[string]struct{}),
		claims:            make(map[*remoting.Conn]slotClaim),
	}
}

// registerResult is what a registration tells the caller.
type registerResult struct {
	first        bool // the address was not registered before
	topicsLoaded bool // the topic table was (re)read
	masterAddr   string
	haServerAddr string
}

// registerBroker applies one REGISTER_BROKER. conn may be nil (no
// connection tracking).
func (t *routeTable) registerBroker(h *protocol.RegisterBrokerRequestHeader, reg *brokerRegistration, conn *remoting.Conn, now time.Time) (registerResult, error) {
	var res registerResult
	t.mu.Lock()
	defer t.mu.Unlock()
	if conn != nil && connClosed(conn) {
		return res, errConnClosed
	}
	if err := t.checkInstanceLocked(h, now); err != nil {
		return res, err
	}
	swapWith, err := t.checkRegisterOwnerLocked(h, conn, reg, now)
	if err != nil {
		return res, err
	}
	if reg.hasBody && t.maxEntries > 0 {
		if n := t.entries - t.topicCounts[h.BrokerName] + len(reg.topics); n > t.maxEntries {
			return res, fmt.Errorf("%w: with its %d topics the name server would hold %d topic entries of all brokers, over "+
				"its limit of %d (--max-topic-entries)", errTooManyTopics, len(reg.topics), n, t.maxEntries)
		}
	}
	res = t.applyRegistrationLocked(h, reg, conn, now)
	t.noteInstanceLocked(h, now)
	if swapWith != nil {
		// The other side of an agreed swap asked first and was refused:
		// apply its registration now, so the group never shows a gap.
		c := t.claims[swapWith]
		delete(t.claims, swapWith)
		if !connClosed(swapWith) {
			t.applyRegistrationLocked(c.header, c.reg, swapWith, now)
		}
	}
	return res, nil
}

// applyRegistrationLocked records an accepted REGISTER_BROKER. Caller
// holds t.mu.
func (t *routeTable) applyRegistrationLocked(h *protocol.RegisterBrokerRequestHeader, reg *brokerRegistration, conn *remoting.Conn, now time.Time) registerResult {
	var res registerResult
	// Only a new group or its master (id 0) decides the group's cluster and
	// IDC: a replica registering, or anyone else, cannot move it.
	_, exists := t.brokerAddrTable[h.BrokerName]
	decides := !exists || h.BrokerID == protocol.MasterID

	if decides {
		names := t.clusterAddrTable[h.ClusterName]
		if names == nil {
			names = make(map[string]struct{})
			t.clusterAddrTable[h.ClusterName] = names
		}
		names[h.BrokerName] = struct{}{}
	}

	bd := t.brokerAddrTable[h.BrokerName]
	if bd == nil {
		bd = &protocol.BrokerData{Cluster: h.ClusterName, BrokerName: h.BrokerName, BrokerAddrs: map[int64]string{}}
		t.brokerAddrTable[h.BrokerName] = bd
		res.first = true
	} else if decides && bd.Cluster != h.ClusterName {
		t.removeFromClusterLocked(bd.Cluster, h.BrokerName)
		bd.Cluster = h.ClusterName
	}
	if decides {
		bd.EnableActingMaster = h.EnableActingMaster
	}

	// A slave promoted to master (or the reverse) re-registers its address
	// under a new id; the old id must not keep pointing at it.
	for id, addr := range bd.BrokerAddrs {
		if addr == h.BrokerAddr && id != h.BrokerID {
			delete(bd.BrokerAddrs, id)
			delete(bd.BrokerAddrZones, id)
		}
	}
	if bd.BrokerAddrs[h.BrokerID] != h.BrokerAddr {
		res.first = true
	}
	bd.BrokerAddrs[h.BrokerID] = h.BrokerAddr
	// Each address keeps its own IDC: a group's replicas may sit in
	// different IDCs, and the group's zoneName follows its master.
	if h.ZoneName != "" {
		if bd.BrokerAddrZones == nil {
			bd.BrokerAddrZones = map[int64]string{}
		}
		bd.BrokerAddrZones[h.BrokerID] = h.ZoneName
		bd.RefreshZoneName()
	}

	live := t.brokerLiveTable[h.BrokerAddr]
	if live == nil {
		res.first = true
	}
	// A master's full registration is the truth about its topics, whatever
	// its data version: loading it every time is what heals a route a
	// client deleted or poisoned (REGISTER_/DELETE_TOPIC_IN_NAMESRV).
	if h.BrokerID == protocol.MasterID && reg.hasBody {
		t.loadTopicsLocked(h.BrokerName, reg.topics)
		res.topicsLoaded = true
	}

	if live == nil {
		live = &brokerLive{}
		t.brokerLiveTable[h.BrokerAddr] = live
	}
	live.brokerName = h.BrokerName
	live.clusterName = h.ClusterName
	live.brokerID = h.BrokerID
	live.haServerAddr = h.HAServerAddr
	live.lastUpdate = now
	live.timeout = t.brokerTimeout(h.HeartbeatTimeoutMillis)
	live.masterEpoch = h.MasterEpoch
	if reg.hasBody {
		live.dataVersion = reg.dataVersion
		live.needFull = false
	}
	t.trackConnLocked(h.BrokerAddr, live, conn)
	delete(t.claims, conn)

	if len(reg.filterServers) > 0 {
		t.filterServerTable[h.BrokerAddr] = slices.Clone(reg.filterServers)
	} else {
		delete(t.filterServerTable, h.BrokerAddr)
	}

	if h.BrokerID != protocol.MasterID {
		res.masterAddr = bd.BrokerAddrs[protocol.MasterID]
		if m := t.brokerLiveTable[res.masterAddr]; res.masterAddr != "" && m != nil {
			res.haServerAddr = m.haServerAddr
		}
	}
	return res
}

// loadTopicsLocked makes brokerName's queue data equal to topics: a master's
// full registration is the truth about which topics it hosts, so topics it
// no longer lists lose its queues. Caller holds t.mu.
func (t *routeTable) loadTopicsLocked(brokerName string, topics map[string]protocol.TopicConfig) {
	t.entries += len(topics) - t.topicCounts[brokerName]
	t.topicCounts[brokerName] = len(topics)
	for topic, qmap := range t.topicQueueTable {
		if _, ok := topics[topic]; ok {
			continue
		}
		if _, ok := qmap[brokerName]; ok {
			delete(qmap, brokerName)
			if len(qmap) == 0 {
				delete(t.topicQueueTable, topic)
			}
		}
	}
	for topic, tc := range topics {
		qmap := t.topicQueueTable[topic]
		if qmap == nil {
			qmap = make(map[string]protocol.QueueData)
			t.topicQueueTable[topic] = qmap
		}
		qmap[brokerName] = protocol.QueueData{
			BrokerName:     brokerName,
			ReadQueueNums:  tc.ReadQueueNums,
			WriteQueueNums: tc.WriteQueueNums,
			Perm:           tc.Perm,
			TopicSysFlag:   tc.TopicSysFlag,
		}
	}
}

// trackConnLocked records that addr's registration came over conn. Caller
// holds t.mu.
func (t *routeTable) trackConnLocked(addr string, live *brokerLive, conn *remoting.Conn) {
	if live.conn == conn {
		return
	}
	if old := t.connBrokers[live.conn]; old != nil {
		delete(old, addr)
		if len(old) == 0 {
			delete(t.connBrokers, live.conn)
		}
	}
	live.conn = conn
	if conn == nil {
		return
	}
	set := t.connBrokers[conn]
	if set == nil {
		set = make(map[string]struct{})
		t.connBrokers[conn] = set
	}
	set[addr] = struct{}{}
}

func (t *routeTable) removeFromClusterLocked(cluster, brokerName string) {
	if names := t.clusterAddrTable[cluster]; names != nil {
		delete(names, brokerName)
		if len(names) == 0 {
			delete(t.clusterAddrTable, cluster)
		}
	}
}

// removal describes one broker address leaving the routes, for the log.
type removal struct {
	brokerAddr    string
	brokerName    string
	brokerID      int64
	clusterName   string
	zoneName      string
	brokerRemoved bool // its last address went, and its queues with it
	reason        string
}

// removeBrokerAddrLocked drops addr from the routes; brokerName is a hint
// for addresses with no liveness entry. When the broker's last address
// goes, its BrokerData and every QueueData of it go too. It reports false
// if addr was not registered. Caller holds t.mu.
func (t *routeTable) removeBrokerAddrLocked(addr, brokerName, reason string) (removal, bool) {
	rm := removal{brokerAddr: addr, brokerName: brokerName, reason: reason}
	found := false
	if live := t.brokerLiveTable[addr]; live != nil {
		found = true
		rm.brokerName, rm.brokerID, rm.clusterName = live.brokerName, live.brokerID, live.clusterName
		t.trackConnLocked(addr, live, nil)
		delete(t.brokerLiveTable, addr)
	}
	delete(t.filterServerTable, addr)

	bd := t.brokerAddrTable[rm.brokerName]
	if bd == nil {
		return rm, found
	}
	for id, a := range bd.BrokerAddrs {
		if a == addr {
			rm.zoneName = bd.AddrZone(id)
			delete(bd.BrokerAddrs, id)
			delete(bd.BrokerAddrZones, id)
			rm.brokerID = id
			found = true
		}
	}
	if rm.zoneName == "" {
		rm.zoneName = bd.ZoneName
	}
	bd.RefreshZoneName()
	rm.clusterName = bd.Cluster
	if len(bd.BrokerAddrs) > 0 {
		return rm, found
	}
	rm.brokerRemoved = true
	delete(t.brokerAddrTable, rm.brokerName)
	t.entries -= t.topicCounts[rm.brokerName]
	delete(t.topicCounts, rm.brokerName)
	t.removeFromClusterLocked(bd.Cluster, rm.brokerName)
	for topic, qmap := range t.topicQueueTable {
		delete(qmap, rm.brokerName)
		if len(qmap) == 0 {
			delete(t.topicQueueTable, topic)
		}
	}
	return rm, found
}

// unregisterBroker applies UNREGISTER_BROKER received over conn. A live
// broker registered from another connection is left alone
// (errRegistrationHeld).
func (t *routeTable) unregisterBroker(h *protocol.UnregisterBrokerRequestHeader, conn *remoting.Conn, now time.Time) (removal, bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if live := t.brokerLiveTable[h.BrokerAddr]; !ownsLocked(live, conn, now) {
		return removal{}, false, fmt.Errorf("%w: broker %s at %s was registered from %s; only that connection may unregister it",
			errRegistrationHeld, live.brokerName, h.BrokerAddr, live.conn.RemoteAddr())
	}
	rm, ok := t.removeBrokerAddrLocked(h.BrokerAddr, h.BrokerName, "unregistered")
	return rm, ok, nil
}

// connClosedRemove drops every broker address whose latest registration
// came over conn.
func (t *routeTable) connClosedRemove(conn *remoting.Conn) []removal {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []removal
	for addr := range t.connBrokers[conn] {
		if live := t.brokerLiveTable[addr]; live != nil && live.conn == conn {
			if rm, ok := t.removeBrokerAddrLocked(addr, live.brokerName, "connection closed"); ok {
				out = append(out, rm)
			}
		}
	}
	delete(t.connBrokers, conn)
	delete(t.claims, conn)
	return out
}

// expire drops every broker address silent for longer than its timeout.
func (t *routeTable) expire(now time.Time) []removal {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []removal
	for addr, live := range t.brokerLiveTable {
		if silent := now.Sub(live.lastUpdate); silent > live.timeout {
			reason := fmt.Sprintf("no heartbeat for %v (expiry %v)", silent.Round(time.Millisecond), live.timeout)
			if rm, ok := t.removeBrokerAddrLocked(addr, live.brokerName, reason); ok {
				out = append(out, rm)
			}
		}
	}
	return out
}

// heartbeat refreshes a registered broker's last-seen time. It returns a
// non-empty reason, and changes nothing, when the broker must register in
// full instead: the name server has no live registration of that address
// under that broker name from conn, or a client deleted one of its topics.
func (t *routeTable) heartbeat(h *protocol.BrokerHeartbeatRequestHeader, conn *remoting.Conn, now time.Time) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	live := t.brokerLiveTable[h.BrokerAddr]
	if live == nil || live.brokerName != h.BrokerName {
		return "is not registered with this name server"
	}
	bd := t.brokerAddrTable[h.BrokerName]
	if bd == nil || bd.BrokerAddrs[live.brokerID] != h.BrokerAddr {
		return "is not registered with this name server"
	}
	if conn != nil && live.conn != conn {
		return "was registered over another connection"
	}
	if live.needFull {
		return "hosted a topic deleted from the routes"
	}
	live.lastUpdate = now
	if h.HeartbeatTimeoutMillis > 0 {
		live.timeout = t.brokerTimeout(h.HeartbeatTimeoutMillis)
	}
	return ""
}

// queryDataVersion compares a broker's topic-table version with the one
// the name server holds, refreshing the broker's last-seen time when it is
// known. It returns whether they differ and the name server's version.
// Only the connection that registered the broker refreshes it; a broker
// asked for a full registration (needFull) is told its version changed.
func (t *routeTable) queryDataVersion(addr string, dv protocol.DataVersion, conn *remoting.Conn, now time.Time) (changed bool, have *protocol.DataVersion) {
	t.mu.Lock()
	defer t.mu.Unlock()
	live := t.brokerLiveTable[addr]
	if live == nil {
		return true, nil
	}
	if conn == nil || live.conn == conn {
		live.lastUpdate = now
	}
	v := live.dataVersion
	return v != dv || live.needFull, &v
}

// registerTopic applies REGISTER_TOPIC_IN_NAMESRV: queue data for brokers
// that are registered. Nothing is changed if any broker is unknown.
func (t *routeTable) registerTopic(topic string, qds []protocol.QueueData) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, qd := range qds {
		if t.brokerAddrTable[qd.BrokerName] == nil {
			return fmt.Errorf("broker %q is not registered with this name server", qd.BrokerName)
		}
	}
	qmap := t.topicQueueTable[topic]
	if qmap == nil {
		qmap = make(map[string]protocol.QueueData)
		t.topicQueueTable[topic] = qmap
	}
	for _, qd := range qds {
		qmap[qd.BrokerName] = qd
	}
	return nil
}

// deleteTopic drops a topic, or only its queues on cluster's brokers when
// cluster is not empty. It reports whether anything was removed. Every
// broker that lost queues is asked for a full registration, so a topic it
// still hosts comes back within a heartbeat: the name server holds routes,
// the brokers hold topics (deleting a topic is DELETE_TOPIC_IN_BROKER first).
func (t *routeTable) deleteTopic(topic, cluster string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	qmap := t.topicQueueTable[topic]
	if qmap == nil {
		return false
	}
	removed := false
	for name := range qmap {
		if cluster != "" && !t.inClusterLocked(cluster, name) {
			continue
		}
		delete(qmap, name)
		removed = true
		t.askFullRegistrationLocked(name)
	}
	if len(qmap) == 0 {
		delete(t.topicQueueTable, topic)
	}
	return removed
}

// route assembles a topic's route: its queue data and the BrokerData (with
// zoneName) of every broker hosting it, sorted by broker name. It reports
// false when no registered broker hosts the topic.
func (t *routeTable) route(topic string) (*protocol.TopicRouteData, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	qmap := t.topicQueueTable[topic]
	if len(qmap) == 0 {
		return nil, false
	}
	r := &protocol.TopicRouteData{FilterServerTable: map[string][]string{}}
	for _, name := range slices.Sorted(maps.Keys(qmap)) {
		bd := t.brokerAddrTable[name]
		if bd == nil {
			continue
		}
		qd := qmap[name]
		c := *bd
		c.BrokerAddrs = maps.Clone(bd.BrokerAddrs)
		c.BrokerAddrZones = maps.Clone(bd.BrokerAddrZones)
		if actAsMaster(&c) {
			qd.Perm &^= protocol.PermWrite
		}
		r.QueueDatas = append(r.QueueDatas, qd)
		r.BrokerDatas = append(r.BrokerDatas, c)
		for _, addr := range bd.BrokerAddrs {
			if fs := t.filterServerTable[addr]; len(fs) > 0 {
				r.FilterServerTable[addr] = slices.Clone(fs)
			}
		}
	}
	if len(r.BrokerDatas) == 0 {
		return nil, false
	}
	return r, true
}

// clusterInfo is GET_BROKER_CLUSTER_INFO's body with liveness.
func (t *routeTable) clusterInfo() *protocol.ClusterLiveInfo {
	t.mu.RLock()
	defer t.mu.RUnlock()
	ci := &protocol.ClusterLiveInfo{
		ClusterInfo: protocol.ClusterInfo{
			BrokerAddrTable:  make(map[string]protocol.BrokerData, len(t.brokerAddrTable)),
			ClusterAddrTable: make(map[string][]string, len(t.clusterAddrTable)),
		},
		BrokerLiveTable: make(map[string]protocol.BrokerLive, len(t.brokerLiveTable)),
	}
	for name, bd := range t.brokerAddrTable {
		c := *bd
		c.BrokerAddrs = maps.Clone(bd.BrokerAddrs)
		c.BrokerAddrZones = maps.Clone(bd.BrokerAddrZones)
		ci.BrokerAddrTable[name] = c
	}
	for cluster, names := range t.clusterAddrTable {
		ci.ClusterAddrTable[cluster] = slices.Sorted(maps.Keys(names))
	}
	for addr, live := range t.brokerLiveTable {
		ci.BrokerLiveTable[addr] = protocol.BrokerLive{
			LastUpdateTimestamp:    live.lastUpdate.UnixMilli(),
			HeartbeatTimeoutMillis: live.timeout.Milliseconds(),
			DataVersion:            live.dataVersion,
		}
	}
	return ci
}

// topics lists every topic with a route, sorted.
func (t *routeTable) topics() []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return slices.Sorted(maps.Keys(t.topicQueueTable))
}

// topicsByCluster lists the topics hosted by any broker of cluster, sorted.
func (t *routeTable) topicsByCluster(cluster string) []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	names := t.clusterAddrTable[cluster]
	out := []string{}
	for topic, qmap := range t.topicQueueTable {
		for name := range qmap {
			if _, ok := names[name]; ok {
				out = append(out, topic)
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

// inClusterLocked reports whether brokerName belongs to cluster. Caller
// holds t.mu.
func (t *routeTable) inClusterLocked(cluster, brokerName string) bool {
	_, ok := t.clusterAddrTable[cluster][brokerName]
	return ok
}

// askFullRegistrationLocked marks brokerName's master for a full
// registration. Caller holds t.mu.
func (t *routeTable) askFullRegistrationLocked(brokerName string) {
	bd := t.brokerAddrTable[brokerName]
	if bd == nil {
		return
	}
	if live := t.brokerLiveTable[bd.BrokerAddrs[protocol.MasterID]]; live != nil {
		live.needFull = true
	}
}

// connClosed reports whether conn has closed.
func connClosed(conn *remoting.Conn) bool {
	select {
	case <-conn.Done():
		return true
	default:
		return false
	}
}

// actAsMaster presents the lowest-id replica of a group with no master as
// its acting master (id 0), as RocketMQ 5's name server does with
// supportActingMaster: stock clients look up consumer offsets and queue
// bounds at id 0 only, so without it they could not read a group whose
// master is down. The caller removes the write permission from the
// group's queues, so producers send elsewhere and the replica serves
// reads only. It reports whether it changed b.
func actAsMaster(b *protocol.BrokerData) bool {
	if len(b.BrokerAddrs) == 0 || b.BrokerAddrs[protocol.MasterID] != "" {
		return false
	}
	minID := slices.Min(slices.Collect(maps.Keys(b.BrokerAddrs)))
	b.BrokerAddrs[protocol.MasterID] = b.BrokerAddrs[minID]
	delete(b.BrokerAddrs, minID)
	if z, ok := b.BrokerAddrZones[minID]; ok {
		b.BrokerAddrZones[protocol.MasterID] = z
		delete(b.BrokerAddrZones, minID)
	}
	b.EnableActingMaster = true
	return true
}
