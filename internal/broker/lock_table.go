package broker

import (
	"sync"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
)

// lockEntry is one queue's lock: its owner and when it last locked.
type lockEntry struct {
	clientID   string
	lastUpdate time.Time
}

// lockTable is the broker's queue locks for orderly consumption (RocketMQ's
// RebalanceLockManager): per consumer group, at most one client owns a
// queue. A lock lasts `lease` after its owner last locked it; the owner
// renews it by locking again. A lock whose owner is no longer a member of
// the group (its connection closed, it unregistered or expired) is free as
// well, so a crashed consumer does not hold its queues for a whole lease.
//
// Safe for concurrent use. Its mutex is a leaf: nothing else is locked
// while it is held (group members are looked up before).
type lockTable struct {
	lease time.Duration
	now   func() time.Time // time.Now; tests replace it

	mu     sync.Mutex
	groups map[string]map[protocol.MessageQueue]*lockEntry
}

func newLockTable(lease time.Duration) *lockTable {
	return &lockTable{lease: lease, now: time.Now, groups: map[string]map[protocol.MessageQueue]*lockEntry{}}
}

// members is a consumer group's membership as read at a point in time.
type members struct {
	ids map[string]bool // nil: unknown, every owner counts as a member
	at  time.Time       // taken before ids was read
}

// has reports whether the owner of a lock last renewed at lastUpdate is
// still to be trusted: it is a member, or it locked after the membership
// was read (it may have joined since).
func (ms members) has(clientID string, lastUpdate time.Time) bool {
	return ms.ids == nil || ms.ids[clientID] || !lastUpdate.Before(ms.at)
}

// heldLocked reports whether e still holds its queue at now. Caller holds mu.
func (t *lockTable) heldLocked(e *lockEntry, now time.Time, ms members) bool {
	return e != nil && now.Sub(e.lastUpdate) <= t.lease && ms.has(e.clientID, e.lastUpdate)
}

// clear drops every lock.
func (t *lockTable) clear() {
	t.mu.Lock()
	defer t.mu.Unlock()
	clear(t.groups)
}

// tryLock locks every queue of mqs that is free or already clientID's for
// clientID, renewing its lease, and returns those queues in request order.
// ms is the group's current membership.
func (t *lockTable) tryLock(group, clientID string, mqs []protocol.MessageQueue, ms members) []protocol.MessageQueue {
	locked := make([]protocol.MessageQueue, 0, len(mqs))
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	g := t.groups[group]
	if g == nil {
		g = map[protocol.MessageQueue]*lockEntry{}
		t.groups[group] = g
	}
	for _, mq := range mqs {
		e := g[mq]
		switch {
		case e != nil && e.clientID == clientID:
			e.lastUpdate = now
		case t.heldLocked(e, now, ms):
			continue // another client owns it
		default:
			g[mq] = &lockEntry{clientID: clientID, lastUpdate: now}
		}
		locked = append(locked, mq)
	}
	return locked
}

// unlock releases the queues of mqs that clientID owns; the others are left
// alone. It returns the queues released.
func (t *lockTable) unlock(group, clientID string, mqs []protocol.MessageQueue) []protocol.MessageQueue {
	var released []protocol.MessageQueue
	t.mu.Lock()
	defer t.mu.Unlock()
	g := t.groups[group]
	for _, mq := range mqs {
		if e := g[mq]; e != nil && e.clientID == clientID {
			delete(g, mq)
			released = append(released, mq)
		}
	}
	if g != nil && len(g) == 0 {
		delete(t.groups, group)
	}
	return released
}

// owners returns the queues of group that are held now, with their owner.
func (t *lockTable) owners(group string, ms members) map[protocol.MessageQueue]string {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[protocol.MessageQueue]string{}
	for mq, e := range t.groups[group] {
		if t.heldLocked(e, now, ms) {
			out[mq] = e.clientID
		}
	}
	return out
}

// sweep forgets locks that have lapsed, so the table does not keep every
// queue a departed client ever locked. It returns how many it dropped.
func (t *lockTable) sweep(membersOf func(group string) members) int {
	now := t.now()
	t.mu.Lock()
	groups := make([]string, 0, len(t.groups))
	for g := range t.groups {
		groups = append(groups, g)
	}
	t.mu.Unlock()
	dropped := 0
	for _, group := range groups {
		ms := membersOf(group) // outside mu: the registry has its own lock
		t.mu.Lock()
		g := t.groups[group]
		for mq, e := range g {
			if !t.heldLocked(e, now, ms) {
				delete(g, mq)
				dropped++
			}
		}
		if g != nil && len(g) == 0 {
			delete(t.groups, group)
		}
		t.mu.Unlock()
	}
	return dropped
}
