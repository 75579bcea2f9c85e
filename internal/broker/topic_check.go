package broker

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/zonemq/zonemq/internal/protocol"
)

// ErrTopicsLost means the topic table (config/topics.json) lacks topics
// whose consume queues exist in the store: the file was damaged, replaced
// or restored from an old copy. Starting anyway would leave every message
// of those topics unreadable and their routes gone, so New refuses unless
// Options.RecoverMissingTopics is set.
var ErrTopicsLost = errors.New("broker: the topic table lost topics that have data")

// checkStoredTopics compares the topic table with the topics that have
// consume queues in the store. Topics the broker creates itself (system
// topics) are exempt: it re-creates their configs. With
// RecoverMissingTopics it re-creates each missing topic with as many queues
// as it has on disk (at least the default) and read-write permission, and
// logs each.
func (s *Server) checkStoredTopics() error {
	var missing []string
	for _, topic := range s.store.Topics() {
		if _, ok := s.topics.get(topic); ok || protocol.IsSystemTopic(topic) {
			continue
		}
		missing = append(missing, topic)
	}
	if len(missing) == 0 {
		return nil
	}
	if !s.isMaster() {
		// A replica copies the master's table every second and serves
		// topics its log has before the table arrives (readableTopic).
		s.logger.Warn("topics with queues on disk are missing from the topic table; a replica takes the master's table",
			"topics", len(missing), "first", missing[0])
		return nil
	}
	if !s.opts.Hardening.RecoverMissingTopics {
		shown := missing[:min(len(missing), 10)]
		more := ""
		if len(missing) > len(shown) {
			more = fmt.Sprintf(" and %d more", len(missing)-len(shown))
		}
		return fmt.Errorf("%w: %d topics have consume queues in %s but are missing from config/topics.json (%s%s). "+
			"Restore topics.json from a copy, or start once with --recover-missing-topics to re-create them with "+
			"their on-disk queue counts and read-write permission",
			ErrTopicsLost, len(missing), s.opts.DataDir, strings.Join(shown, ", "), more)
	}
	for _, topic := range missing {
		queues := s.store.Queues(topic)
		n := max(int(slices.Max(queues))+1, s.opts.DefaultTopicQueueNums)
		n = min(n, maxQueueNums)
		cfg := newTopicConfig(topic, n, protocol.PermReadWrite)
		if _, _, err := s.topics.createIfAbsent(cfg); err != nil {
			return fmt.Errorf("re-creating topic %s: %w", topic, err)
		}
		s.logger.Warn("re-created a topic missing from topics.json (--recover-missing-topics)",
			"topic", topic, "queues", n, "queuesOnDisk", len(queues))
	}
	return nil
}
