package broker

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/store"
	"github.com/zonemq/zonemq/internal/wallclock"
)

// topicsMetadata is the store metadata name of the topic table.
const topicsMetadata = "topics"

// Queue counts and permissions of the topics every broker has.
const (
	autoCreateTopicQueueNums = 8 // TBW102, as in RocketMQ
	retryTopicPerm           = protocol.PermReadWrite
	maxQueueNums             = 1024
	topicFilterSingleTag     = "SINGLE_TAG"
)

// topicTable is the broker's topic configs with their data version. Every
// change bumps the version and is persisted before it is visible to the
// name servers. Safe for concurrent use.
type topicTable struct {
	store  *store.Store
	logger *slog.Logger

	// max caps len(configs) for new topics (Options.MaxTopics).
	max int

	mu      sync.RWMutex
	configs map[string]protocol.TopicConfig
	version protocol.DataVersion
	// journaled counts the records in topics.journal; snapshotTopics the
	// topics in topics.json (topic_journal.go).
	journaled, snapshotTopics int
}

// loadTopicTable reads the persisted table and adds the topics every broker
// has: TBW102 (the auto-create template; only while auto-creation is on) and
// one named after the broker.
func loadTopicTable(st *store.Store, logger *slog.Logger, opts Options) (*topicTable, error) {
	t := &topicTable{store: st, logger: logger, configs: map[string]protocol.TopicConfig{}, max: opts.MaxTopics}
	if t.max <= 0 {
		t.max = DefaultMaxTopics
	}
	var w protocol.TopicConfigSerializeWrapper
	found, err := st.LoadMetadata(topicsMetadata, &w)
	if err != nil {
		return nil, fmt.Errorf("loading the topic table: %w", err)
	}
	if found {
		for name, cfg := range w.TopicConfigTable {
			cfg.TopicName = name
			t.configs[name] = cfg
		}
		t.version = w.DataVersion
		t.snapshotTopics = len(w.TopicConfigTable)
	}
	if err := t.replayJournal(); err != nil {
		return nil, err
	}
	changed := !found
	if opts.AutoCreateTopic {
		if _, ok := t.configs[protocol.AutoCreateTopicKey]; !ok {
			t.configs[protocol.AutoCreateTopicKey] = newTopicConfig(protocol.AutoCreateTopicKey, autoCreateTopicQueueNums,
				protocol.PermReadWrite|protocol.PermInherit)
			changed = true
		}
	} else if _, ok := t.configs[protocol.AutoCreateTopicKey]; ok {
		// Routes must not offer the template when auto-creation is off, or
		// producers would send to topics this broker then refuses.
		delete(t.configs, protocol.AutoCreateTopicKey)
		changed = true
	}
	if _, ok := t.configs[opts.BrokerName]; !ok {
		t.configs[opts.BrokerName] = newTopicConfig(opts.BrokerName, 1, protocol.PermReadWrite|protocol.PermInherit)
		changed = true
	}
	if changed {
		t.mu.Lock()
		t.version.Counter++
		t.version.Timestamp = nowMillis()
		err := t.compactLocked()
		t.mu.Unlock()
		if err != nil {
			return nil, err
		}
	}
	return t, nil
}

// newTopicConfig returns a config with queues read and write queues.
func newTopicConfig(name string, queues, perm int) protocol.TopicConfig {
	return protocol.TopicConfig{
		TopicName: name, ReadQueueNums: queues, WriteQueueNums: queues, Perm: perm,
		TopicFilterType: topicFilterSingleTag, Attributes: map[string]string{},
	}
}

// nowMillis is the data-version timestamp.
func nowMillis() int64 { return wallclock.UnixMilli() }

// wrapperLocked copies the table. Caller holds mu.
func (t *topicTable) wrapperLocked() protocol.TopicConfigSerializeWrapper {
	return protocol.TopicConfigSerializeWrapper{TopicConfigTable: maps.Clone(t.configs), DataVersion: t.version}
}

// get returns the config of topic.
func (t *topicTable) get(topic string) (protocol.TopicConfig, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	cfg, ok := t.configs[topic]
	return cfg, ok
}

// snapshot returns a copy of the table and its version.
func (t *topicTable) snapshot() protocol.TopicConfigSerializeWrapper {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.wrapperLocked()
}

// len returns the number of topics.
func (t *topicTable) len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.configs)
}

// put creates or replaces a topic. It reports whether anything changed.
func (t *topicTable) put(cfg protocol.TopicConfig) (bool, error) {
	if cfg.Attributes == nil {
		cfg.Attributes = map[string]string{}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	old, ok := t.configs[cfg.TopicName]
	if ok && sameTopicConfig(old, cfg) {
		return false, nil
	}
	if !ok && len(t.configs) >= t.max {
		return false, t.fullError(cfg.TopicName)
	}
	t.configs[cfg.TopicName] = cfg
	if err := t.commitLocked(cfg.TopicName); err != nil {
		if ok {
			t.configs[cfg.TopicName] = old
		} else {
			delete(t.configs, cfg.TopicName)
		}
		return false, err
	}
	return true, nil
}

// createIfAbsent creates cfg unless the topic exists; it returns the config
// in force and whether it was created now.
func (t *topicTable) createIfAbsent(cfg protocol.TopicConfig) (protocol.TopicConfig, bool, error) {
	if cfg.Attributes == nil {
		cfg.Attributes = map[string]string{}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if old, ok := t.configs[cfg.TopicName]; ok {
		return old, false, nil
	}
	if len(t.configs) >= t.max {
		return protocol.TopicConfig{}, false, t.fullError(cfg.TopicName)
	}
	t.configs[cfg.TopicName] = cfg
	if err := t.commitLocked(cfg.TopicName); err != nil {
		delete(t.configs, cfg.TopicName)
		return protocol.TopicConfig{}, false, err
	}
	return cfg, true, nil
}

// DefaultMaxTopics is Options.MaxTopics' default, the name servers' default
// per-broker registration limit (namesrv.DefaultMaxTopicsPerBroker): a
// broker holding more could not register them all.
const DefaultMaxTopics = 200_000

// errTopicTableFull wraps a refused creation.
var errTopicTableFull = errors.New("topic table full")

// fullError says why topic cannot be created. Caller holds t.mu.
func (t *topicTable) fullError(topic string) error {
	return fmt.Errorf("%w: cannot create topic %s: this broker holds %d topics, its limit (--max-topics, the name "+
		"servers' --max-topics-per-broker); delete unused topics first", errTopicTableFull, topic, len(t.configs))
}

// remove deletes a topic and reports whether it existed.
func (t *topicTable) remove(topic string) (bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	old, ok := t.configs[topic]
	if !ok {
		return false, nil
	}
	delete(t.configs, topic)
	if err := t.commitLocked(topic); err != nil {
		t.configs[topic] = old
		return false, err
	}
	return true, nil
}

func sameTopicConfig(a, b protocol.TopicConfig) bool {
	return a.TopicName == b.TopicName && a.ReadQueueNums == b.ReadQueueNums && a.WriteQueueNums == b.WriteQueueNums &&
		a.Perm == b.Perm && a.TopicFilterType == b.TopicFilterType && a.TopicSysFlag == b.TopicSysFlag &&
		a.Order == b.Order && maps.Equal(a.Attributes, b.Attributes)
}

// topicCreateError answers a failed topic creation: a full table says so
// and names the limit (the client can act on it); any other failure (the
// metadata write) is logged and answered without its paths.
func (s *Server) topicCreateError(req *remoting.Command, topic string, err error) *remoting.Command {
	if errors.Is(err, errTopicTableFull) {
		s.logger.Warn("topic not created: the topic table is full", "topic", topic, "err", err)
		return errorf(req, protocol.SystemError, "%v", err)
	}
	s.logger.Error("creating a topic", "topic", topic, "err", err)
	return errorf(req, protocol.SystemError, "creating topic %s failed", topic)
}
