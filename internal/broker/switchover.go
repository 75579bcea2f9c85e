package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/wallclock"
)

// defaultSwitchTimeout bounds a switchover's wait for the new master to
// catch up while writes are paused.
const defaultSwitchTimeout = 5 * time.Second

// handleReplicaSwitch hands the group to replica h.To (a planned
// switchover): pause writes, wait for the in-flight ones and for the replica
// to hold the whole log, promote it at the next epoch, then follow it. No
// acknowledged message can be lost: the new master has every byte.
func (s *Server) handleReplicaSwitch(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.ReplicaSwitchRequestHeader
	if err := h.SetExt(req.ExtFields); err != nil {
		return badHeader(req, err)
	}
	if s.repl.controllerMode() {
		return s.switchThroughController(ctx, req, h)
	}
	if resp := s.checkReplicaPeer(req, h.BrokerName, h.To); resp != nil {
		return resp
	}
	timeout := time.Duration(h.TimeoutMillis) * time.Millisecond
	if timeout <= 0 {
		timeout = defaultSwitchTimeout
	}
	r := s.repl
	target, refused := s.pauseForSwitch(req, h.To, h.To)
	if refused != nil {
		return refused
	}
	began := time.Now()
	s.logger.Info("switchover: writes paused; waiting for the replica to catch up", "to", h.To, "addr", target)
	unpause := func() {
		r.mu.Lock()
		r.paused = false
		r.mu.Unlock()
	}

	s.commitBeforeSwitch()
	end, err := r.waitCaughtUp(ctx, h.To, timeout)
	if err == nil {
		err = r.waitMetaSynced(ctx, h.To, timeout)
	}
	if err != nil {
		unpause()
		return errorf(req, protocol.SystemError, "switchover of %s to replica %d: %v; writes resumed on this master", s.opts.BrokerName, h.To, err)
	}
	epoch := r.epoch() + 1
	oldID := h.To
	ph := protocol.ReplicaPromoteRequestHeader{BrokerName: s.opts.BrokerName, Epoch: epoch, LogEnd: end, DemotedID: oldID}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	resp, err := r.client.Invoke(pctx, target, s.signRequest(remoting.NewRequest(int32(protocol.ReplicaPromote), ph.Ext(), nil)))
	cancel()
	if err == nil && resp.Code != int32(protocol.Success) {
		err = &protocol.Error{Code: protocol.ResponseCode(resp.Code), Remark: resp.Remark}
	}
	if err != nil {
		unpause()
		return errorf(req, protocol.SystemError, "switchover of %s: promoting replica %d at %s failed: %v; writes resumed on this master",
			s.opts.BrokerName, h.To, target, err)
	}
	// The replica is master now: step down to its old id and follow it.
	r.mu.Lock()
	r.paused = false
	r.replicas = map[int64]*replicaPeer{}
	r.follow = target
	r.setRoleLocked(false, oldID)
	err = r.persistLocked()
	r.mu.Unlock()
	r.signalAcks()
	if err != nil {
		s.logger.Error("switchover: persisting the new role", "err", err)
	}
	s.namesrvs.kickAll()
	s.logger.Info("switchover done: this broker is now a replica", "newMaster", target, "epoch", epoch, "registeredId", oldID,
		"logEnd", end, "writesPausedFor", time.Since(began).Round(time.Millisecond))
	out := remoting.NewResponse(req, int32(protocol.Success), "")
	out.ExtFields = map[string]string{"newMaster": target, "epoch": fmt.Sprint(epoch), "logEnd": fmt.Sprint(end)}
	return out
}

// pauseForSwitch pauses writes for a switchover to the replica known as
// key (broker id to, for the messages) and returns its address, or the
// answer that refuses the switchover: the replica is not connected, or a
// switchover already runs.
func (s *Server) pauseForSwitch(req *remoting.Command, key, to int64) (string, *remoting.Command) {
	r := s.repl
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.replicas[key]
	if p == nil {
		return "", errorf(req, protocol.SystemError, "replica %d of %s is not connected to the master", to, s.opts.BrokerName)
	}
	if r.paused {
		return "", errorf(req, protocol.SystemBusy, "a switchover of %s is already running", s.opts.BrokerName)
	}
	r.paused = true
	r.pausedAt = time.Now()
	// Parked fetches return now and carry extSyncMetaNow.
	r.notifyData()
	return p.addr, nil
}

// extSyncMetaNow on a FETCH answer asks the replica for a SYNC_META now: a
// switchover waits until the new master holds the metadata as of the pause.
const extSyncMetaNow = "syncMetaNow"

// switching reports whether a switchover has paused writes.
func (r *replication) switching() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.paused
}

// waitMetaSynced waits until replica key took a metadata snapshot after
// the writes paused, so topics, groups and offsets created just before a
// switchover reach the new master (the periodic sync runs once a second).
func (r *replication) waitMetaSynced(ctx context.Context, key int64, timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		ch := r.ackChan()
		r.mu.Lock()
		p, since := r.replicas[key], r.pausedAt
		done := p != nil && !p.metaAt.Before(since)
		r.mu.Unlock()
		switch {
		case p == nil:
			return fmt.Errorf("replica %d disconnected", key)
		case done:
			return nil
		}
		select {
		case <-ch:
		case <-deadline.C:
			return fmt.Errorf("replica %d did not fetch the metadata within %s", key, timeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// waitCaughtUp waits until no write is in flight and replica id holds the
// whole log; it returns the log's end.
func (r *replication) waitCaughtUp(ctx context.Context, id int64, timeout time.Duration) (int64, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		ch := r.ackChan()
		end := r.s.store.CommitLogMaxOffset()
		r.mu.Lock()
		p := r.replicas[id]
		acked := int64(-1)
		if p != nil {
			acked = p.acked
		}
		r.mu.Unlock()
		if p == nil {
			return 0, fmt.Errorf("replica %d disconnected", id)
		}
		if r.s.writesInFlight.Load() == 0 && acked >= end && end == r.s.store.CommitLogMaxOffset() {
			return end, nil
		}
		select {
		case <-ch:
		case <-time.After(20 * time.Millisecond):
			// In-flight writes end without an ack signal; look again.
		case <-deadline.C:
			return 0, fmt.Errorf("replica %d holds %d of %d bytes after %s", id, acked, end, timeout)
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// maxEpochAhead bounds how far past the Unix time in seconds a promotion's
// epoch may be.
const maxEpochAhead = 24 * 60 * 60

// handleReplicaPromote makes this replica the master at h.Epoch. Without
// h.LogEnd < 0 (a forced promotion, the master being gone) it requires its
// log to end exactly where the old master's did.
func (s *Server) handleReplicaPromote(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.ReplicaPromoteRequestHeader
	if err := h.SetExt(req.ExtFields); err != nil {
		return badHeader(req, err)
	}
	if h.BrokerName != s.opts.BrokerName {
		return errorf(req, protocol.SystemError, "this is broker %s, not %s", s.opts.BrokerName, h.BrokerName)
	}
	if s.repl.controllerMode() {
		return errorf(req, protocol.IllegalOperation, "broker group %s is managed by the failover controller: "+
			"promote with 'zonemq admin controller elect --name %s --to ID --force'", s.opts.BrokerName, s.opts.BrokerName)
	}
	// Epochs count restarts and promotions from the Unix time in seconds
	// (nextEpoch); one far beyond it is no promotion a member would ask
	// for (issue 22: epoch 2^40 made a second master), and would push
	// every later epoch out of reach.
	if limit := wallclock.Now().Unix() + maxEpochAhead; h.Epoch > limit {
		return errorf(req, protocol.InvalidParameter, "promotion to epoch %d refused: epochs run near the Unix time in seconds, "+
			"and this one is more than a day ahead of it (%d)", h.Epoch, limit)
	}
	r := s.repl
	r.mu.Lock()
	if r.state.Master {
		r.mu.Unlock()
		return errorf(req, protocol.SystemError, "broker %s at %s is already master", s.opts.BrokerName, s.addr)
	}
	end := s.store.CommitLogMaxOffset()
	if h.LogEnd >= 0 && end != h.LogEnd {
		r.mu.Unlock()
		return errorf(req, protocol.SystemError, "this replica's log ends at %d, the master's at %d", end, h.LogEnd)
	}
	epoch := max(h.Epoch, r.lastEpoch()+1)
	if h.LogEnd < 0 {
		epoch = max(epoch, nextEpoch(r.lastEpoch()))
	}
	if h.LogEnd < 0 {
		s.logger.Warn("forced promotion: whatever the old master held beyond this replica's log is not in the group any more",
			"logEnd", end, "epoch", epoch)
	}
	r.setRoleLocked(true, protocol.MasterID)
	r.startEpochLocked(epoch)
	r.follow = ""
	if err := r.persistLocked(); err != nil {
		s.logger.Error("promotion: persisting the new role", "err", err)
	}
	r.mu.Unlock()
	// Outside r.mu: the services take their own locks and store messages.
	s.afterPromotion()
	s.namesrvs.kickAll()
	s.logger.Info("promoted to master", "epoch", epoch, "logEnd", end)
	return remoting.NewResponse(req, int32(protocol.Success), "")
}

// afterPromotion reloads what the replica only kept on disk or in its log:
// the delay progress copied from the old master and the transaction state.
func (s *Server) afterPromotion() {
	if d := s.extra.schedule; d != nil {
		d.reload()
	}
	if t := s.extra.transactions; t != nil {
		t.reload()
		t.advance()
	}
}
