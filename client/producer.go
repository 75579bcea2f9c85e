package client

import (
	"context"
	"sync"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
)

// Producer defaults.
const (
	DefaultProducerGroup           = "DEFAULT_PRODUCER"
	DefaultSendTimeout             = 3 * time.Second
	DefaultSendAttemptTimeout      = 1 * time.Second
	DefaultBrokerIsolation         = 3 * time.Second
	DefaultCompressThreshold       = 4096
	DefaultProducerHeartbeatPeriod = 30 * time.Second
)

// ProducerConfig configures a Producer.
type ProducerConfig struct {
	ClientConfig

	// Group is the producer group. Empty means DefaultProducerGroup.
	Group string

	// SendTimeout bounds one SendSync / SendAsync / SendOrderly call,
	// failover included; a context deadline that is nearer wins. Zero means
	// DefaultSendTimeout (3 s).
	SendTimeout time.Duration

	// SendAttemptTimeout bounds one attempt on one broker; when it passes
	// the send moves to another broker and the connection to the silent
	// one is closed. Zero means DefaultSendAttemptTimeout (1 s).
	SendAttemptTimeout time.Duration

	// SendSuspectAfter is how long an attempt waits for an answer before it
	// checks whether the broker went silent: it asks that broker and
	// another one of the route whether they answer, and moves the send on
	// at once when the other answers and this one does not (a hung broker
	// is left after about SendSuspectAfter + 100 ms instead of
	// SendAttemptTimeout; a slow one still answers the check and is waited
	// for). Zero means DefaultSendSuspectAfter (100 ms); negative turns the
	// check off.
	SendSuspectAfter time.Duration

	// BrokerIsolation is how long a broker that failed an attempt is tried
	// only after every other broker (or until a route shows it
	// re-registered). Zero means DefaultBrokerIsolation (3 s).
	BrokerIsolation time.Duration

	// CompressThreshold is the body size from which bodies travel
	// zlib-compressed. Zero means DefaultCompressThreshold (4 KiB);
	// negative disables compression.
	CompressThreshold int

	// MaxMessageSize caps a body (a batch's bodies together). Zero means
	// 4 MiB, the broker's default limit.
	MaxMessageSize int

	// HeartbeatInterval is how often the producer announces its group to
	// the brokers it sends to (HEART_BEAT). Zero means 30 s; producers need
	// no faster heartbeat, nothing is allocated to them.
	HeartbeatInterval time.Duration

	// TransactionChecker answers the brokers' questions about half
	// messages (SendHalf) of this group left pending; nil ignores them
	// (they stay pending). See transaction.go.
	TransactionChecker TransactionChecker
}

// Producer sends messages to the brokers of its own IDC and fails over to
// other brokers and IDCs inside each send call. A Producer is safe for
// concurrent use; make one per process and share it.
type Producer struct {
	cfg    ProducerConfig
	c      *core
	s      *sender
	orders *orderPolicies // order_policy.go

	mu      sync.Mutex
	closing bool
	async   sync.WaitGroup
}

// NewProducer validates cfg and returns a producer that is not started.
func NewProducer(cfg ProducerConfig) (*Producer, error) {
	if cfg.Group == "" {
		cfg.Group = DefaultProducerGroup
	}
	if err := protocol.ValidateGroup(cfg.Group); err != nil {
		return nil, &ConfigError{"Group", err.Error()}
	}
	cfg.SendTimeout = orDefault(cfg.SendTimeout, DefaultSendTimeout)
	cfg.SendAttemptTimeout = orDefault(cfg.SendAttemptTimeout, DefaultSendAttemptTimeout)
	cfg.BrokerIsolation = orDefault(cfg.BrokerIsolation, DefaultBrokerIsolation)
	if cfg.SendSuspectAfter == 0 {
		cfg.SendSuspectAfter = DefaultSendSuspectAfter
	}
	cfg.HeartbeatInterval = orDefault(cfg.HeartbeatInterval, DefaultProducerHeartbeatPeriod)
	if cfg.CompressThreshold == 0 {
		cfg.CompressThreshold = DefaultCompressThreshold
	}
	cfg.MaxMessageSize = orDefaultInt(cfg.MaxMessageSize, protocol.DefaultMaxMessageSize)
	c, err := newCore(cfg.ClientConfig, protocol.ClientRoleProducer)
	if err != nil {
		return nil, err
	}
	cfg.ClientConfig = c.cfg
	p := &Producer{cfg: cfg, c: c}
	p.s = newSender(c, cfg.Group, cfg.SendTimeout, cfg.SendAttemptTimeout, cfg.BrokerIsolation, cfg.CompressThreshold, cfg.MaxMessageSize)
	p.s.suspectAfter = cfg.SendSuspectAfter
	p.orders = newOrderPolicies(c)
	c.groups = func() []string { return []string{cfg.Group} }
	c.rc.Handle(int32(protocol.CheckTransactionState), p.handleCheckTransactionState)
	return p, nil
}

// Start learns the name servers and starts the background loops. It fails
// when no name server is known (no address server answered and no
// NamesrvAddrs are configured).
func (p *Producer) Start(ctx context.Context) error {
	if err := p.c.start(ctx); err != nil {
		return err
	}
	p.c.goLoop(p.heartbeatLoop)
	return nil
}

// Shutdown waits for asynchronous sends to finish (until ctx ends), then
// stops the producer and closes its connections. It is idempotent.
func (p *Producer) Shutdown(ctx context.Context) error {
	p.mu.Lock()
	p.closing = true
	p.mu.Unlock()
	done := make(chan struct{})
	go func() { p.async.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
	_, err := p.c.stop(ctx)
	return err
}

// ClientID is the producer's client id, "<ip>@<instance>@idc=<idc>" (valid
// after Start).
func (p *Producer) ClientID() string { return p.c.id() }

// NameServer is the name server the producer asks first right now: one of
// its own IDC while any is alive. It is meant for diagnostics.
func (p *Producer) NameServer() string { return p.c.ns.current() }

// SendSync sends msgs and waits until a broker stored them. One message
// goes as SEND_MESSAGE; several (same topic) as one batch. A failed or
// silent broker is left for another one at once, own IDC first: an error
// comes back only when every broker failed, a broker refused the message
// itself (e.g. CodeMessageIllegal), or SendTimeout passed. The error is a
// *SendError listing each attempt.
func (p *Producer) SendSync(ctx context.Context, msgs ...*Message) (*SendResult, error) {
	if err := p.c.running(); err != nil {
		return nil, err
	}
	out, err := p.s.prepare(msgs)
	if err != nil {
		return nil, err
	}
	return p.s.sendSync(ctx, out) // sendasync.go
}

// SendAsync sends msgs like SendSync and calls cb once with the outcome,
// on another goroutine. Cancelling ctx abandons the send's retries; an
// attempt already written still ends within SendAttemptTimeout. Usually no
// goroutine waits through the round trip (see sender.sendAsync), so many
// sends in flight cost little. It returns an
// error (and does not call cb) only when the messages are invalid or the
// producer is not running. Shutdown waits for pending callbacks.
//
// The callbacks of answers that arrive together run one after another on
// one goroutine (as RocketMQ's Java client runs them on its callback
// executor): cb should return quickly, and must not wait for another
// send's callback. Hand slow work to a goroutine of your own.
func (p *Producer) SendAsync(ctx context.Context, cb func(*SendResult, error), msgs ...*Message) error {
	if err := p.c.running(); err != nil {
		return err
	}
	out, err := p.s.prepare(msgs)
	if err != nil {
		return err
	}
	p.mu.Lock()
	if p.closing {
		p.mu.Unlock()
		return ErrShutdown
	}
	p.async.Add(1)
	p.mu.Unlock()
	p.s.sendAsync(ctx, out, cb, &p.async) // sendasync.go
	return nil
}

// SendOneway sends msgs without waiting for the broker to store them:
// fastest, and no delivery guarantee. Only a failure to write to any broker
// is reported.
func (p *Producer) SendOneway(ctx context.Context, msgs ...*Message) error {
	if err := p.c.running(); err != nil {
		return err
	}
	out, err := p.s.prepare(msgs)
	if err != nil {
		return err
	}
	out.oneway = true
	_, err = p.s.send(ctx, out, p.s.pickRoundRobin)
	return err
}

// SendOrderly sends msg to the queue selector chooses, so messages the
// selector maps to one queue are stored in send order. The selector sees
// the writable queues of the own IDC's brokers (following the route's
// orderTopicConf when it has one), or every IDC's when the own IDC has
// none. What happens when the chosen queue's broker fails is the topic's
// OrderPolicy: under OrderAvailable (the default) the selector is asked
// again without that broker's queues, so the message gets through but
// order across the failover is not kept; under OrderStrict the selector
// always sees the same queues and the send fails with
// ErrOrderedQueueUnavailable while the chosen queue's broker is down.
func (p *Producer) SendOrderly(ctx context.Context, msg *Message, selector QueueSelector, arg any) (*SendResult, error) {
	if err := p.c.running(); err != nil {
		return nil, err
	}
	if selector == nil {
		selector = HashSelector{}
	}
	out, err := p.s.prepare([]*Message{msg})
	if err != nil {
		return nil, err
	}
	pick := p.s.pickSelected(msg, selector, arg)
	if p.orders.policy(ctx, msg.Topic) == OrderStrict {
		pick = p.orders.pickStrict(p.s, msg, selector, arg)
	}
	return p.s.send(ctx, out, pick)
}

// heartbeatLoop announces the producer group to the brokers it sends to.
func (p *Producer) heartbeatLoop(ctx context.Context) {
	// The loop wakes every second so that a broker the producer starts to
	// send to learns its client id (and so its IDC, which the broker's
	// per-IDC metrics and the console read) within a second; each broker
	// still gets a heartbeat only once per HeartbeatInterval.
	last := map[string]time.Time{}
	everyTick(ctx, min(time.Second, p.cfg.HeartbeatInterval), nil, func(ctx context.Context) {
		hb := protocol.HeartbeatData{
			ClientID:        p.c.id(),
			ProducerDataSet: []protocol.ProducerData{{GroupName: p.cfg.Group}},
			ConsumerDataSet: []protocol.ConsumerData{},
		}
		body := mustJSON(&hb)
		p.c.routes.mu.Lock()
		var addrs []string
		seen := map[string]bool{}
		for _, r := range p.c.routes.topics {
			for _, b := range r.brokers {
				if a := b.master(); a != "" && !seen[a] {
					seen[a] = true
					addrs = append(addrs, a)
				}
			}
		}
		p.c.routes.mu.Unlock()
		now := time.Now()
		for _, a := range addrs {
			if now.Sub(last[a]) < p.cfg.HeartbeatInterval {
				continue
			}
			last[a] = now
			if _, err := p.c.invoke(ctx, a, request(protocol.HeartBeat, nil, body), p.cfg.RequestTimeout); err != nil && ctx.Err() == nil {
				p.c.logger.Debug("producer heartbeat failed", "broker", a, "err", err)
			}
		}
	})
}
