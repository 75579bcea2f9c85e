package broker

import (
	"context"
	"encoding/json"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// Fast expiry of clients that announce their heartbeat period (the zonemq
// SDK heartbeats every second; stock clients every 30 s and say nothing, so
// they keep the 120 s channel expiry).
const (
	// fastExpiryBeats is how many announced periods of silence expire a
	// registration: one lost or late heartbeat is not enough.
	fastExpiryBeats = 3
	// minFastExpiry is the shortest expiry, whatever period is announced,
	// so a stall (GC pause, scheduling on a loaded host) is not an exit.
	minFastExpiry = 3 * time.Second
)

// heartbeatExpiry is the expiry of a registration whose heartbeat announced
// a period of millis ms: max(3 periods, 3 s), never beyond the channel
// expiry. 0 (no announcement) means the channel expiry.
func (s *Server) heartbeatExpiry(millis int64) time.Duration {
	if millis <= 0 {
		return 0
	}
	limit := s.opts.ChannelExpiry
	if millis >= int64(limit/time.Millisecond)/fastExpiryBeats {
		return limit // also keeps the multiplication below from overflowing
	}
	return min(max(fastExpiryBeats*time.Duration(millis)*time.Millisecond, minFastExpiry), limit)
}

// handleHeartBeat serves HEART_BEAT: it is the only source of a client's
// groups, id and subscriptions. Clustering consumer groups get their
// %RETRY% topic here, as in RocketMQ. A heartbeat announcing its period
// (heartbeatIntervalMillis, at the top level or per consumer group) makes
// those registrations expire after heartbeatExpiry instead.
func (s *Server) handleHeartBeat(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
	var hb protocol.HeartbeatData
	if err := json.Unmarshal(req.Body, &hb); err != nil {
		return errorf(req, protocol.InvalidParameter, "HEART_BEAT: the body is not a heartbeat: %v", err)
	}
	if hb.ClientID == "" {
		return errorf(req, protocol.InvalidParameter, "HEART_BEAT: the body has no clientID")
	}
	for _, cd := range hb.ConsumerDataSet {
		if err := protocol.ValidateGroup(cd.GroupName); err != nil {
			return errorf(req, protocol.InvalidParameter, "HEART_BEAT: consumer group: %v", err)
		}
	}
	for _, pd := range hb.ProducerDataSet {
		if err := protocol.ValidateGroup(pd.GroupName); err != nil {
			return errorf(req, protocol.InvalidParameter, "HEART_BEAT: producer group: %v", err)
		}
	}
	ch := clientChannel{conn: c, clientID: hb.ClientID, language: req.Language, version: req.Version, lastUpdate: time.Now(),
		expiry: s.heartbeatExpiry(hb.HeartbeatIntervalMillis)}
	for i := range hb.ConsumerDataSet {
		cd := &hb.ConsumerDataSet[i]
		cch := ch
		if cd.HeartbeatIntervalMillis > 0 {
			cch.expiry = s.heartbeatExpiry(cd.HeartbeatIntervalMillis)
		}
		group := s.groups.getOrCreate(cd.GroupName)
		if cd.MessageModel != protocol.MessageModelBroadcast {
			retry := newTopicConfig(protocol.RetryTopic(cd.GroupName), max(group.RetryQueueNums, 1), retryTopicPerm)
			if _, created, err := s.topics.createIfAbsent(retry); err != nil {
				return s.topicCreateError(req, retry.TopicName, err)
			} else if created {
				s.logger.Info("created retry topic", "topic", retry.TopicName)
				s.topicsChanged()
			}
		}
		if s.registry.registerConsumer(cch, cd) {
			s.logger.Info("consumer joined", "group", cd.GroupName, "client", hb.ClientID, "peer", c.RemoteAddr())
			s.consumerGroupChanged(cd.GroupName)
		}
	}
	for _, pd := range hb.ProducerDataSet {
		s.registry.registerProducer(ch, pd.GroupName)
	}
	return success(req, protocol.HeartbeatResponseExt(), nil)
}

// handleUnregisterClient serves UNREGISTER_CLIENT (Java clients at
// shutdown; the Go client just closes its connections).
func (s *Server) handleUnregisterClient(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.UnregisterClientRequestHeader
	if err := h.SetExt(req.ExtFields); err != nil {
		return badHeader(req, err)
	}
	for _, g := range s.registry.unregister(c, h.ProducerGroup, h.ConsumerGroup) {
		s.logger.Info("consumer left", "group", g, "client", h.ClientID)
		s.consumerGroupChanged(g)
	}
	return success(req, nil, nil)
}

// handleGetConsumerListByGroup serves GET_CONSUMER_LIST_BY_GROUP: the ids of
// the group's members, sorted. A client not in the list is given no queues.
func (s *Server) handleGetConsumerListByGroup(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.ConsumerGroupRequestHeader
	if err := h.SetExt(req.ExtFields); err != nil {
		return badHeader(req, err)
	}
	ids := s.registry.consumerIDs(h.ConsumerGroup)
	if len(ids) == 0 {
		return errorf(req, protocol.SystemError, "no consumer of group %s is connected to broker %s", h.ConsumerGroup, s.opts.BrokerName)
	}
	return successJSON(req, protocol.ConsumerListBody{ConsumerIDList: ids})
}

// handleGetConsumerConnectionList serves GET_CONSUMER_CONNECTION_LIST for
// admin tools: the group's connections and subscription.
func (s *Server) handleGetConsumerConnectionList(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.ConsumerGroupRequestHeader
	if err := h.SetExt(req.ExtFields); err != nil {
		return badHeader(req, err)
	}
	g, ok := s.registry.consumerGroup(h.ConsumerGroup)
	if !ok {
		return errorf(req, protocol.ConsumerNotOnline, "the consumer group %s is not online on broker %s", h.ConsumerGroup, s.opts.BrokerName)
	}
	cc := protocol.ConsumerConnection{
		ConnectionSet:     []protocol.Connection{},
		SubscriptionTable: g.subscriptions,
		ConsumeType:       g.consumeType,
		MessageModel:      g.messageModel,
		ConsumeFromWhere:  g.consumeFromWhere,
	}
	for _, ch := range s.registry.consumerChannels(h.ConsumerGroup) {
		cc.ConnectionSet = append(cc.ConnectionSet, protocol.Connection{
			ClientID: ch.clientID, ClientAddr: ch.conn.RemoteAddr(), Language: ch.language, Version: ch.version,
		})
	}
	return successJSON(req, cc)
}

// consumerGroupChanged queues a NOTIFY_CONSUMER_IDS_CHANGED for the group's
// members. It never blocks: when the queue is full the clients' own 20 s
// rebalance timer covers the lost notice.
func (s *Server) consumerGroupChanged(group string) {
	select {
	case s.notifyCh <- group:
	default:
		s.logger.Warn("notification queue full; consumers will rebalance on their timer", "group", group)
	}
}

// A group is told of a change at most once per gap: notifyGapPerMember for
// each member its last notice went to, at most notifyGap. A group whose
// members come and go all the time (hundreds of members on a loaded host,
// each late heartbeat a leave and a join) is told at most about 4 000
// member notices a second, whatever its size, and a small group at once.
// The first change after a quiet gap is told at once, and a change within
// the gap when the gap ends.
const (
	notifyGap          = 250 * time.Millisecond
	notifyGapPerMember = 250 * time.Microsecond
)

// notifyLoop tells every member of a changed group to rebalance at once, so
// a hand-over takes one round trip instead of a rebalance period; a group
// changing again within its gap is told once more when the gap ends. The
// notice is encoded once per group and queued on each member's connection
// without waiting for the write, so a member that does not read holds up
// no other (its connection closes at the write timeout). Before, every
// notice was encoded and written by a goroutine of its own per member: the
// 1 000-member point of BenchmarkConsumerGroupSize spent more than half of
// the broker's CPU there.
func (s *Server) notifyLoop(ctx context.Context) {
	last := map[string]time.Time{} // when each group was last told
	gap := map[string]time.Duration{}
	pending := map[string]bool{} // groups changed again within their gap
	notify := func(g string, now time.Time) {
		last[g] = now
		gap[g] = min(notifyGap, time.Duration(s.notifyGroup(g))*notifyGapPerMember)
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	var armedAt time.Time // when the timer fires; zero when it is not armed
	arm := func(now time.Time) {
		var next time.Time
		for g := range pending {
			if at := last[g].Add(gap[g]); next.IsZero() || at.Before(next) {
				next = at
			}
		}
		if !next.IsZero() && (armedAt.IsZero() || next.Before(armedAt)) {
			timer.Stop()
			timer.Reset(max(next.Sub(now), time.Millisecond))
			armedAt = next
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case group := <-s.notifyCh:
			now := time.Now()
			if now.Sub(last[group]) < gap[group] {
				pending[group] = true
				arm(now)
				continue
			}
			notify(group, now)
		case now := <-timer.C:
			armedAt = time.Time{}
			for g := range pending {
				if now.Sub(last[g]) >= gap[g] {
					delete(pending, g)
					notify(g, now)
				}
			}
			for g, at := range last {
				if now.Sub(at) > time.Minute && !pending[g] {
					delete(last, g) // a quiet group is told at once next time
					delete(gap, g)
				}
			}
			arm(now)
		}
	}
}

// notifyGroup queues a NOTIFY_CONSUMER_IDS_CHANGED for every member of
// group and returns how many it told.
func (s *Server) notifyGroup(group string) int {
	chs := s.registry.consumerChannels(group)
	if len(chs) == 0 {
		return 0
	}
	frame := remoting.OnewayFrame(remoting.NewRequest(int32(protocol.NotifyConsumerIDsChanged),
		(&protocol.ConsumerGroupRequestHeader{ConsumerGroup: group}).Ext(), nil))
	for _, ch := range chs {
		if err := ch.conn.SendFrame(frame); err != nil {
			s.logger.Debug("notifying a consumer failed", "group", group, "peer", ch.conn.RemoteAddr(), "err", err)
		}
	}
	return len(chs)
}

// expiryLoop closes the connections of clients silent for longer than
// their expiry; the close hook unregisters them and notifies their groups
// at once. It looks four times per shortest possible expiry (the channel
// expiry, or minFastExpiry for clients announcing a short heartbeat), so a
// silent client is dropped at most a quarter of that late; a look is one
// pass over the registry.
func (s *Server) expiryLoop(ctx context.Context) {
	every := max(min(10*time.Second, s.opts.ChannelExpiry/4, minFastExpiry/4), 10*time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	clock := expiryClock{every: every, last: time.Now()}
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			short, stalled := clock.tick(now)
			if stalled > 0 {
				s.logger.Warn("the broker was stalled; suspending short client expiries", "stalled", stalled, "for", minFastExpiry)
			}
			for _, conn := range s.registry.expired(now, s.opts.ChannelExpiry, short) {
				s.logger.Info("client silent past its heartbeat expiry; closing its connection",
					"peer", conn.RemoteAddr(), "channelExpiry", s.opts.ChannelExpiry)
				conn.Close()
			}
		}
	}
}

// expiryClock guards short expiries against the broker's own stalls. A
// tick far later than due means the broker was stopped or starved
// (SIGSTOP, a paused VM): its clients' silence is then the broker's, and
// the heartbeats they sent meanwhile are still unread. Short expiries are
// suspended for minFastExpiry after such a gap, so a broker coming back
// does not drop every zonemq client at once. Used by expiryLoop only.
type expiryClock struct {
	every      time.Duration // the tick period
	last       time.Time     // the previous tick
	graceUntil time.Time     // short expiries are suspended until then
}

// tick records a tick at now. It reports whether short expiries apply, and
// how long the broker was stalled when this tick reveals a stall.
func (c *expiryClock) tick(now time.Time) (short bool, stalled time.Duration) {
	if gap := now.Sub(c.last); gap > c.every+minFastExpiry/2 {
		stalled = gap - c.every
		c.graceUntil = now.Add(minFastExpiry)
	}
	c.last = now
	return !now.Before(c.graceUntil), stalled
}
