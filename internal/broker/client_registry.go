package broker

import (
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// clientChannel is one client connection as its heartbeats describe it.
type clientChannel struct {
	conn       *remoting.Conn
	clientID   string // verbatim: zonemq SDK ids carry the client's IDC
	language   string
	version    int32
	lastUpdate time.Time
	// expiry is how long the registration lives without a heartbeat: 0
	// for the channel expiry, shorter for a client that announced a short
	// heartbeat period (heartbeatExpiry).
	expiry time.Duration
}

// consumerGroupInfo is one consumer group's members on this broker and the
// subscription they last reported.
type consumerGroupInfo struct {
	consumeType      string
	messageModel     string
	consumeFromWhere string
	subscriptions    map[string]protocol.SubscriptionData
	channels         map[*remoting.Conn]*clientChannel
}

// clientRegistry records the producers and consumers connected to the broker,
// keyed by connection: a client is gone when its connection closes or it has
// been silent for the channel expiry. Safe for concurrent use.
type clientRegistry struct {
	mu        sync.Mutex
	producers map[string]map[*remoting.Conn]*clientChannel
	consumers map[string]*consumerGroupInfo
}

func newClientRegistry() *clientRegistry {
	return &clientRegistry{
		producers: map[string]map[*remoting.Conn]*clientChannel{},
		consumers: map[string]*consumerGroupInfo{},
	}
}

// registerProducer records a producer group member.
func (r *clientRegistry) registerProducer(ch clientChannel, group string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if connClosed(ch.conn) {
		return
	}
	g := r.producers[group]
	if g == nil {
		g = map[*remoting.Conn]*clientChannel{}
		r.producers[group] = g
	}
	c := ch
	g[ch.conn] = &c
}

// registerConsumer records a consumer group member and the group's
// subscription. It reports whether the group's membership changed (a new
// connection, or a connection now carrying another client id).
func (r *clientRegistry) registerConsumer(ch clientChannel, data *protocol.ConsumerData) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if connClosed(ch.conn) {
		return false
	}
	g := r.consumers[data.GroupName]
	if g == nil {
		g = &consumerGroupInfo{channels: map[*remoting.Conn]*clientChannel{}}
		r.consumers[data.GroupName] = g
	}
	g.consumeType, g.messageModel, g.consumeFromWhere = data.ConsumeType, data.MessageModel, data.ConsumeFromWhere
	// The latest heartbeat's set is the group's subscription, as in
	// RocketMQ: every member is expected to subscribe alike.
	subs := make(map[string]protocol.SubscriptionData, len(data.SubscriptionDataSet))
	for _, sd := range data.SubscriptionDataSet {
		subs[sd.Topic] = sd
	}
	g.subscriptions = subs
	old, ok := g.channels[ch.conn]
	changed := !ok || old.clientID != ch.clientID
	c := ch
	g.channels[ch.conn] = &c
	return changed
}

// unregister removes conn from the named groups (UNREGISTER_CLIENT) and
// returns the consumer groups whose membership changed.
func (r *clientRegistry) unregister(conn *remoting.Conn, producerGroup, consumerGroup string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if g := r.producers[producerGroup]; g != nil {
		delete(g, conn)
		if len(g) == 0 {
			delete(r.producers, producerGroup)
		}
	}
	if g := r.consumers[consumerGroup]; g != nil {
		if _, ok := g.channels[conn]; ok {
			r.dropConsumerLocked(consumerGroup, g, conn)
			return []string{consumerGroup}
		}
	}
	return nil
}

// removeConn forgets conn everywhere and returns the consumer groups whose
// membership changed.
func (r *clientRegistry) removeConn(conn *remoting.Conn) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for name, g := range r.producers {
		delete(g, conn)
		if len(g) == 0 {
			delete(r.producers, name)
		}
	}
	var changed []string
	for name, g := range r.consumers {
		if _, ok := g.channels[conn]; ok {
			r.dropConsumerLocked(name, g, conn)
			changed = append(changed, name)
		}
	}
	sort.Strings(changed)
	return changed
}

// dropConsumerLocked removes conn from group g. Caller holds mu.
func (r *clientRegistry) dropConsumerLocked(name string, g *consumerGroupInfo, conn *remoting.Conn) {
	delete(g.channels, conn)
	if len(g.channels) == 0 {
		delete(r.consumers, name)
	}
}

// expired returns the connections with a registration older than its
// expiry: its own when it has one and short is true, else defaultExpiry.
// The caller closes them; the close hook then unregisters them.
func (r *clientRegistry) expired(now time.Time, defaultExpiry time.Duration, short bool) []*remoting.Conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[*remoting.Conn]bool{}
	var out []*remoting.Conn
	check := func(chs map[*remoting.Conn]*clientChannel) {
		for conn, ch := range chs {
			limit := defaultExpiry
			if short && ch.expiry > 0 {
				limit = ch.expiry
			}
			if now.Sub(ch.lastUpdate) > limit && !seen[conn] {
				seen[conn] = true
				out = append(out, conn)
			}
		}
	}
	for _, g := range r.producers {
		check(g)
	}
	for _, g := range r.consumers {
		check(g.channels)
	}
	return out
}

// consumerIDs returns the client ids of the group's members, sorted.
func (r *clientRegistry) consumerIDs(group string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.consumers[group]
	if g == nil {
		return nil
	}
	seen := map[string]bool{}
	ids := make([]string, 0, len(g.channels))
	for _, ch := range g.channels {
		if !seen[ch.clientID] {
			seen[ch.clientID] = true
			ids = append(ids, ch.clientID)
		}
	}
	sort.Strings(ids)
	return ids
}

// consumerChannels returns copies of the group's member channels, ordered
// by client id.
func (r *clientRegistry) consumerChannels(group string) []clientChannel {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.consumers[group]
	if g == nil {
		return nil
	}
	out := make([]clientChannel, 0, len(g.channels))
	for _, ch := range g.channels {
		out = append(out, *ch)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].clientID < out[j].clientID })
	return out
}

// consumerGroup returns a copy of the group's description without its
// channels, and whether the group has members.
func (r *clientRegistry) consumerGroup(group string) (consumerGroupInfo, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.consumers[group]
	if g == nil {
		return consumerGroupInfo{}, false
	}
	c := *g
	c.subscriptions = maps.Clone(g.subscriptions)
	c.channels = nil
	return c, true
}

// subscription returns the group's subscription to topic.
func (r *clientRegistry) subscription(group, topic string) (protocol.SubscriptionData, bool, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.consumers[group]
	if g == nil {
		return protocol.SubscriptionData{}, false, false
	}
	sd, ok := g.subscriptions[topic]
	return sd, true, ok
}

// counts returns the number of producer groups, consumer groups and distinct
// client connections.
func (r *clientRegistry) counts() (producerGroups, consumerGroups, conns int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[*remoting.Conn]bool{}
	for _, g := range r.producers {
		for c := range g {
			seen[c] = true
		}
	}
	for _, g := range r.consumers {
		for c := range g.channels {
			seen[c] = true
		}
	}
	return len(r.producers), len(r.consumers), len(seen)
}

// consumerGroupNames returns the groups with members, sorted.
func (r *clientRegistry) consumerGroupNames() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(maps.Keys(r.consumers))
}

// ConsumerIDs returns the client ids of the members of a consumer group
// connected to this broker, sorted, exactly as the clients sent them (zonemq
// SDK ids carry the client's IDC, e.g. "10.0.0.5@123@idc1").
func (s *Server) ConsumerIDs(group string) []string { return s.registry.consumerIDs(group) }

// connClosed reports whether conn has closed. Handlers run on their own
// goroutines, so a HEART_BEAT read just before its connection's EOF can be
// handled after the close hook removed the connection; registering it then
// would leave a member that never leaves (until the channel expiry) and
// skew every consumer's allocation. A closed connection's Done channel is
// closed before its close hooks run, and both paths hold r.mu, so a
// registration either precedes removeConn or sees the close.
func connClosed(conn *remoting.Conn) bool {
	if conn == nil {
		return false
	}
	select {
	case <-conn.Done():
		return true
	default:
		return false
	}
}
