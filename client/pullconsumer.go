package client

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/zonemq/zonemq/internal/idc"
	"github.com/zonemq/zonemq/internal/protocol"
)

// PullConsumerConfig configures a PullConsumer.
type PullConsumerConfig struct {
	ClientConfig

	// Group is the consumer group offsets are committed for; required.
	Group string

	// HeartbeatInterval is how often the group is announced (HEART_BEAT,
	// CONSUME_ACTIVELY) to the brokers of the topics fetched. Zero means
	// DefaultHeartbeatInterval (1 s).
	HeartbeatInterval time.Duration
	// OnOffsetReset, if set, is called when a broker resets the group's
	// offsets (`zonemq admin offset reset`, `mqadmin resetOffsetByTime`)
	// with the topic and the new offset of each of that broker's queues;
	// the application should continue from there instead of committing
	// the positions it held. It runs on its own goroutine. Nil: the reset
	// is not noticed.
	OnOffsetReset func(topic string, offsets map[MessageQueue]int64)
}

// PullConsumer reads queues the application chooses, at offsets it
// chooses: there is no rebalancing and no automatic commit. It is safe for
// concurrent use.
type PullConsumer struct {
	cfg PullConsumerConfig
	c   *core
	all *subscription

	mu     sync.Mutex
	topics map[string]*subscription // fetched topics, announced in heartbeats
}

// NewPullConsumer validates cfg and returns a consumer that is not started.
func NewPullConsumer(cfg PullConsumerConfig) (*PullConsumer, error) {
	if err := protocol.ValidateGroup(cfg.Group); err != nil {
		return nil, &ConfigError{"Group", err.Error()}
	}
	cfg.HeartbeatInterval = orDefault(cfg.HeartbeatInterval, DefaultHeartbeatInterval)
	c, err := newCore(cfg.ClientConfig, protocol.ClientRoleConsumer)
	if err != nil {
		return nil, err
	}
	cfg.ClientConfig = c.cfg
	all, _ := newSubscription("ALL", protocol.SubscribeAll, nil)
	pc := &PullConsumer{cfg: cfg, c: c, all: all, topics: map[string]*subscription{}}
	c.groups = func() []string { return []string{cfg.Group} }
	c.rc.Handle(int32(protocol.ResetConsumerClientOffset), pc.handleResetConsumerClientOffset)
	return pc, nil
}

// Start learns the name servers and starts the background loops.
func (pc *PullConsumer) Start(ctx context.Context) error {
	if err := pc.c.start(ctx); err != nil {
		return err
	}
	pc.c.goLoop(pc.heartbeatLoop)
	return nil
}

// Shutdown stops the consumer and closes its connections. It is
// idempotent.
func (pc *PullConsumer) Shutdown(ctx context.Context) error {
	_, err := pc.c.stop(ctx)
	return err
}

// ClientID is the consumer's client id (valid after Start).
func (pc *PullConsumer) ClientID() string { return pc.c.id() }

// FetchQueues lists topic's readable queues, those of the own IDC's brokers
// first, each broker's queues by id.
func (pc *PullConsumer) FetchQueues(ctx context.Context, topic string) ([]MessageQueue, error) {
	if err := pc.c.running(); err != nil {
		return nil, err
	}
	r, err := pc.c.routes.fetch(ctx, topic)
	if err != nil {
		return nil, err
	}
	if r.notFound {
		return nil, fmt.Errorf("%w: topic %s", ErrNoRoute, topic)
	}
	pc.mu.Lock()
	if pc.topics[topic] == nil {
		pc.topics[topic], _ = newSubscription(topic, protocol.SubscribeAll, nil)
	}
	pc.mu.Unlock()
	var out []MessageQueue
	brokers := idc.OwnFirst(r.readBrokers(), func(rb readBroker) string { return rb.broker.idc }, pc.cfg.IDC)
	for _, rb := range brokers {
		for q := 0; q < rb.queues; q++ {
			out = append(out, MessageQueue{Topic: topic, BrokerName: rb.broker.name, QueueID: q})
		}
	}
	return out, nil
}

// Pull reads up to maxNums messages of mq from offset (maxNums <= 0:
// DefaultPullBatchSize), without waiting for new ones. Continue at the
// result's NextBeginOffset.
func (pc *PullConsumer) Pull(ctx context.Context, mq MessageQueue, offset int64, maxNums int) (*PullResult, error) {
	if err := pc.c.running(); err != nil {
		return nil, err
	}
	if maxNums <= 0 {
		maxNums = DefaultPullBatchSize
	}
	b, err := pc.broker(ctx, mq)
	if err != nil {
		return nil, err
	}
	timeout := 10 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	res, err := pc.c.pull(ctx, b, pullRequest{group: pc.cfg.Group, mq: mq, offset: offset, maxNums: maxNums, commitOffset: -1, sub: pc.all}, timeout)
	if err != nil && retryable(err) {
		pc.c.routes.triggerRefresh()
	}
	return res, err
}

// CommitOffset stores the group's offset of mq on its broker.
func (pc *PullConsumer) CommitOffset(ctx context.Context, mq MessageQueue, offset int64) error {
	addr, err := pc.readAddrOf(ctx, mq)
	if err != nil {
		return err
	}
	return pc.c.updateOffset(ctx, addr, pc.cfg.Group, mq, offset)
}

// QueryOffset returns the group's committed offset of mq, or ErrNoOffset.
func (pc *PullConsumer) QueryOffset(ctx context.Context, mq MessageQueue) (int64, error) {
	addr, err := pc.readAddrOf(ctx, mq)
	if err != nil {
		return 0, err
	}
	return pc.c.queryOffset(ctx, addr, pc.cfg.Group, mq)
}

// MaxOffset returns the offset the next message stored in mq will get.
func (pc *PullConsumer) MaxOffset(ctx context.Context, mq MessageQueue) (int64, error) {
	addr, err := pc.readAddrOf(ctx, mq)
	if err != nil {
		return 0, err
	}
	return pc.c.queueOffset(ctx, protocol.GetMaxOffset, addr, mq)
}

// readAddrOf is where mq's offsets are read and committed (its broker's
// master, or a replica while the group has none): the consumer must be
// running, and the route is re-read once if mq's broker is unknown.
func (pc *PullConsumer) readAddrOf(ctx context.Context, mq MessageQueue) (string, error) {
	if err := pc.c.running(); err != nil {
		return "", err
	}
	b, err := pc.broker(ctx, mq)
	if err != nil {
		return "", err
	}
	return b.readAddr(), nil
}

// broker finds mq's broker, re-reading the route once if it is unknown.
func (pc *PullConsumer) broker(ctx context.Context, mq MessageQueue) (*brokerInfo, error) {
	if r := pc.c.routes.cached(mq.Topic); r != nil {
		if b := r.brokers[mq.BrokerName]; b != nil && b.readAddr() != "" {
			return b, nil
		}
	}
	r, err := pc.c.routes.fetch(ctx, mq.Topic)
	if err != nil {
		return nil, err
	}
	if b := r.brokers[mq.BrokerName]; b != nil && b.readAddr() != "" {
		return b, nil
	}
	return nil, fmt.Errorf("%w: broker %s of %s is not in the route", ErrNoRoute, mq.BrokerName, mq.Topic)
}

func (pc *PullConsumer) heartbeatLoop(ctx context.Context) {
	everyTick(ctx, pc.cfg.HeartbeatInterval, nil, func(ctx context.Context) {
		pc.mu.Lock()
		topics := make([]string, 0, len(pc.topics))
		for t := range pc.topics {
			topics = append(topics, t)
		}
		sort.Strings(topics)
		subs := make([]protocol.SubscriptionData, len(topics))
		for i, t := range topics {
			subs[i] = pc.topics[t].data
		}
		pc.mu.Unlock()
		if len(topics) == 0 {
			return
		}
		hb := mustJSON(&protocol.HeartbeatData{
			ClientID:        pc.c.id(),
			ProducerDataSet: []protocol.ProducerData{},
			ConsumerDataSet: []protocol.ConsumerData{{
				GroupName:           pc.cfg.Group,
				ConsumeType:         protocol.ConsumeActively,
				MessageModel:        protocol.MessageModelCluster,
				ConsumeFromWhere:    ConsumeFromLastOffset.String(),
				SubscriptionDataSet: subs,
			}},
		})
		for _, addr := range pc.c.routes.brokerAddrs(topics) {
			if err := pc.c.heartbeatBroker(ctx, addr, hb); err != nil && !errors.Is(err, context.Canceled) {
				pc.c.logger.Debug("pull consumer heartbeat failed", "broker", addr, "err", err)
			}
		}
	})
}
