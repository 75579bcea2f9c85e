package broker

import "github.com/zonemq/zonemq/internal/store"

// What consumers may read. A master in sync mode acknowledges a send once
// every in-sync replica holds it (replicated); with the controller, records
// past that may still be cut if the group fails over, and the acknowledged
// records stored next then take their queue offsets. A consumer that had
// read one of the cut records would skip the acknowledged one at its offset
// (the chaos campaign's pull workload lost a message so). So the store's
// consumer reads stop at the confirmed offset (store.GetVisible): on the
// master the log end the replicas confirmed, advanced whenever sends are
// answered; on a replica the master's, carried in every FETCH answer.
// Parked pulls that wait for a record to be confirmed are woken when it is
// (noteVisible). Without the controller no member is elected: a replica's
// log is a prefix of its master's, a switchover waits until the replicas
// hold the whole log, nothing is cut, and the store is not fenced.

// advanceConfirmed moves the store's confirmed offset to what the master may
// acknowledge now: the lowest offset its in-sync replicas hold, those the
// controller still counts in sync included (ackSetLocked; the log end with
// none, where min-insync-replicas allows it), while its lease is valid. It
// never moves back. Only a fenced master does anything.
func (r *replication) advanceConfirmed() {
	if r.s.store.Confirmed() == store.NoFence {
		return // not fenced (no sync replication, or no controller)
	}
	end := r.s.store.CommitLogMaxOffset()
	r.mu.Lock()
	master := r.state.Master
	_, counted, _, low := r.ackSetLocked(end)
	r.mu.Unlock()
	if !master || 1+counted < r.s.opts.MinInsyncReplicas {
		return
	}
	if r.controllerMode() && !r.leaseValid() {
		return
	}
	if low > r.s.store.Confirmed() {
		r.s.store.SetConfirmed(low)
	}
}

// followConfirmed takes the master's confirmed offset on a replica, as far as
// this log reaches.
func (r *replication) followConfirmed(masterConfirmed int64) {
	c := min(masterConfirmed, r.s.store.CommitLogMaxOffset())
	if c > r.s.store.Confirmed() {
		r.s.store.SetConfirmed(c)
		r.s.noteVisible()
	}
}

// noteVisible wakes the parked pulls that wait for the store's visible end,
// when it moved.
func (s *Server) noteVisible() {
	v := s.store.Visible()
	if s.lastVisible.Swap(v) != v {
		s.pulls.notifyVisible(v)
	}
}
