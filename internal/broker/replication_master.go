package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/zonemq/zonemq/internal/acl"
	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/store"
)

// Bounds of the master's side of replication.
const (
	// fetchMaxWait caps how long a fetch parks on a master with nothing new.
	fetchMaxWait = 500 * time.Millisecond
	// fetchMaxBytes caps one fetch's chunk.
	fetchMaxBytes = 4 << 20
	// isrCheckInterval is how often lagging replicas are looked for.
	isrCheckInterval = 100 * time.Millisecond
)

// registerReplicationHandlers installs the master's and the replica's
// replication requests. They are cluster-member requests: with a cluster
// secret, one without its MAC is refused before it reads a byte of the log,
// counts as a replica, sets offsets or moves the master (docs/security.md).
func (s *Server) registerReplicationHandlers() {
	member := func(h remoting.Handler) remoting.Handler {
		return acl.MemberGuard(s.opts.ClusterSecret, s.logger, h)
	}
	s.handle(protocol.ReplicaHello, member(s.handleReplicaHello))
	s.handle(protocol.ReplicaFetch, member(s.handleReplicaFetch))
	s.handle(protocol.ReplicaSyncMeta, member(s.handleReplicaSyncMeta))
	s.handle(protocol.ReplicaSwitch, member(s.handleReplicaSwitch))
	s.handle(protocol.ReplicaPromote, member(s.handleReplicaPromote))
}

// handleReplicaHello agrees with a replica where their logs meet.
func (s *Server) handleReplicaHello(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.ReplicaHelloRequestHeader
	if err := h.SetExt(req.ExtFields); err != nil {
		return badHeader(req, err)
	}
	r := s.repl
	if resp := s.checkReplicaPeer(req, h.BrokerName, h.ReplicaID); resp != nil {
		return resp
	}
	if h.SegmentSize != s.store.SegmentSize() {
		return errorf(req, protocol.SystemError, "replica %d of %s uses commit-log segments of %d bytes, the master %d: they must be equal",
			h.ReplicaID, s.opts.BrokerName, h.SegmentSize, s.store.SegmentSize())
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	history := append([]protocol.EpochEntry(nil), r.state.Epochs...)
	cur := r.lastEpoch()
	logEnd := s.store.CommitLogMaxOffset()
	logMin := s.store.CommitLogMinOffset()
	truncateTo := h.LogEnd
	if h.LogEnd > 0 {
		if h.LastEpoch > cur {
			return errorf(req, protocol.SystemError, "replica %d of %s holds epoch %d, newer than this master's %d: this master is stale; "+
				"switch the group to the replica (zonemq admin broker switch)", h.ReplicaID, s.opts.BrokerName, h.LastEpoch, cur)
		}
		end, covered := epochEnd(history, h.LastEpoch, logEnd)
		if !covered && h.LogEnd > history[0].StartOffset {
			return errorf(req, protocol.SystemError, "replica %d of %s holds %d bytes of epoch %d, which this master's log never had "+
				"(its data directory was replaced?): refusing to truncate data that may be acknowledged; switch the group to the replica",
				h.ReplicaID, s.opts.BrokerName, h.LogEnd, h.LastEpoch)
		}
		truncateTo = min(h.LogEnd, end)
		if truncateTo < logMin {
			return errorf(req, protocol.SystemError, "replica %d of %s ends at %d, below the master's oldest segment %d: "+
				"empty the replica's data directory to copy the group's log again", h.ReplicaID, s.opts.BrokerName, truncateTo, logMin)
		}
	}
	p := r.replicas[h.ReplicaID]
	if p == nil || p.conn != c {
		p = &replicaPeer{id: h.ReplicaID}
		r.replicas[h.ReplicaID] = p
		// On a connection that closed already OnClose runs the callback
		// at once, here, under mu: dropReplica then waits for mu on a
		// goroutine of its own (taking it here deadlocked the master, every
		// send and replica with it: found by the chaos campaign).
		c.OnClose(func(*remoting.Conn) { go r.dropReplica(h.ReplicaID, c) })
	}
	p.addr, p.idc, p.conn, p.acked, p.inSync, p.lastSeen = h.ReplicaAddr, h.IDC, c, truncateTo, false, time.Now()
	s.logger.Info("replica connected", "replica", h.ReplicaID, "addr", h.ReplicaAddr, "replicaIdc", h.IDC,
		"replicaEnd", h.LogEnd, "replicaEpoch", h.LastEpoch, "truncateTo", truncateTo, "masterEnd", logEnd, "epoch", cur)
	resp := remoting.NewResponse(req, int32(protocol.Success), "")
	rh := protocol.ReplicaHelloResponseHeader{Epoch: cur, TruncateTo: truncateTo, LogMin: logMin, LogEnd: logEnd}
	resp.ExtFields = rh.Ext()
	resp.Body, _ = json.Marshal(history)
	return resp
}

// checkReplicaPeer refuses replication requests that are not for this
// broker's group or reach a broker that is not master.
func (s *Server) checkReplicaPeer(req *remoting.Command, name string, id int64) *remoting.Command {
	if name != s.opts.BrokerName {
		return errorf(req, protocol.SystemError, "this is broker %s, not %s", s.opts.BrokerName, name)
	}
	if !s.isMaster() {
		return errorf(req, protocol.ServiceNotAvailable, "broker %s at %s is a replica, not the master", s.opts.BrokerName, s.addr)
	}
	if id == protocol.MasterID || id == s.repl.regID.Load() {
		return errorf(req, protocol.SystemError, "replica id %d is the master's", id)
	}
	return nil
}

// dropReplica forgets a replica whose connection closed: it leaves the
// in-sync set at once.
func (r *replication) dropReplica(id int64, c *remoting.Conn) {
	r.mu.Lock()
	p := r.replicas[id]
	if p == nil || p.conn != c {
		r.mu.Unlock()
		return
	}
	delete(r.replicas, id)
	wasInSync := p.inSync
	r.mu.Unlock()
	if wasInSync {
		r.s.logger.Info("replica left the in-sync set: its connection closed", "replica", id, "addr", p.addr)
		r.kickController()
	}
	r.signalAcks()
}

// handleReplicaFetch records the replica's acknowledgement (its offset) and
// answers the log from there, parking until there is some.
func (s *Server) handleReplicaFetch(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.ReplicaFetchRequestHeader
	if err := h.SetExt(req.ExtFields); err != nil {
		return badHeader(req, err)
	}
	if resp := s.checkReplicaPeer(req, h.BrokerName, h.ReplicaID); resp != nil {
		return resp
	}
	r := s.repl
	r.mu.Lock()
	cur := r.lastEpoch()
	p := r.replicas[h.ReplicaID]
	if h.Epoch != cur || p == nil || p.conn != c {
		r.mu.Unlock()
		return errorf(req, protocol.ServiceNotAvailable, "replica %d must say hello again (epoch %d, master epoch %d)", h.ReplicaID, h.Epoch, cur)
	}
	end := s.store.CommitLogMaxOffset()
	if h.Offset > end || h.Offset < p.acked {
		r.mu.Unlock()
		return errorf(req, protocol.SystemError, "replica %d fetches from %d; it acknowledged %d and the log ends at %d", h.ReplicaID, h.Offset, p.acked, end)
	}
	changed := h.Offset != p.acked
	p.acked, p.lastSeen = h.Offset, time.Now()
	joined := false
	if h.Offset >= end {
		p.caughtUp = p.lastSeen
		if !p.inSync {
			p.inSync, changed, joined = true, true, true
			s.logger.Info("replica joined the in-sync set", "replica", h.ReplicaID, "addr", p.addr, "offset", h.Offset)
		}
	}
	r.mu.Unlock()
	if changed {
		r.signalAcks()
	}
	if joined {
		// It counts toward min-insync-replicas once the controller has it
		// (ackSetLocked): report now.
		r.kickController()
	}

	wait := min(time.Duration(h.MaxWaitMillis)*time.Millisecond, fetchMaxWait)
	maxBytes := int(min(max(h.MaxBytes, 1), fetchMaxBytes))
	var timer *time.Timer
	for {
		r.parked.Add(1)
		ch := r.dataChan()
		chunk, err := s.store.ReadLog(h.Offset, maxBytes)
		if err != nil || len(chunk) > 0 || wait <= 0 || r.switching() {
			r.parked.Add(-1)
			if err != nil {
				code := protocol.SystemError
				if errors.Is(err, store.ErrNotFound) {
					code = protocol.PullOffsetMoved
				}
				return errorf(req, code, "reading the log at %d for replica %d: %v", h.Offset, h.ReplicaID, err)
			}
			return s.fetchResponse(req, cur, chunk)
		}
		if timer == nil {
			timer = time.NewTimer(wait)
			defer timer.Stop()
		}
		select {
		case <-ch:
			r.parked.Add(-1)
		case <-r.roleChanged():
			r.parked.Add(-1)
			return errorf(req, protocol.ServiceNotAvailable, "broker %s changed role", s.opts.BrokerName)
		case <-timer.C:
			r.parked.Add(-1)
			wait = 0
		case <-ctx.Done():
			r.parked.Add(-1)
			return s.fetchResponse(req, cur, nil)
		case <-s.ctx.Done():
			r.parked.Add(-1)
			return s.fetchResponse(req, cur, nil)
		}
	}
}

func (s *Server) fetchResponse(req *remoting.Command, epoch int64, chunk []byte) *remoting.Command {
	resp := remoting.NewResponse(req, int32(protocol.Success), "")
	rh := protocol.ReplicaFetchResponseHeader{Epoch: epoch, MasterEnd: s.store.CommitLogMaxOffset(), Confirmed: s.store.Confirmed()}
	resp.ExtFields = rh.Ext()
	if s.repl.switching() {
		// A switchover waits for the replicas' metadata: fetch it now.
		resp.ExtFields[extSyncMetaNow] = "true"
	}
	resp.Body = chunk
	return resp
}

// isrLoop takes replicas that stopped keeping up out of the in-sync set,
// so sync sends wait for live copies only.
func (r *replication) isrLoop(ctx context.Context) {
	t := time.NewTicker(isrCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		end := r.s.store.CommitLogMaxOffset()
		evicted := false
		r.mu.Lock()
		for _, p := range r.replicas {
			if p.acked >= end {
				p.caughtUp = now
			}
			if p.inSync && now.Sub(p.caughtUp) > r.s.opts.ReplicaLagMax {
				p.inSync, evicted = false, true
				r.s.logger.Warn("replica left the in-sync set: it fell behind", "replica", p.id, "addr", p.addr,
					"acked", p.acked, "masterEnd", end, "behindFor", now.Sub(p.caughtUp).Round(time.Millisecond))
			}
		}
		r.mu.Unlock()
		if evicted {
			r.signalAcks()
			r.kickController()
		}
	}
}

// waitReplicas waits, in sync mode, until every in-sync replica holds the
// log up to end and at least MinInsyncReplicas copies exist. The message is
// stored on the master either way; an error means it is not acknowledged.
func (r *replication) waitReplicas(ctx context.Context, end int64) error {
	var timer *time.Timer
	for {
		ch := r.ackChan()
		if done, err := r.replicated(end); done {
			return err
		}
		if timer == nil {
			timer = time.NewTimer(r.s.opts.ReplicaAckTimeout)
			defer timer.Stop()
		}
		select {
		case <-ch:
		case <-timer.C:
			return r.replicaTimeout(end)
		case <-ctx.Done():
			return fmt.Errorf("%w: %v", errReplicaTimeout, ctx.Err())
		}
	}
}

// replicated is waitReplicas without the wait: done once the log up to end
// may be acknowledged (err nil) or must not be (err says why); not done
// while in-sync replicas still miss part of it (a change is signalled on
// ackChan, and to syncAcks). Without sync replication it only checks the
// controller's lease.
func (r *replication) replicated(end int64) (done bool, err error) {
	if r.s.opts.Replication != ReplicationSync {
		if r.controllerMode() && !r.leaseValid() {
			return true, fmt.Errorf("%w: not acknowledged", errLeaseExpired)
		}
		return true, nil
	}
	r.mu.Lock()
	inSync, counted, behind, _ := r.ackSetLocked(end)
	master := r.state.Master
	r.mu.Unlock()
	if !master {
		return true, fmt.Errorf("%w: the broker stopped being master before the replicas confirmed", errReplicaTimeout)
	}
	if 1+inSync < r.s.opts.MinInsyncReplicas {
		return true, fmt.Errorf("%w: %d in-sync copies, min-insync-replicas is %d", errReplicaTimeout, 1+inSync, r.s.opts.MinInsyncReplicas)
	}
	if behind > 0 || 1+counted < r.s.opts.MinInsyncReplicas {
		// The second: enough copies, but not all in the controller's set
		// yet; its next answer (the master reports at once) settles it.
		return false, nil
	}
	if r.controllerMode() && !r.leaseValid() {
		return true, fmt.Errorf("%w: the lease lapsed before the replicas confirmed", errLeaseExpired)
	}
	return true, nil
}

// replicaTimeout is the refusal of a send whose in-sync replicas did not
// confirm the log up to end within ReplicaAckTimeout.
func (r *replication) replicaTimeout(end int64) error {
	r.mu.Lock()
	_, _, behind, _ := r.ackSetLocked(end)
	r.mu.Unlock()
	return fmt.Errorf("%w: %d in-sync replicas did not confirm within %s", errReplicaTimeout, behind, r.s.opts.ReplicaAckTimeout)
}

// ackSetLocked is what a sync send up to end waits for: inSync counts the
// replicas in this master's in-sync set; behind counts the replicas it must
// wait for that do not hold the log up to end, and low is the least offset
// they hold (-1 when one of them is not connected). Those are the replicas
// in its own set and, with the controller, those in the set the controller
// committed: a replica this master dropped (it fell behind, its connection
// closed) may still be elected until the controller has taken it out, so
// acknowledging without it could lose the acknowledgement in an election
// (Kafka's leader, likewise, shrinks its ISR only through the controller;
// the chaos campaign lost a message so: a master dropped a replica, answered
// sends and died, and the controller, still counting the replica in sync,
// elected it). Caller holds mu.
//
// counted is how many of the in-sync replicas count toward
// min-insync-replicas: with the controller, only those its committed set
// holds too (all of them when it has named none yet). A replica that joined
// this master's set but not yet the controller's is no candidate in an
// election, which may instead pick a member the controller keeps eligible
// (it left while the set was too small to acknowledge anything), so an
// acknowledgement counted on it could be lost.
func (r *replication) ackSetLocked(end int64) (inSync, counted, behind int, low int64) {
	low = end
	for id, p := range r.replicas {
		if p.inSync {
			inSync++
			if len(r.committedSync) == 0 || slices.Contains(r.committedSync, identityOf(id)) {
				counted++
			}
		}
		if p.inSync || slices.Contains(r.committedSync, identityOf(id)) {
			if p.acked < end {
				behind++
			}
			low = min(low, p.acked)
		}
	}
	for _, ident := range r.committedSync {
		if ident != r.s.opts.BrokerID && !r.connectedLocked(ident) {
			behind++
			low = -1
		}
	}
	return inSync, counted, behind, low
}

// connectedLocked reports whether the replica with broker identity ident
// is connected. Caller holds mu.
func (r *replication) connectedLocked(ident int64) bool {
	for id := range r.replicas {
		if identityOf(id) == ident {
			return true
		}
	}
	return false
}

// kickController makes the controller loop report now, so that a change of
// the in-sync set is committed (and the sends waiting on it answered)
// without waiting for the next heartbeat.
func (r *replication) kickController() {
	if !r.controllerMode() {
		return
	}
	select {
	case r.ctrlKick <- struct{}{}:
	default:
	}
}

// handleReplicaSyncMeta merges the consumer offsets a replica took commits
// for (forward only) and answers the master's metadata.
func (s *Server) handleReplicaSyncMeta(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
	name := req.ExtFields["brokerName"]
	if name != s.opts.BrokerName {
		return errorf(req, protocol.SystemError, "this is broker %s, not %s", s.opts.BrokerName, name)
	}
	if !s.isMaster() {
		return errorf(req, protocol.ServiceNotAvailable, "broker %s at %s is a replica, not the master", s.opts.BrokerName, s.addr)
	}
	var in protocol.ReplicaMeta
	if len(req.Body) > 0 {
		if err := json.Unmarshal(req.Body, &in); err != nil {
			return errorf(req, protocol.SystemError, "replica metadata: %v", err)
		}
	}
	for group, topics := range in.Offsets {
		for topic, queues := range topics {
			for q, off := range queues {
				if cur, ok := s.store.QueryOffset(group, topic, q); !ok || off > cur {
					s.store.CommitOffset(group, topic, q, off)
				}
			}
		}
	}
	began := time.Now()
	out, err := s.metaSnapshot()
	if err != nil {
		return errorf(req, protocol.SystemError, "master metadata: %v", err)
	}
	if id, err := strconv.ParseInt(req.ExtFields["replicaId"], 10, 64); err == nil {
		r := s.repl
		r.mu.Lock()
		if p := r.replicas[id]; p != nil {
			p.metaAt = began
		}
		r.mu.Unlock()
		r.signalAcks()
	}
	resp := remoting.NewResponse(req, int32(protocol.Success), "")
	resp.Body = out
	return resp
}

// metaSnapshot is everything a replica copies besides the log.
func (s *Server) metaSnapshot() ([]byte, error) {
	var m protocol.ReplicaMeta
	var err error
	if m.Topics, err = json.Marshal(s.topics.snapshot()); err != nil {
		return nil, err
	}
	if m.Groups, err = json.Marshal(s.groups.snapshot()); err != nil {
		return nil, err
	}
	var delay json.RawMessage
	if found, err := s.store.LoadMetadata(delayOffsetMetadata, &delay); err == nil && found {
		m.DelayOffsets = delay
	}
	var timers json.RawMessage
	if found, err := s.store.LoadMetadata(timerMetadata, &timers); err == nil && found {
		m.Timers = timers
	}
	m.Offsets = s.store.AllOffsets()
	m.Epochs = s.repl.epochs()
	return json.Marshal(&m)
}

// replicaStates reports the master's replicas (admin).
func (r *replication) replicaStates() map[int64]protocol.ReplicaState {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[int64]protocol.ReplicaState, len(r.replicas))
	for id, p := range r.replicas {
		out[id] = protocol.ReplicaState{Addr: p.addr, IDC: p.idc, Acked: p.acked, InSync: p.inSync, LastSeen: p.lastSeen.UnixMilli()}
	}
	return out
}
