package broker

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
)

// extraOptions are the settings of the retry, delay, queue-lock and
// transaction features. Options has no fields for them yet, so New copies
// extraDefaults (tests override it before New and restore it afterwards).
type extraOptions struct {
	// delayLevels is the delay of each level, level 1 first: RocketMQ's
	// messageDelayLevel.
	delayLevels []time.Duration
	// scheduleFlushInterval bounds how stale the persisted delivery offsets
	// of the schedule service may be, and so how many deliveries a crash
	// can repeat.
	scheduleFlushInterval time.Duration
	// lockLease is how long a LOCK_BATCH_MQ lock lasts without renewal
	// (RocketMQ's rocketmq.broker.rebalance.lockMaxLiveTime).
	lockLease time.Duration
	// transactionCheckInterval is the period of the half-message check
	// (transactionCheckInterval).
	transactionCheckInterval time.Duration
	// transactionTimeout is the age at which an unresolved half message is
	// first checked (transactionTimeOut).
	transactionTimeout time.Duration
	// transactionCheckMax is how many checks a half message gets before it
	// is discarded (transactionCheckMax).
	transactionCheckMax int
}

// extraDefaults holds RocketMQ's defaults.
var extraDefaults = extraOptions{
	delayLevels:              mustParseDelayLevels(DefaultMessageDelayLevel),
	scheduleFlushInterval:    time.Second,
	lockLease:                60 * time.Second,
	transactionCheckInterval: 30 * time.Second,
	transactionTimeout:       6 * time.Second,
	transactionCheckMax:      15,
}

// extraServices is the state of the features registered by
// registerExtraHandlers. The Server has no field for it, so it is found
// through extrasByServer (see Server.extras).
type extraServices struct {
	opts         extraOptions
	schedule     *scheduleService
	locks        *lockTable
	transactions *transactionService
}

// extrasByServer maps a *Server to its *extraServices.
var extrasByServer sync.Map

// extras returns the extra services of s (nil before registerExtraHandlers
// and after Shutdown).
func (s *Server) extras() *extraServices {
	v, _ := extrasByServer.Load(s)
	x, _ := v.(*extraServices)
	return x
}

// registerExtraHandlers is the seam for retry, dead-letter, delay,
// transaction and queue-lock support. New calls it last, when the store,
// the topic and group tables, the client registry and the core handlers are
// ready. It installs:
//
//   - the schedule service (schedule.go): s.schedule, its delivery loop and
//     the closer that persists its offsets; GET_ALL_DELAY_OFFSET;
//   - CONSUMER_SEND_MSG_BACK (sendback.go) and s.beforeRetryStore (dlq.go);
//   - LOCK_BATCH_MQ and UNLOCK_BATCH_MQ (lock.go, lock_table.go);
//   - transaction half messages: s.prepareTransaction, END_TRANSACTION and
//     the check loop (transaction.go, transaction_check.go).
func (s *Server) registerExtraHandlers() {
	x := &extraServices{opts: extraDefaults}
	x.opts.delayLevels = append([]time.Duration(nil), extraDefaults.delayLevels...)
	extrasByServer.Store(s, x)

	x.schedule = newScheduleService(s, x.opts)
	s.schedule = x.schedule.schedule
	s.addLoop(x.schedule.deliverLoop)
	s.addCloser(x.schedule.close)
	s.handle(protocol.GetAllDelayOffset, x.schedule.handleGetAllDelayOffset)

	s.handle(protocol.ConsumerSendMsgBack, s.handleConsumerSendMsgBack)
	s.beforeRetryStore = s.retryToDLQ

	x.locks = newLockTable(x.opts.lockLease)
	s.handle(protocol.LockBatchMQ, s.handleLockBatchMQ)
	s.handle(protocol.UnlockBatchMQ, s.handleUnlockBatchMQ)
	s.addLoop(s.lockSweepLoop)

	x.transactions = newTransactionService(s, x.opts)
	s.prepareTransaction = x.transactions.prepare
	s.handle(protocol.EndTransaction, x.transactions.handleEndTransaction)
	s.addLoop(x.transactions.checkLoop)
	s.addCloser(x.transactions.close)

	// Forget s once it has stopped, so stopped brokers can be collected.
	s.addCloser(func() { extrasByServer.Delete(s) })
}

// ensureTopic creates cfg's topic unless it exists (registering the new
// topic with every name server) and returns the config in force.
func (s *Server) ensureTopic(cfg protocol.TopicConfig) (protocol.TopicConfig, error) {
	if got, ok := s.topics.get(cfg.TopicName); ok {
		return got, nil
	}
	got, created, err := s.topics.createIfAbsent(cfg)
	if err != nil {
		return got, fmt.Errorf("creating topic %s: %w", cfg.TopicName, err)
	}
	if created {
		s.logger.Info("created topic", "topic", cfg.TopicName, "queues", cfg.WriteQueueNums, "perm", cfg.Perm)
		s.topicsChanged()
	}
	return got, nil
}

// Property edits that keep the order of the other properties, unlike a
// ParseProperties / EncodeProperties round trip, which sorts them.

// setProperty returns props with name set to value: replaced in place if
// present, appended otherwise.
func setProperty(props, name, value string) string {
	var b strings.Builder
	b.Grow(len(props) + len(name) + len(value) + 2)
	found := false
	forEachProperty(props, func(item, k string) {
		if k == name {
			if found {
				return
			}
			found = true
			item = name + "\x01" + value
		}
		b.WriteString(item)
		b.WriteByte('\x02')
	})
	if !found {
		b.WriteString(name)
		b.WriteByte('\x01')
		b.WriteString(value)
		b.WriteByte('\x02')
	}
	return b.String()
}

// setPropertyIfAbsent sets name only when props lacks it.
func setPropertyIfAbsent(props, name, value string) string {
	if _, ok := protocol.Property(props, name); ok {
		return props
	}
	return setProperty(props, name, value)
}

// removeProperties returns props without the named properties.
func removeProperties(props string, names ...string) string {
	var b strings.Builder
	b.Grow(len(props))
	forEachProperty(props, func(item, k string) {
		for _, n := range names {
			if k == n {
				return
			}
		}
		b.WriteString(item)
		b.WriteByte('\x02')
	})
	return b.String()
}

// forEachProperty calls fn for every non-empty "key\x01value" item with
// its key. Items without a separator are dropped, as the decoders do.
func forEachProperty(props string, fn func(item, key string)) {
	for len(props) > 0 {
		item, rest, _ := strings.Cut(props, "\x02")
		props = rest
		k, _, ok := strings.Cut(item, "\x01")
		if !ok || k == "" {
			continue
		}
		fn(item, k)
	}
}
