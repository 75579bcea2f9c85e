package client

import (
	"context"
	"strconv"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
)

// MessageModel is how a group shares a topic's messages.
type MessageModel int

// Message models.
const (
	// Clustering delivers each message to one consumer of the group; queues
	// are allocated over the group's consumers per broker, own IDC first.
	Clustering MessageModel = iota
	// Broadcasting delivers every message to every consumer of the group.
	// Offsets are kept in the consumer's memory only.
	Broadcasting
)

// String names the model as RocketMQ does.
func (m MessageModel) String() string {
	if m == Broadcasting {
		return protocol.MessageModelBroadcast
	}
	return protocol.MessageModelCluster
}

// ConsumeFromWhere says where a group with no committed offset for a queue
// starts reading it. A committed offset always wins (RocketMQ's rule).
type ConsumeFromWhere int

// Starting points.
const (
	// ConsumeFromLastOffset starts after the messages already stored.
	ConsumeFromLastOffset ConsumeFromWhere = iota
	// ConsumeFromFirstOffset starts at the oldest stored message.
	ConsumeFromFirstOffset
	// ConsumeFromTimestamp starts at the first message stored at or after
	// ConsumerConfig.ConsumeTimestamp.
	ConsumeFromTimestamp
)

// String names the starting point as RocketMQ does.
func (w ConsumeFromWhere) String() string {
	switch w {
	case ConsumeFromFirstOffset:
		return "CONSUME_FROM_FIRST_OFFSET"
	case ConsumeFromTimestamp:
		return "CONSUME_FROM_TIMESTAMP"
	case ConsumeFromLastOffset:
		return "CONSUME_FROM_LAST_OFFSET"
	}
	return "ConsumeFromWhere(" + strconv.Itoa(int(w)) + ")"
}

// ConsumeResult is a handler's verdict on a batch.
type ConsumeResult int

// Consume results.
const (
	// ConsumeSuccess: the batch is done; its offsets may be committed.
	ConsumeSuccess ConsumeResult = iota
	// ConsumeRetryLater: deliver the batch again later. Concurrent
	// consumers send each message back to the broker (retry topic, growing
	// delay, dead-letter queue after MaxReconsumeTimes); orderly consumers
	// suspend the queue for OrderlySuspendTime and retry in place.
	ConsumeRetryLater
)

// Handler consumes a batch of messages (ConsumeBatchSize at most, one queue,
// in queue order). ctx ends when the consumer shuts down. A panicking
// handler counts as ConsumeRetryLater.
type Handler func(ctx context.Context, msgs []*MessageExt) ConsumeResult

// Consumer defaults.
const (
	DefaultConsumeGoroutines    = 20
	DefaultConsumeBatchSize     = 1
	DefaultPullBatchSize        = 128
	DefaultMaxCachedMessages    = 1000
	DefaultMaxReconsumeTimes    = 16
	DefaultHeartbeatInterval    = 1 * time.Second
	DefaultRebalanceInterval    = 5 * time.Second
	DefaultOffsetCommitInterval = 1 * time.Second
	DefaultLongPollTimeout      = 15 * time.Second
	DefaultPullBackoff          = 100 * time.Millisecond
	DefaultOrderlySuspendTime   = 1 * time.Second
	DefaultLockRenewInterval    = 10 * time.Second
)

// ConsumerConfig configures a PushConsumer.
type ConsumerConfig struct {
	ClientConfig

	// Group is the consumer group; required.
	Group string

	// MessageModel is Clustering (the zero value) or Broadcasting.
	MessageModel MessageModel

	// ConsumeFromWhere applies to queues the group has no committed offset
	// for. The zero value is ConsumeFromLastOffset.
	ConsumeFromWhere ConsumeFromWhere

	// ConsumeTimestamp is the start for ConsumeFromTimestamp. Zero means
	// half an hour before Start (RocketMQ's default).
	ConsumeTimestamp time.Time

	// Orderly consumes each queue in order: one handler call at a time per
	// queue, on a goroutine of its own. (In clustering mode every consumer,
	// orderly or not, locks its queues on their broker with LOCK_BATCH_MQ,
	// so no two consumers ever hold one queue.)
	Orderly bool

	// ConsumeGoroutines is how many handler calls may run at once in
	// concurrent mode. Zero means DefaultConsumeGoroutines (20).
	ConsumeGoroutines int

	// ConsumeBatchSize is the most messages one handler call gets. Zero
	// means DefaultConsumeBatchSize (1).
	ConsumeBatchSize int

	// PullBatchSize is the most messages one pull asks for. Zero means
	// DefaultPullBatchSize (128; RocketMQ's clients default to 32): each
	// pull costs both sides a round trip and a few system calls whatever
	// it carries, so larger batches cut the CPU per consumed message by
	// about a quarter (docs/client.md). The broker answers at most 256.
	PullBatchSize int

	// MaxCachedMessages is how many pulled but unconsumed messages one queue
	// may hold before pulling pauses. Zero means DefaultMaxCachedMessages
	// (1000).
	MaxCachedMessages int

	// MaxReconsumeTimes is how often a message is redelivered before it goes
	// to the group's dead-letter queue. Zero means DefaultMaxReconsumeTimes
	// (16).
	MaxReconsumeTimes int

	// RetryDelayLevel is the delay level of a redelivery after
	// ConsumeRetryLater (1 = 1 s, 2 = 5 s, 3 = 10 s, ...). Zero lets the
	// broker choose: 3 + the message's reconsume times, RocketMQ's growing
	// back-off.
	RetryDelayLevel int

	// HeartbeatInterval is how often the consumer sends HEART_BEAT (its
	// subscriptions) to every broker of every IDC in its routes. Zero means
	// DefaultHeartbeatInterval (1 s); see docs/client.md for why.
	HeartbeatInterval time.Duration

	// RebalanceInterval is the safety-net period of rebalancing; brokers'
	// notices and route changes trigger it at once. Zero means
	// DefaultRebalanceInterval (5 s).
	RebalanceInterval time.Duration

	// OffsetCommitInterval is how often consumed offsets are committed to
	// the brokers (also at every hand-over and at Shutdown). Zero means
	// DefaultOffsetCommitInterval (1 s).
	OffsetCommitInterval time.Duration

	// LongPollTimeout is how long a broker may hold a pull that finds no
	// message. Zero means DefaultLongPollTimeout (15 s).
	LongPollTimeout time.Duration

	// PullBackoff is the first pause after a failed pull; it doubles up to
	// 1 s. Zero means DefaultPullBackoff (100 ms).
	PullBackoff time.Duration

	// OrderlySuspendTime is the pause before an orderly queue retries a
	// batch its handler asked to retry. Zero means
	// DefaultOrderlySuspendTime (1 s).
	OrderlySuspendTime time.Duration

	// LockRenewInterval is how often an orderly consumer renews its queue
	// locks. Zero means DefaultLockRenewInterval (10 s).
	LockRenewInterval time.Duration
}

func (cfg *ConsumerConfig) normalize() error {
	if err := protocol.ValidateGroup(cfg.Group); err != nil {
		return &ConfigError{"Group", err.Error()}
	}
	if cfg.MessageModel != Clustering && cfg.MessageModel != Broadcasting {
		return &ConfigError{"MessageModel", "unknown model"}
	}
	switch cfg.ConsumeFromWhere {
	case ConsumeFromLastOffset, ConsumeFromFirstOffset, ConsumeFromTimestamp:
	default:
		return &ConfigError{"ConsumeFromWhere", "unknown starting point"}
	}
	if cfg.RetryDelayLevel < 0 {
		return &ConfigError{"RetryDelayLevel", "must not be negative"}
	}
	cfg.ConsumeGoroutines = orDefaultInt(cfg.ConsumeGoroutines, DefaultConsumeGoroutines)
	cfg.ConsumeBatchSize = orDefaultInt(cfg.ConsumeBatchSize, DefaultConsumeBatchSize)
	cfg.PullBatchSize = orDefaultInt(cfg.PullBatchSize, DefaultPullBatchSize)
	cfg.MaxCachedMessages = orDefaultInt(cfg.MaxCachedMessages, DefaultMaxCachedMessages)
	cfg.MaxReconsumeTimes = orDefaultInt(cfg.MaxReconsumeTimes, DefaultMaxReconsumeTimes)
	cfg.HeartbeatInterval = orDefault(cfg.HeartbeatInterval, DefaultHeartbeatInterval)
	cfg.RebalanceInterval = orDefault(cfg.RebalanceInterval, DefaultRebalanceInterval)
	cfg.OffsetCommitInterval = orDefault(cfg.OffsetCommitInterval, DefaultOffsetCommitInterval)
	cfg.LongPollTimeout = orDefault(cfg.LongPollTimeout, DefaultLongPollTimeout)
	cfg.PullBackoff = orDefault(cfg.PullBackoff, DefaultPullBackoff)
	cfg.OrderlySuspendTime = orDefault(cfg.OrderlySuspendTime, DefaultOrderlySuspendTime)
	cfg.LockRenewInterval = orDefault(cfg.LockRenewInterval, DefaultLockRenewInterval)
	return nil
}
