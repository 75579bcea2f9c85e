package broker

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/zonemq/zonemq/internal/protocol"
)

// extraServices is the state of the features registered by
// registerExtraHandlers (Server.extra). Their settings are Options fields:
// MessageDelayLevel, LockLease, TransactionCheckInterval,
// TransactionTimeout and TransactionCheckMax.
type extraServices struct {
	schedule     *scheduleService
	locks        *lockTable
	transactions *transactionService
	sql          *sqlFilterCache
	timers       *timerService
}

// registerExtraHandlers is the seam for retry, dead-letter, delay,
// transaction and queue-lock support. New calls it last, when the store,
// the topic and group tables, the client registry and the core handlers are
// ready, and fails if it does (New then closes what it opened). It
// installs:
//
//   - the schedule service (schedule.go): s.schedule, its delivery loop and
//     the closer that persists its offsets; GET_ALL_DELAY_OFFSET;
//   - CONSUMER_SEND_MSG_BACK (sendback.go) and s.beforeRetryStore (dlq.go);
//   - LOCK_BATCH_MQ and UNLOCK_BATCH_MQ (lock.go, lock_table.go);
//   - transaction half messages: s.prepareTransaction, END_TRANSACTION and
//     the check loop (transaction.go, transaction_check.go).
//
// Persisted state that cannot be read (config/delayOffset.json,
// config/transactionState.json) is an error naming the file: starting
// anyway would silently deliver delayed messages again or re-check
// resolved transactions. A missing file is a fresh start.
func (s *Server) registerExtraHandlers() error {
	schedule, err := newScheduleService(s)
	if err != nil {
		return err
	}
	transactions, err := newTransactionService(s)
	if err != nil {
		return err
	}
	s.extra = extraServices{
		schedule:     schedule,
		locks:        newLockTable(s.opts.LockLease),
		transactions: transactions,
		sql:          newSQLFilterCache(),
	}
	s.handle(protocol.CheckClientConfig, s.handleCheckClientConfig)
	if err := s.ensureTraceTopic(); err != nil {
		return err
	}
	if s.extra.timers, err = newTimerService(s); err != nil {
		return err
	}
	s.addLoop(s.extra.timers.deliverLoop)
	s.addCloser(s.extra.timers.close)
	s.handle(protocol.RecallTimer, s.handleRecallTimer)

	s.schedule = schedule.schedule
	s.addLoop(schedule.deliverLoop)
	s.addCloser(schedule.close)
	s.handle(protocol.GetAllDelayOffset, schedule.handleGetAllDelayOffset)

	s.handle(protocol.ConsumerSendMsgBack, s.handleConsumerSendMsgBack)
	s.beforeRetryStore = s.retryToDLQ

	s.handle(protocol.LockBatchMQ, s.handleLockBatchMQ)
	s.handle(protocol.UnlockBatchMQ, s.handleUnlockBatchMQ)
	s.handle(protocol.QueryQueueLocks, s.handleQueryQueueLocks)
	s.addLoop(s.lockSweepLoop)

	s.prepareTransaction = transactions.prepare
	s.handle(protocol.EndTransaction, transactions.handleEndTransaction)
	s.addLoop(transactions.checkLoop)
	s.addCloser(transactions.close)
	return nil
}

// loadExtraMetadata reads the store metadata `name` into v, naming the file
// and what removing it would mean (consequence) when it cannot be read.
func (s *Server) loadExtraMetadata(name, consequence string, v any) (found bool, err error) {
	found, err = s.store.LoadMetadata(name, v)
	if err != nil {
		path := filepath.Join(s.opts.DataDir, "config", name+".json")
		return false, fmt.Errorf("%s cannot be read (repair it, or remove it to %s): %w", path, consequence, err)
	}
	return found, nil
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
