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
	noLead   string // why the broker will not lead now ("" when it will)
	// peak is the longest log this leader has heard the broker report
	// since it last held all of it: a log end below it means the broker
	// lost data it once had (a damaged disk, a log moved aside, a tail
	// truncated) and may lack acknowledged messages.
	peak int64
	// ledAt is the broker's last heartbeat as the group's master at
	// ledEpoch that the leader accepted (Server.leads): a master that
	// heartbeats only as a replica, or that lost records, is silent as a
	// master however often it calls.
	ledAt    time.Time
	ledEpoch int64
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
	m := gl.members[h.BrokerID]
	if m == nil {
		m = &memberLiveness{}
		gl.members[h.BrokerID] = m
	}
	m.lastSeen, m.logEnd, m.epoch, m.role, m.noLead = now, h.LogEnd, h.Epoch, h.Role, h.NoLead
	m.peak = max(m.peak, h.LogEnd)
}

// settle makes broker id's current log end its peak: a master kept
// although it lost records is the group's reference from then on, and is
// not replaced for that loss once its replicas are back in sync.
func (l *liveness) settle(k groupKey, id int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if m := l.groupLocked(k).members[id]; m != nil {
		m.peak = m.logEnd
	}
}

// led records an accepted heartbeat of k's master id at epoch.
func (l *liveness) led(k groupKey, id, epoch int64, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if m := l.groupLocked(k).members[id]; m != nil {
		m.ledAt, m.ledEpoch = now, epoch
	}
}

// outrun returns a live member of k other than master that follows it at
// epoch and holds more log than masterEnd (-1 when none): its data past
// the epoch's start came from the master, so the master lost records it
// had written or acknowledged.
func (l *liveness) outrun(k groupKey, master, epoch, masterEnd int64, now time.Time, timeout time.Duration) (int64, int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	gl := l.groups[k]
	if gl == nil {
		return -1, 0
	}
	for id, m := range gl.members {
		if id != master && m.epoch == epoch && m.logEnd > masterEnd && now.Sub(m.lastSeen) <= timeout {
			return id, m.logEnd
		}
	}
	return -1, 0
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

// noLead is why broker id of k said it will not lead ("" when it did not).
func (l *liveness) noLead(k groupKey, id int64) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if gl := l.groups[k]; gl != nil && gl.members[id] != nil {
		return gl.members[id].noLead
	}
	return ""
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

// masterSilentSince is when the silence of masterID, master at epoch,
// started counting: its last heartbeat as that master (liveness.led), but
// no earlier than this leader's start or the last election here.
func (l *liveness) masterSilentSince(k groupKey, masterID, epoch int64) time.Time {
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
	if m := gl.members[masterID]; m != nil && m.ledEpoch == epoch && m.ledAt.After(t) {
		t = m.ledAt
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
