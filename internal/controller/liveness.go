package controller

import (
	"sync"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
)

// liveness is the leader's memory of who is alive and which leases it
// granted. It is never replicated: a new leader starts empty, treats every
// master as seen when it took over, and so elects no one before a full
// lease timeout has passed under it.
type liveness struct {
	mu     sync.Mutex
	since  time.Time // when this voter took the lead
	groups map[groupKey]*groupLiveness
}

// groupLiveness is one group's part of liveness.
type groupLiveness struct {
	members map[int64]*memberLiveness
	// leaseUntil is when the last lease this leader granted ends, and
	// leaseEpoch the epoch it was granted at.
	leaseUntil time.Time
	leaseEpoch int64
	// electedAt is when this leader last committed an election here: the
	// new master's silence counts from then.
	electedAt time.Time
	// blocked is why the last election attempt found no one (logged once
	// per change).
	blocked string
	// retiring, when set, is the epoch whose master an operator's switch
	// replaces: its lease is not renewed until the switch is done.
	retiring int64
}

// memberLiveness is one broker's latest heartbeat.
type memberLiveness struct {
	lastSeen time.Time
	logEnd   int64
	epoch    int64
	role     string
	// peak is the longest log this leader has heard the broker report
	// since it last held all of it: a log end below it means the broker
	// lost data it once had (a damaged disk, a log moved aside, a tail
	// truncated) and may lack acknowledged messages.
	peak int64
}

func newLiveness() *liveness { return &liveness{groups: map[groupKey]*groupLiveness{}} }

// reset forgets everything: this voter just became leader at now.
func (l *liveness) reset(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.since = now
	l.groups = map[groupKey]*groupLiveness{}
}

// groupLocked returns k's liveness, creating it. Caller holds l.mu.
func (l *liveness) groupLocked(k groupKey) *groupLiveness {
	gl := l.groups[k]
	if gl == nil {
		gl = &groupLiveness{members: map[int64]*memberLiveness{}}
		l.groups[k] = gl
	}
	return gl
}

// seen records a heartbeat.
func (l *liveness) seen(k groupKey, h *protocol.ControllerHeartbeatRequestHeader, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	gl := l.groupLocked(k)
	peak := h.LogEnd
	if prev := gl.members[h.BrokerID]; prev != nil {
		peak = max(prev.peak, h.LogEnd)
	}
	gl.members[h.BrokerID] = &memberLiveness{lastSeen: now, logEnd: h.LogEnd, epoch: h.Epoch, role: h.Role, peak: peak}
}

// shrunk reports whether broker id of k reports less log than it once did
// (see memberLiveness.peak): until it holds that much again it is no
// candidate for master on its own.
func (l *liveness) shrunk(k groupKey, id int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	gl := l.groups[k]
	if gl == nil {
		return false
	}
	m := gl.members[id]
	return m != nil && m.logEnd < m.peak
}

// alive reports whether broker id of k was heard from within timeout, and
// its latest log end.
func (l *liveness) alive(k groupKey, id int64, now time.Time, timeout time.Duration) (bool, int64, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	gl := l.groups[k]
	if gl == nil {
		return false, 0, time.Time{}
	}
	m := gl.members[id]
	if m == nil {
		return false, 0, time.Time{}
	}
	return now.Sub(m.lastSeen) <= timeout, m.logEnd, m.lastSeen
}

// masterSilentSince is when the master's silence started counting: its
// last heartbeat, but no earlier than this leader's start or the last
// election here.
func (l *liveness) masterSilentSince(k groupKey, masterID int64) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.since
	gl := l.groups[k]
	if gl == nil {
		return t
	}
	if gl.electedAt.After(t) {
		t = gl.electedAt
	}
	if m := gl.members[masterID]; m != nil && m.lastSeen.After(t) {
		t = m.lastSeen
	}
	return t
}

// fenceUntil is the earliest time a master newly elected at epoch may get
// its first lease: once any lease this leader granted at an older epoch
// has ended, and a lease timeout after this leader took over (a lease the
// previous leader granted has ended by then; docs/controller.md).
func (l *liveness) fenceUntil(k groupKey, epoch int64, timeout time.Duration) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.since.Add(timeout)
	if gl := l.groups[k]; gl != nil && gl.leaseEpoch != epoch && gl.leaseUntil.After(t) {
		t = gl.leaseUntil
	}
	return t
}

// leaseActive reports whether a lease this leader granted at epoch is
// still running.
func (l *liveness) leaseActive(k groupKey, epoch int64, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	gl := l.groups[k]
	return gl != nil && gl.leaseEpoch == epoch && gl.leaseUntil.After(now)
}

// retire stops renewing the lease of k's master at epoch (an operator's
// switch) and returns when every lease of that master has surely ended:
// the last this leader granted, and a lease timeout after it took over
// (the previous leader's).
func (l *liveness) retire(k groupKey, epoch int64, timeout time.Duration) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	gl := l.groupLocked(k)
	gl.retiring = epoch
	t := l.since.Add(timeout)
	if gl.leaseEpoch == epoch && gl.leaseUntil.After(t) {
		t = gl.leaseUntil
	}
	return t
}

// retiring reports whether the master of k at epoch is being switched
// away from (no lease renewal).
func (l *liveness) retiring(k groupKey, epoch int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	gl := l.groups[k]
	return gl != nil && gl.retiring == epoch && epoch > 0
}

// unretire ends a switch, done or given up.
func (l *liveness) unretire(k groupKey) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if gl := l.groups[k]; gl != nil {
		gl.retiring = 0
	}
}

// granted records a lease granted at epoch until until.
func (l *liveness) granted(k groupKey, epoch int64, until time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	gl := l.groupLocked(k)
	if until.After(gl.leaseUntil) {
		gl.leaseUntil = until
	}
	gl.leaseEpoch = epoch
}

// elected records an election committed at now.
func (l *liveness) elected(k groupKey, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	gl := l.groupLocked(k)
	gl.electedAt = now
	gl.blocked = ""
}

// block records why no one could be elected; it reports whether the reason
// changed (so the caller logs it once).
func (l *liveness) block(k groupKey, reason string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	gl := l.groupLocked(k)
	changed := gl.blocked != reason
	gl.blocked = reason
	return changed
}
