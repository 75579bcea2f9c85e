package client

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// PushConsumer pulls messages from the brokers and hands them to the
// handlers registered with Subscribe.
//
// In clustering mode each queue of each broker is held by one consumer of
// the group: a broker's queues are allocated over the consumers of the
// broker's own IDC, plus consumers whose IDC has no live broker, and — when
// the broker sees no eligible consumer at all — over every consumer
// connected to it (docs/architecture.md §2 flow 5). A queue is locked on its
// broker while held, and changes hands in the order: old owner commits its
// offset and unlocks, new owner locks and reads the offset. Offsets are
// committed to the queue's broker every OffsetCommitInterval, at every
// hand-over and at Shutdown.
//
// Handlers run concurrently on up to ConsumeGoroutines goroutines, or, with
// Orderly, one goroutine per queue. The PushConsumer's methods are safe for
// concurrent use.
type PushConsumer struct {
	cfg ConsumerConfig
	c   *core
	s   *sender // sends retries when CONSUMER_SEND_MSG_BACK fails

	// rebalanceMu serialises rebalances with each other and with Shutdown,
	// so a hand-over never interleaves with another. Lock order:
	// rebalanceMu, then mu, then a processQueue's mu.
	rebalanceMu sync.Mutex

	mu       sync.Mutex
	closing  bool                     // Shutdown began: take no queue
	subs     map[string]*subscription // by topic, the retry topic included
	queues   map[MessageQueue]*processQueue
	local    map[MessageQueue]int64 // broadcasting offsets
	brokerOK map[string]bool        // last heartbeat outcome per broker address
	// silent marks the brokers whose last heartbeat got no answer (timed
	// out or could not connect); rebalance does not wait on them.
	silent map[string]bool
	// seen remembers every broker address a route listed, and when, so the
	// heartbeat keeps knocking on a broker that left the routes: the first
	// answer after its return triggers a route refresh and a rebalance at
	// once instead of at the next RouteRefreshInterval.
	seen    map[string]time.Time
	watched map[*remoting.Conn]bool
	// closingConns are broker connections whose broker said it is stopping
	// or handing its group over (BROKER_CLOSING), and when: its queues are
	// not taken again until the connection closes or closingHold passes.
	closingConns map[*remoting.Conn]time.Time

	rebalanceCh chan struct{}
	heartbeatCh chan struct{}
	consumeCh   chan *consumeRequest
	startTime   time.Time
}

// NewPushConsumer validates cfg and returns a consumer that is not started.
func NewPushConsumer(cfg ConsumerConfig) (*PushConsumer, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	c, err := newCore(cfg.ClientConfig, protocol.ClientRoleConsumer)
	if err != nil {
		return nil, err
	}
	cfg.ClientConfig = c.cfg
	pc := &PushConsumer{
		cfg:          cfg,
		c:            c,
		subs:         map[string]*subscription{},
		queues:       map[MessageQueue]*processQueue{},
		local:        map[MessageQueue]int64{},
		brokerOK:     map[string]bool{},
		silent:       map[string]bool{},
		seen:         map[string]time.Time{},
		watched:      map[*remoting.Conn]bool{},
		closingConns: map[*remoting.Conn]time.Time{},
		rebalanceCh:  make(chan struct{}, 1),
		heartbeatCh:  make(chan struct{}, 1),
		consumeCh:    make(chan *consumeRequest, cfg.ConsumeGoroutines),
	}
	pc.s = newSender(c, "CLIENT_INNER_PRODUCER", DefaultSendTimeout, DefaultSendAttemptTimeout, DefaultBrokerIsolation, -1, protocol.DefaultMaxMessageSize)
	c.groups = func() []string { return []string{cfg.Group} }
	c.routes.onChange(func(topic string, old, cur *route) {
		pc.mu.Lock()
		_, mine := pc.subs[topic]
		pc.mu.Unlock()
		if mine {
			pc.triggerHeartbeat()
			pc.triggerRebalance()
		}
	})
	c.rc.Handle(int32(protocol.NotifyConsumerIDsChanged), pc.handleNotifyConsumerIDsChanged)
	c.rc.Handle(int32(protocol.ResetConsumerClientOffset), pc.handleResetConsumerClientOffset)
	c.rc.Handle(int32(protocol.BrokerClosing), pc.handleBrokerClosing)
	return pc, nil
}

// Subscribe registers h for the messages of topic whose tag matches expr:
// "*" for every tag, or "A || B". Call it before Start. In clustering mode
// the group's retry topic is subscribed too; redelivered messages reach the
// handler of their original topic.
func (pc *PushConsumer) Subscribe(topic, expr string, h Handler) error {
	if h == nil {
		return &ConfigError{"Subscribe handler", "nil"}
	}
	if err := pc.c.running(); !errors.Is(err, ErrNotStarted) {
		return errors.New("zonemq client: Subscribe after Start")
	}
	sub, err := newSubscription(topic, expr, h)
	if err != nil {
		return err
	}
	return pc.subscribe(sub)
}

// subscribe adds sub (and, in clustering mode, the retry topic).
func (pc *PushConsumer) subscribe(sub *subscription) error {
	topic := sub.topic
	pc.mu.Lock()
	defer pc.mu.Unlock()
	pc.subs[topic] = sub
	if pc.cfg.MessageModel == Clustering {
		retry := protocol.RetryTopic(pc.cfg.Group)
		if _, ok := pc.subs[retry]; !ok {
			rs, err := newSubscription(retry, protocol.SubscribeAll, nil)
			if err != nil {
				return err
			}
			pc.subs[retry] = rs
		}
	}
	return nil
}

// Start connects, announces the consumer to every broker of its topics
// (HEART_BEAT), takes its share of the queues and starts consuming.
func (pc *PushConsumer) Start(ctx context.Context) error {
	pc.mu.Lock()
	n := len(pc.subs)
	pc.mu.Unlock()
	if n == 0 {
		return errors.New("zonemq client: Start without Subscribe")
	}
	pc.startTime = time.Now()
	if err := pc.c.start(ctx); err != nil {
		return err
	}
	for _, topic := range pc.topics() {
		if _, err := pc.c.routes.fetch(ctx, topic); err != nil {
			pc.c.logger.Warn("no route yet", "topic", topic, "err", err)
		}
	}
	pc.heartbeatAll(ctx)
	for i := 0; i < pc.cfg.ConsumeGoroutines; i++ {
		pc.c.goLoop(pc.consumeLoop)
	}
	pc.rebalance(ctx)
	pc.c.goLoop(pc.rebalanceLoop)
	pc.c.goLoop(pc.heartbeatLoop)
	pc.c.goLoop(pc.commitLoop)
	if pc.cfg.MessageModel == Clustering {
		pc.c.goLoop(pc.livenessLoop)
	}
	if pc.useLocks() {
		pc.c.goLoop(pc.lockLoop)
	}
	return nil
}

// Shutdown stops pulling, waits for running handlers (until ctx ends),
// commits every queue's offset, unlocks the queues and closes the
// connections; the brokers then tell the group's other consumers, which
// take the queues over from the committed offsets. It is idempotent.
func (pc *PushConsumer) Shutdown(ctx context.Context) error {
	if err := pc.c.running(); err != nil {
		if errors.Is(err, ErrNotStarted) {
			_, err := pc.c.stop(ctx)
			return err
		}
		return nil
	}
	// Holding rebalanceMu waits for a rebalance in progress and keeps the
	// next one from taking queues; closing makes it a no-op afterwards.
	pc.rebalanceMu.Lock()
	pc.mu.Lock()
	pc.closing = true
	held := make([]*processQueue, 0, len(pc.queues))
	for mq, pq := range pc.queues {
		held = append(held, pq)
		delete(pc.queues, mq)
	}
	pc.mu.Unlock()
	pc.release(ctx, held)
	pc.rebalanceMu.Unlock()
	_, err := pc.c.stop(ctx)
	return err
}

// ClientID is the consumer's client id, "<ip>@<instance>@idc=<idc>" (valid
// after Start).
func (pc *PushConsumer) ClientID() string { return pc.c.id() }

// NameServer is the name server the consumer asks first right now (for
// diagnostics).
func (pc *PushConsumer) NameServer() string { return pc.c.ns.current() }

// Queues lists the queues the consumer holds now, sorted.
func (pc *PushConsumer) Queues() []MessageQueue {
	pc.mu.Lock()
	out := make([]MessageQueue, 0, len(pc.queues))
	for mq := range pc.queues {
		out = append(out, mq)
	}
	pc.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		if a.BrokerName != b.BrokerName {
			return a.BrokerName < b.BrokerName
		}
		return a.QueueID < b.QueueID
	})
	return out
}

func (pc *PushConsumer) topics() []string {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	out := make([]string, 0, len(pc.subs))
	for t := range pc.subs {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

func (pc *PushConsumer) subscription(topic string) *subscription {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return pc.subs[topic]
}

// handleNotifyConsumerIDsChanged serves a broker's NOTIFY_CONSUMER_IDS_CHANGED:
// the group's membership changed there, so rebalance now.
func (pc *PushConsumer) handleNotifyConsumerIDsChanged(_ context.Context, cn *remoting.Conn, req *remoting.Command) *remoting.Command {
	if g := req.Ext("consumerGroup"); g == "" || g == pc.cfg.Group {
		pc.c.logger.Debug("broker notice: group membership changed", "broker", cn.RemoteAddr())
		pc.triggerRebalance()
	}
	return nil
}

func (pc *PushConsumer) triggerRebalance() {
	select {
	case pc.rebalanceCh <- struct{}{}:
	default:
	}
}

func (pc *PushConsumer) triggerHeartbeat() {
	select {
	case pc.heartbeatCh <- struct{}{}:
	default:
	}
}

// heartbeatData is the HEART_BEAT body: the group and its subscriptions.
func (pc *PushConsumer) heartbeatData() []byte {
	pc.mu.Lock()
	subs := make([]protocol.SubscriptionData, 0, len(pc.subs))
	for _, s := range pc.subs {
		subs = append(subs, s.data)
	}
	pc.mu.Unlock()
	sort.Slice(subs, func(i, j int) bool { return subs[i].Topic < subs[j].Topic })
	hb := protocol.HeartbeatData{
		ClientID:        pc.c.id(),
		ProducerDataSet: []protocol.ProducerData{},
		// zonemq brokers expire this consumer after 3 silent heartbeat
		// intervals instead of 120 s, so a hung consumer's queues move
		// within seconds; stock brokers ignore the field.
		HeartbeatIntervalMillis: pc.cfg.HeartbeatInterval.Milliseconds(),
		ConsumerDataSet: []protocol.ConsumerData{{
			GroupName:           pc.cfg.Group,
			ConsumeType:         protocol.ConsumePassively,
			MessageModel:        pc.cfg.MessageModel.String(),
			ConsumeFromWhere:    pc.cfg.ConsumeFromWhere.String(),
			SubscriptionDataSet: subs,
		}},
	}
	return mustJSON(&hb)
}

// forgetBrokerAfter is how long a broker that left the routes is still
// heartbeated (see PushConsumer.seen).
const forgetBrokerAfter = 10 * time.Minute

// suspectWindow is how long one failed heartbeat (or request) to a broker in
// the routes keeps the routes hurried. It spans a heartbeat interval plus a
// request timeout, so a broker that keeps failing keeps them hurried, and
// the window closes a few seconds after the broker left the routes.
const suspectWindow = 3 * time.Second

// isTransportError reports whether err says the peer did not answer or
// could not be reached (rather than answering with an error).
func isTransportError(err error) bool {
	return errors.Is(err, ErrTimeout) || errors.Is(err, ErrUnreachable)
}

// heartbeatAll sends HEART_BEAT to every broker (masters and slaves) of
// every IDC in the routes of the subscribed topics, and to those that left
// the routes recently, in parallel. A broker that answers again after
// failing triggers a route refresh and a rebalance: it is back, and may hold
// queues for us.
func (pc *PushConsumer) heartbeatAll(ctx context.Context) {
	body := pc.heartbeatData()
	now := time.Now()
	inRoute := map[string]bool{}
	current := pc.c.routes.brokerAddrs(pc.topics())
	pc.mu.Lock()
	for _, addr := range current {
		inRoute[addr] = true
		pc.seen[addr] = now
	}
	var addrs []string
	for addr, at := range pc.seen {
		if now.Sub(at) > forgetBrokerAfter {
			delete(pc.seen, addr)
			delete(pc.brokerOK, addr)
			delete(pc.silent, addr)
			continue
		}
		addrs = append(addrs, addr)
	}
	pc.mu.Unlock()
	var wg sync.WaitGroup
	for _, addr := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := pc.c.heartbeatBroker(ctx, addr, body)
			if ctx.Err() != nil {
				return
			}
			pc.mu.Lock()
			was, known := pc.brokerOK[addr]
			pc.brokerOK[addr] = err == nil
			pc.mu.Unlock()
			// Through markSilent, so that a broker going silent rebalances
			// every consumer that sees it, whichever request saw it first.
			pc.markSilent(addr, err != nil && isTransportError(err))
			if err != nil {
				pc.c.logger.Debug("broker heartbeat failed", "broker", addr, "err", err)
				if inRoute[addr] && isTransportError(err) {
					// It may be hung or dead: watch the routes closely so
					// the name server's verdict is seen at once.
					pc.c.routes.hurry(suspectWindow)
				}
				return
			}
			pc.watchBroker(addr)
			if (known && !was) || !inRoute[addr] {
				pc.c.logger.Info("broker answers again", "broker", addr, "inRoute", inRoute[addr])
				pc.c.routes.triggerRefresh()
				pc.triggerRebalance()
			}
		}()
	}
	wg.Wait()
}

// watchBroker rebalances the moment a broker connection closes: its queues
// may have to move, and a dead process is noticed through its closed
// connection before any timer.
func (pc *PushConsumer) watchBroker(addr string) {
	cn, ok := pc.c.rc.ConnIfOpen(addr)
	if !ok {
		return
	}
	pc.mu.Lock()
	if pc.watched[cn] {
		pc.mu.Unlock()
		return
	}
	pc.watched[cn] = true
	pc.mu.Unlock()
	cn.OnClose(func(cn *remoting.Conn) {
		pc.mu.Lock()
		delete(pc.watched, cn)
		delete(pc.closingConns, cn)
		pc.brokerOK[addr] = false
		pc.mu.Unlock()
		if pc.c.ctx.Err() == nil {
			pc.c.logger.Info("broker connection closed", "broker", addr, "err", cn.Err())
			if errors.Is(cn.Err(), remoting.ErrConnClosed) {
				// Closed on our side: only a request that got no answer
				// within its timeout does that (core.invoke), so the broker
				// is silent. Say so before the rebalance below, or it would
				// ask the hung broker for its view and wait a timeout.
				pc.markSilent(addr, true)
			}
			pc.brokerDown(addr)
			pc.c.routes.triggerRefresh()
			pc.triggerRebalance()
		}
	})
}

// heartbeatLoop heartbeats every HeartbeatInterval and at once when asked
// (after a route change).
func (pc *PushConsumer) heartbeatLoop(ctx context.Context) {
	everyTick(ctx, pc.cfg.HeartbeatInterval, pc.heartbeatCh, pc.heartbeatAll)
}
