package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// Controller mode (Options.ControllerAddrs, docs/controller.md): the
// controller, not the broker, decides who is its group's master. Every
// broker reports to the controller's leader every ControllerHeartbeatInterval
// with its identity (--id), role, epoch and log end, a master with its
// in-sync replicas too. The answer names the group's master and epoch, and
// grants the master a lease: it accepts writes only until the send time of
// its last answered heartbeat plus the lease, which is shorter than the
// silence after which the controller elects another master, so a master cut
// off from the controller stops acknowledging before a new one can start.
// A broker the answer does not name steps down and follows the one it
// names; the one it names steps up at the answer's epoch.

// errLeaseExpired refuses writes on a master whose controller lease lapsed.
var errLeaseExpired = errors.New("broker: the controller lease lapsed")

// exMasterID is the id a broker of identity 0 registers under while it is a
// replica in controller mode (id 0 is the master's).
const exMasterID = 1000

// controllerMode reports whether a controller decides the roles.
func (r *replication) controllerMode() bool { return len(r.s.opts.ControllerAddrs) > 0 }

// replicaRegID is the id a broker registers under as a replica.
func (r *replication) replicaRegID() int64 {
	if id := r.s.opts.BrokerID; id != protocol.MasterID {
		return id
	}
	return exMasterID
}

// identityOf maps a registered replica id back to the broker's identity.
func identityOf(regID int64) int64 {
	if regID == exMasterID {
		return 0
	}
	return regID
}

// leaseValid reports whether a controller-mode master may acknowledge now.
func (r *replication) leaseValid() bool {
	return monoNanos(time.Now()) < r.leaseUntil.Load()
}

// monoBase anchors monoNanos.
var monoBase = time.Now()

// monoNanos is t on the process's monotonic clock, in nanoseconds since
// it started: what lease ends are kept in. A lease is a span of time the
// controller granted from the moment the heartbeat left, so it is measured
// on the monotonic clock, which a wall-clock step (NTP, an operator)
// cannot move; kept in wall-clock nanoseconds, a clock set back by a
// minute would have let a fenced master acknowledge for a minute more.
// t must carry a monotonic reading (a time.Now()).
func monoNanos(t time.Time) int64 { return t.Sub(monoBase).Nanoseconds() }

// controllerLoop reports to the controller and applies its answers until
// ctx ends.
func (r *replication) controllerLoop(ctx context.Context) {
	t := time.NewTicker(r.s.opts.ControllerHeartbeatInterval)
	defer t.Stop()
	for {
		if err := r.controllerBeat(ctx); err != nil && ctx.Err() == nil {
			r.s.logger.Debug("controller heartbeat failed", "err", err)
			r.stepDownWithoutLease()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.ctrlKick:
		}
	}
}

// controllerBeat sends one heartbeat to the controller's leader and acts on
// the answer.
func (r *replication) controllerBeat(ctx context.Context) error {
	s := r.s
	r.mu.Lock()
	h := protocol.ControllerHeartbeatRequestHeader{
		Cluster: s.opts.Cluster, BrokerName: s.opts.BrokerName, BrokerID: s.opts.BrokerID, Addr: s.addr, IDC: s.opts.IDC,
		Epoch: r.lastEpoch(), LogEnd: s.store.CommitLogMaxOffset(), Role: protocol.RoleReplica,
	}
	if !r.state.Master {
		h.NoLead = r.leadRefusalLocked()
	}
	if r.state.Master {
		h.Role = protocol.RoleMaster
		if s.opts.Replication == ReplicationSync {
			h.MinInSync = int64(s.opts.MinInsyncReplicas)
		}
		var ids []int64
		for id, p := range r.replicas {
			if p.inSync {
				ids = append(ids, identityOf(id))
			}
		}
		if s.isStopping() && r.committedSync != nil {
			// A stopping master's replicas leave its set as their
			// connections close: they are the group's good copies, and
			// the controller must keep them to elect one.
			ids = slices.DeleteFunc(slices.Clone(r.committedSync), func(id int64) bool { return id == s.opts.BrokerID })
		}
		h.InSyncIDs = protocol.FormatIDs(ids)
	}
	r.mu.Unlock()
	sent := time.Now()
	resp, err := r.invokeController(ctx, remoting.NewRequest(int32(protocol.ControllerBrokerHeartbeat), h.Ext(), nil),
		2*s.opts.ControllerHeartbeatInterval)
	if err != nil {
		return err
	}
	var ans protocol.ControllerHeartbeatResponseHeader
	if err := ans.SetExt(resp.ExtFields); err != nil {
		return err
	}
	r.applyControllerAnswer(ans, sent)
	return nil
}

// invokeController sends req to the controller's leader: the last one that
// answered, then each configured voter, following "not leader" redirects.
// Each voter gets perTry to answer.
func (r *replication) invokeController(ctx context.Context, req *remoting.Command, perTry time.Duration) (*remoting.Command, error) {
	// Signed once (a controller with an ACL wants the broker's admin
	// account), then sent to each voter in turn.
	req = r.s.signRequest(req)
	r.mu.Lock()
	addrs := append([]string{r.ctrlLeader}, r.s.opts.ControllerAddrs...)
	r.mu.Unlock()
	var errs []error
	for i := 0; i < len(addrs) && i < 8; i++ {
		addr := addrs[i]
		if addr == "" {
			continue
		}
		ictx, cancel := context.WithTimeout(ctx, perTry)
		resp, err := r.ctrlClient.Invoke(ictx, addr, req)
		cancel()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if resp.Code == int32(protocol.Success) {
			r.mu.Lock()
			r.ctrlLeader = addr
			r.mu.Unlock()
			return resp, nil
		}
		var nl protocol.ControllerNotLeaderHeader
		if resp.Code == int32(protocol.ServiceNotAvailable) && nl.SetExt(resp.ExtFields) == nil && nl.LeaderAddr != "" && nl.LeaderAddr != addr {
			addrs = append(addrs[:i+1], append([]string{nl.LeaderAddr}, addrs[i+1:]...)...)
			continue
		}
		if resp.Code != int32(protocol.ServiceNotAvailable) {
			// The leader answered and said no: asking the others would
			// only repeat it.
			return nil, &protocol.Error{Code: protocol.ResponseCode(resp.Code), Remark: resp.Remark}
		}
		errs = append(errs, &protocol.Error{Code: protocol.ResponseCode(resp.Code), Remark: resp.Remark})
	}
	return nil, fmt.Errorf("no controller leader answered: %w", errors.Join(errs...))
}

// applyControllerAnswer makes the broker's role the controller's decision.
func (r *replication) applyControllerAnswer(ans protocol.ControllerHeartbeatResponseHeader, sent time.Time) {
	s := r.s
	me := s.opts.BrokerID
	r.mu.Lock()
	switch {
	case ans.MasterID == me && ans.Epoch >= r.lastEpoch() && !r.state.Master && r.leadRefusalLocked() != "":
		// This broker may lack what the group acknowledged, so it does
		// not lead; without its lease the controller elects another
		// member.
		why := r.leadRefusalLocked()
		r.mu.Unlock()
		if !r.refusedLead.Swap(true) {
			s.logger.Error("the controller names this broker master, but it may lack acknowledged messages: refusing; "+
				"another member will be elected (or force one: zonemq admin broker elect)",
				"why", why, "epoch", ans.Epoch, "logEnd", s.store.CommitLogMaxOffset())
		}
	case ans.MasterID == me && ans.Epoch >= r.lastEpoch():
		promoted := false
		if !r.state.Master {
			// Elected: the controller picked this broker from the in-sync
			// set, so its log holds everything the group acknowledged.
			r.replicas = map[int64]*replicaPeer{}
			r.setRoleLocked(true, protocol.MasterID)
			r.follow = ""
			promoted = true
		}
		if ans.Epoch > r.lastEpoch() {
			r.startEpochLocked(ans.Epoch)
		}
		setChanged := false
		if ans.LeaseMillis > 0 {
			r.leaseUntil.Store(monoNanos(sent.Add(time.Duration(ans.LeaseMillis) * time.Millisecond)))
			if ids, err := protocol.ParseIDs(ans.InSyncIDs); err == nil && ans.InSyncIDs != "" && !slices.Equal(ids, r.committedSync) {
				r.committedSync, setChanged = ids, true
			}
		}
		err := r.persistLocked()
		r.mu.Unlock()
		if err != nil {
			s.logger.Error("persisting the role the controller gave", "err", err)
		}
		if setChanged {
			r.signalAcks() // sends waiting for a replica the set no longer has
		}
		if promoted {
			// The controller leases only a master's report, which names
			// its in-sync set first: send it now.
			r.kickController()
			s.logger.Info("the controller elected this broker master", "epoch", ans.Epoch, "logEnd", s.store.CommitLogMaxOffset())
			s.afterPromotion()
			s.namesrvs.kickAll()
		}
	case ans.MasterID >= 0 && ans.MasterID != me:
		demoted := r.state.Master
		if demoted {
			r.leaseUntil.Store(0)
			r.replicas = map[int64]*replicaPeer{}
			r.setRoleLocked(false, r.replicaRegID())
		}
		changed := r.follow != ans.MasterAddr
		r.follow = ans.MasterAddr
		err := r.persistLocked()
		r.mu.Unlock()
		if err != nil {
			s.logger.Error("persisting the role the controller gave", "err", err)
		}
		if demoted {
			r.signalAcks()
			s.logger.Warn("the controller made another broker master; following it", "master", ans.MasterAddr,
				"masterId", ans.MasterID, "epoch", ans.Epoch)
			s.namesrvs.kickAll()
		} else if changed {
			r.kickFollow()
		}
	default:
		r.mu.Unlock()
	}
}

// leadRefusalLocked says why this broker must not be master now, "" when
// it may: it moved its damaged log aside at start and holds only what it
// copied since (reseed.go), or its log ends before its last epoch began —
// it lost records it had when that epoch started (a power loss took the
// unsynced tail it fetched as a replica, a disk was damaged). Either way
// another copy may hold acknowledged messages it lacks. Caller holds mu.
func (r *replication) leadRefusalLocked() string {
	if r.state.MustCatchUp != "" {
		return r.state.MustCatchUp
	}
	end := r.s.store.CommitLogMaxOffset()
	if n := len(r.state.Epochs); n > 0 && end < r.state.Epochs[n-1].StartOffset {
		last := r.state.Epochs[n-1]
		return fmt.Sprintf("its log ends at %d, before its epoch %d began at %d: it lost records since", end, last.Epoch, last.StartOffset)
	}
	return ""
}

// kickFollow makes the replica loop look for its master again now.
func (r *replication) kickFollow() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.roleGen++
	close(r.roleCh)
	r.roleCh = make(chan struct{})
}

// stepDownWithoutLease demotes a master whose lease ended a while ago and
// that cannot reach the controller: it acknowledges nothing anyway, and as a
// replica it gives up the group's id-0 slot at the name servers, so that the
// master the controller elected meanwhile can take it. It asks the
// controller again every heartbeat and is made master again if the
// controller still names it.
func (r *replication) stepDownWithoutLease() {
	until := r.leaseUntil.Load()
	grace := 3 * r.s.opts.ControllerHeartbeatInterval
	if until == 0 || monoNanos(time.Now()) < until+grace.Nanoseconds() {
		return
	}
	r.mu.Lock()
	if !r.state.Master {
		r.mu.Unlock()
		return
	}
	r.leaseUntil.Store(0)
	r.replicas = map[int64]*replicaPeer{}
	r.setRoleLocked(false, r.replicaRegID())
	r.follow = ""
	err := r.persistLocked()
	r.mu.Unlock()
	if err != nil {
		r.s.logger.Error("persisting the role after losing the lease", "err", err)
	}
	r.signalAcks()
	r.s.logger.Warn("the controller lease ended and the controller is unreachable: stepping down to replica")
	r.s.namesrvs.kickAll()
}
