package broker

import (
	"fmt"
	"log/slog"
	"maps"
	"sort"
	"sync"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/store"
	"github.com/zonemq/zonemq/internal/wallclock"
)

// subscriptionGroupsMetadata is the store metadata name of the group table.
const subscriptionGroupsMetadata = "subscriptionGroups"

// subscriptionGroupTable is the broker's consumer-group configs. A group is
// created with RocketMQ's defaults the first time it heartbeats or pulls
// (autoCreateSubscriptionGroup). Safe for concurrent use.
type subscriptionGroupTable struct {
	store  *store.Store
	logger *slog.Logger

	mu      sync.RWMutex
	groups  map[string]protocol.SubscriptionGroupConfig
	version protocol.DataVersion
}

func loadSubscriptionGroupTable(st *store.Store, logger *slog.Logger) (*subscriptionGroupTable, error) {
	t := &subscriptionGroupTable{store: st, logger: logger, groups: map[string]protocol.SubscriptionGroupConfig{}}
	var w protocol.SubscriptionGroupWrapper
	found, err := st.LoadMetadata(subscriptionGroupsMetadata, &w)
	if err != nil {
		return nil, fmt.Errorf("loading the subscription groups: %w", err)
	}
	if found {
		for name, g := range w.SubscriptionGroupTable {
			g.GroupName = name
			t.groups[name] = g
		}
		t.version = w.DataVersion
	}
	return t, nil
}

// getOrCreate returns the group's config, creating and persisting the
// default one if the group is new.
func (t *subscriptionGroupTable) getOrCreate(group string) protocol.SubscriptionGroupConfig {
	t.mu.RLock()
	g, ok := t.groups[group]
	t.mu.RUnlock()
	if ok {
		return g
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if g, ok := t.groups[group]; ok {
		return g
	}
	g = protocol.NewSubscriptionGroupConfig(group)
	t.groups[group] = g
	t.version.Counter++
	t.version.Timestamp = wallclock.UnixMilli()
	if err := t.store.SaveMetadata(subscriptionGroupsMetadata, t.wrapperLocked()); err != nil {
		// The group still works from memory; it is persisted with the next
		// change.
		t.logger.Error("persisting the subscription groups", "group", group, "err", err)
	}
	return g
}

// names returns every group name, sorted.
func (t *subscriptionGroupTable) names() []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]string, 0, len(t.groups))
	for n := range t.groups {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// snapshot returns a copy of the table.
func (t *subscriptionGroupTable) snapshot() protocol.SubscriptionGroupWrapper {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.wrapperLocked()
}

func (t *subscriptionGroupTable) wrapperLocked() protocol.SubscriptionGroupWrapper {
	return protocol.SubscriptionGroupWrapper{SubscriptionGroupTable: maps.Clone(t.groups), DataVersion: t.version}
}

// put creates or replaces a group's config and persists the table.
func (t *subscriptionGroupTable) put(g protocol.SubscriptionGroupConfig) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.groups[g.GroupName] = g
	t.version.Counter++
	t.version.Timestamp = wallclock.UnixMilli()
	return t.store.SaveMetadata(subscriptionGroupsMetadata, t.wrapperLocked())
}
