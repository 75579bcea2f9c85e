package broker

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/zonemq/zonemq/internal/protocol"
)

// replaceAll makes the table the master's (a replica's metadata sync),
// keeping the master's data version. It reports whether any topic changed.
func (t *topicTable) replaceAll(w protocol.TopicConfigSerializeWrapper) (bool, error) {
	next := make(map[string]protocol.TopicConfig, len(w.TopicConfigTable))
	for name, cfg := range w.TopicConfigTable {
		cfg.TopicName = name
		if cfg.Attributes == nil {
			cfg.Attributes = map[string]string{}
		}
		next[name] = cfg
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	changed := !maps.EqualFunc(t.configs, next, sameTopicConfig)
	t.configs, t.version = next, w.DataVersion
	// A snapshot and an empty journal: a journal left from before would be
	// replayed over the master's table at the next start.
	if err := t.compactLocked(); err != nil {
		return changed, fmt.Errorf("copying the master's topic table: %w", err)
	}
	return changed, nil
}

// replaceAll makes the subscription groups the master's.
func (t *subscriptionGroupTable) replaceAll(w protocol.SubscriptionGroupWrapper) error {
	next := make(map[string]protocol.SubscriptionGroupConfig, len(w.SubscriptionGroupTable))
	for name, g := range w.SubscriptionGroupTable {
		g.GroupName = name
		next[name] = g
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.groups, t.version = next, w.DataVersion
	if err := t.store.SaveMetadata(subscriptionGroupsMetadata, t.wrapperLocked()); err != nil {
		return fmt.Errorf("persisting the subscription groups copied from the master: %w", err)
	}
	return nil
}

// reload re-reads the delivery offsets a replica copied from its master,
// when it becomes master itself; offsets only move forward.
func (d *scheduleService) reload() {
	var t delayOffsetTable
	found, err := d.s.store.LoadMetadata(delayOffsetMetadata, &t)
	if err != nil || !found {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for level, off := range t.OffsetTable {
		if i := level - 1; i >= 0 && i < len(d.offsets) && off > d.offsets[i] {
			d.offsets[i] = off
			d.dirty = true
		}
	}
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// readableTopic is the config of a topic consumers read: the topic table's,
// or, on a replica that has its messages before the master's topic table
// reached it (it copies the table every second), one derived from the
// queues in its log.
func (s *Server) readableTopic(topic string) (protocol.TopicConfig, bool) {
	if cfg, ok := s.topics.get(topic); ok || s.isMaster() {
		return cfg, ok
	}
	ids := s.store.Queues(topic)
	if len(ids) == 0 {
		return protocol.TopicConfig{}, false
	}
	n := int(ids[len(ids)-1]) + 1
	return newTopicConfig(topic, n, protocol.PermReadWrite), true
}

// describe adds the broker's replication state to a runtime-info table:
// its role as RocketMQ names it, epoch, registered id, and on a master each
// replica's progress, on a replica the master it follows.
func (r *replication) describe(table map[string]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	role := "SLAVE"
	if r.state.Master {
		role = "ASYNC_MASTER"
		if r.s.opts.Replication == ReplicationSync {
			role = "SYNC_MASTER"
		}
	}
	table["brokerRole"] = role
	table["registeredBrokerId"] = strconv.FormatInt(r.state.RegisteredID, 10)
	table["replicationEpoch"] = strconv.FormatInt(r.lastEpoch(), 10)
	table["inSyncReplicas"] = strconv.Itoa(r.inSyncLocked())
	if !r.state.Master {
		table["masterAddr"] = r.follow
		return
	}
	ids := slices.Sorted(maps.Keys(r.replicas))
	parts := make([]string, 0, len(ids))
	end := r.s.store.CommitLogMaxOffset()
	for _, id := range ids {
		p := r.replicas[id]
		parts = append(parts, fmt.Sprintf("%d=%s/%s acked=%d behind=%d inSync=%t", id, p.addr, p.idc, p.acked, end-p.acked, p.inSync))
	}
	table["replicas"] = strings.Join(parts, "; ")
}

// reload rebuilds the transaction check state from the log a replica
// copied, when it becomes master: every op record stored is replayed (the
// replica's in-memory state is the one it had when it started), and checks
// start from the oldest half message not resolved.
func (t *transactionService) reload() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.halfOffset = t.s.store.MinOffset(transHalfTopic, 0)
	t.resolved = map[int64]resolution{}
	t.checks = map[int64]int{}
	t.replayOps(t.s.store.MinOffset(transOpHalfTopic, 0))
	t.dirty = true
}
