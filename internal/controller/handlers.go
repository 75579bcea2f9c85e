package controller

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/hashicorp/raft"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// Limits on what brokers may make the controller keep (docs/controller.md).
const (
	maxGroups  = 4096
	maxMembers = protocol.MaxInSyncIDs
	maxNameLen = 255
)

// reply builds a response with code and remark.
func reply(req *remoting.Command, code protocol.ResponseCode, remark string) *remoting.Command {
	return remoting.NewResponse(req, int32(code), remark)
}

// decodeHeader fills h from req's ext fields; on failure it returns the
// INVALID_PARAMETER response to send.
func decodeHeader(req *remoting.Command, h protocol.Header) *remoting.Command {
	if err := h.SetExt(req.ExtFields); err != nil {
		return reply(req, protocol.InvalidParameter,
			fmt.Sprintf("bad %s request header: %v", protocol.RequestCode(req.Code), err))
	}
	return nil
}

// notLeader answers SERVICE_NOT_AVAILABLE with the leader's request
// address, when this voter knows it.
func (s *Server) notLeader(req *remoting.Command) *remoting.Command {
	_, id := s.raft.LeaderWithID()
	addr := ""
	if id != "" && string(id) != s.opts.NodeID {
		addr = s.fsm.apiAddr(string(id))
	}
	resp := reply(req, protocol.ServiceNotAvailable, "not the controller leader; leader at "+strconv.Quote(addr))
	resp.ExtFields = (&protocol.ControllerNotLeaderHeader{LeaderAddr: addr}).Ext()
	return resp
}

// handleBrokerHeartbeat serves CONTROLLER_BROKER_HEARTBEAT (9201): record
// the broker as alive, commit what changed (a new member or address, a
// group's first master, the master's in-sync set), and answer who the
// master is, with a lease when the caller is that master at that epoch.
func (s *Server) handleBrokerHeartbeat(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.ControllerHeartbeatRequestHeader
	if resp := decodeHeader(req, &h); resp != nil {
		return resp
	}
	inSync, err := protocol.ParseIDs(h.InSyncIDs)
	if err == nil {
		err = validateHeartbeat(&h)
	}
	if err != nil {
		return reply(req, protocol.InvalidParameter, "bad CONTROLLER_BROKER_HEARTBEAT: "+err.Error())
	}
	if !s.IsLeader() {
		return s.notLeader(req)
	}
	key := groupKey{Cluster: h.Cluster, Name: h.BrokerName}
	now := s.now()
	s.live.seen(key, &h, now)
	g := s.fsm.group(key)
	switch {
	case g == nil && s.fsm.groupCount() >= maxGroups:
		return reply(req, protocol.InvalidParameter, fmt.Sprintf("the controller keeps at most %d broker groups", maxGroups))
	case g != nil && g.Members[h.BrokerID] == nil && len(g.Members) >= maxMembers:
		return reply(req, protocol.InvalidParameter, fmt.Sprintf("a broker group has at most %d members", maxMembers))
	}
	// A master that lost records (its log shrank, or a replica following
	// it at this epoch holds more) gets no lease and does not count as
	// heard from, and its in-sync set is not taken: the set it would
	// report leaves out the replicas that refuse to follow it, and they
	// are who the next election needs.
	lost := s.masterLost(key, g, &h, now)
	if c, ok := reportCommand(key, g, &h, inSync, lost == ""); ok {
		if err := s.apply(c); err != nil && !errors.Is(err, errStale) {
			s.logger.Warn("heartbeat not committed", "group", key.String(), "broker", h.BrokerID, "err", err)
			return reply(req, protocol.ServiceNotAvailable, "the controller could not commit: "+err.Error())
		}
	}
	g = s.fsm.group(key) // masterLost may have moved the epoch on
	out := protocol.ControllerHeartbeatResponseHeader{MasterID: -1}
	if g != nil {
		out.MasterID, out.MasterAddr, out.Epoch = g.MasterID, g.MasterAddr, g.Epoch
		if g.MasterID == h.BrokerID && g.Epoch == h.Epoch && h.Role == protocol.RoleMaster && lost == "" {
			s.live.led(key, h.BrokerID, h.Epoch, now)
			lease, err := s.grantLease(key, h.BrokerID, h.Epoch, now)
			if err != nil {
				return reply(req, protocol.ServiceNotAvailable, "the controller could not commit the lease: "+err.Error())
			}
			out.LeaseMillis = lease.Milliseconds()
			out.InSyncIDs = protocol.FormatIDs(g.InSync)
		}
	}
	resp := reply(req, protocol.Success, "")
	resp.ExtFields = out.Ext()
	return resp
}

func validateHeartbeat(h *protocol.ControllerHeartbeatRequestHeader) error {
	switch {
	case h.Cluster == "":
		return errors.New("cluster is empty")
	case h.BrokerName == "":
		return errors.New("brokerName is empty")
	case h.BrokerID < 0:
		return fmt.Errorf("brokerId %d is negative", h.BrokerID)
	case h.Addr == "":
		return errors.New("addr is empty")
	case h.Epoch < 0 || h.LogEnd < 0:
		return errors.New("epoch and logEnd must not be negative")
	case h.Role != protocol.RoleMaster && h.Role != protocol.RoleReplica:
		return fmt.Errorf("role %q is neither %s nor %s", h.Role, protocol.RoleMaster, protocol.RoleReplica)
	case h.Role == protocol.RoleReplica && h.InSyncIDs != "":
		return errors.New("a replica reports no in-sync set")
	case max(len(h.Cluster), len(h.BrokerName), len(h.Addr), len(h.IDC)) > maxNameLen:
		return fmt.Errorf("cluster, brokerName, addr and idc are limited to %d bytes", maxNameLen)
	}
	return nil
}

// reportCommand is the command a heartbeat needs committed, if any: a
// member the group does not know (or at a new address), a master for a
// group without one, or a change of the master's in-sync set (when
// takeInSync). A log end alone is not committed (the leader keeps it in
// memory).
func reportCommand(key groupKey, g *group, h *protocol.ControllerHeartbeatRequestHeader, inSync []int64, takeInSync bool) (command, bool) {
	c := command{Type: cmdReport, Key: key, ID: h.BrokerID, Addr: h.Addr, IDC: h.IDC, LogEnd: h.LogEnd, Epoch: h.Epoch}
	need := false
	if g == nil {
		need = true
	} else if m := g.Members[h.BrokerID]; m == nil || m.Addr != h.Addr || m.IDC != h.IDC {
		need = true
	}
	isMaster := h.Role == protocol.RoleMaster
	if isMaster && (g == nil || (g.MasterID < 0 && h.Epoch >= g.Epoch)) {
		c.AdoptMaster, need = true, true
	}
	if isMaster && takeInSync && (c.AdoptMaster || (g.MasterID == h.BrokerID && g.Epoch == h.Epoch)) {
		set := slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(inSync), h.BrokerID))))
		if g == nil || !slices.Equal(set, g.InSync) {
			c.InSync, c.SetInSync, need = set, true, true
			c.MinInSync = int(min(h.MinInSync, 1<<16))
		}
	}
	return c, need
}

// masterLost says why h, a heartbeat of g's master at its epoch, shows a
// master that lost records it had ("" when it does not): its log is
// shorter than it once reported to this leader, or a live replica that
// follows it at this epoch holds more log than it does (a power loss took
// its unsynced tail, a disk was damaged). Such a master may lack
// acknowledged messages, and its replicas rightly refuse to cut their logs
// to match it: it gets no lease, so the next election gives the group to
// the member with the most log (docs/controller.md) — unless no member
// qualifies, when it stays master rather than leave the group with none.
func (s *Server) masterLost(key groupKey, g *group, h *protocol.ControllerHeartbeatRequestHeader, now time.Time) string {
	if g == nil || g.MasterID != h.BrokerID || g.Epoch != h.Epoch || h.Role != protocol.RoleMaster {
		return ""
	}
	why := ""
	if s.live.shrunk(key, h.BrokerID) {
		why = "its log is shorter than it reported before"
	} else if id, end := s.live.outrun(key, h.BrokerID, h.Epoch, h.LogEnd, now, s.opts.MasterLeaseTimeout); id >= 0 {
		why = fmt.Sprintf("broker %d, which follows it at this epoch, holds %d bytes of log to its %d", id, end, h.LogEnd)
	}
	if why == "" {
		return ""
	}
	if _, _, err := s.pickMaster(g, now, false); err != nil {
		// No one else qualifies: the master keeps the role (it is the
		// best copy there is), but at a new epoch, so that what it writes
		// from its shorter log never shares an epoch with the records it
		// lost, which replicas may hold (the chaos campaign saw two copies
		// with different records in one epoch). Its log as it is becomes
		// the reference.
		if s.live.block(key, "lost, none to elect: "+why) {
			s.logger.Warn("the master lost records it had, but no other member can take over; it stays master at a new epoch",
				"group", key.String(), "master", h.BrokerID, "epoch", h.Epoch, "logEnd", h.LogEnd, "why", why, "elect", err)
		}
		s.live.settle(key, h.BrokerID)
		s.decideMu.Lock()
		defer s.decideMu.Unlock()
		if cur := s.fsm.group(key); cur != nil && cur.MasterID == h.BrokerID && cur.Epoch == h.Epoch {
			if err := s.elect(cur, h.BrokerID, "it lost records: a new epoch", false); err != nil {
				s.logger.Warn("election failed", "group", key.String(), "candidate", h.BrokerID, "err", err)
			}
		}
		return ""
	}
	if s.live.block(key, "lost: "+why) {
		s.logger.Warn("the master lost records it had; no lease, the group gets another master", "group", key.String(),
			"master", h.BrokerID, "epoch", h.Epoch, "logEnd", h.LogEnd, "why", why)
	}
	return why
}

// grantLease returns the lease for broker id as master of key at epoch,
// or 0 when it is not (any more) or may not be leased yet. A master
// elected since the last lease gets its first only once the previous
// master's has surely ended, and that is committed first so the next
// leader may renew it at once. now is when the heartbeat arrived: the
// broker counts its lease from when it sent it, earlier, so it ends no
// later than the leader records.
func (s *Server) grantLease(key groupKey, id, epoch int64, now time.Time) (time.Duration, error) {
	s.decideMu.Lock()
	defer s.decideMu.Unlock()
	g := s.fsm.group(key)
	if g == nil || g.MasterID != id || g.Epoch != epoch {
		return 0, nil // an election got in first
	}
	if s.live.retiring(key, epoch) {
		return 0, nil // an operator's switch waits for this lease to end
	}
	if g.LeasedEpoch != g.Epoch {
		if s.now().Before(s.live.fenceUntil(g.Key, g.Epoch, s.opts.MasterLeaseTimeout)) {
			return 0, nil
		}
		err := s.apply(command{Type: cmdLease, Key: g.Key, ID: g.MasterID, Epoch: g.Epoch})
		if errors.Is(err, errStale) {
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
	}
	s.live.granted(g.Key, g.Epoch, now.Add(s.opts.MasterLeaseTimeout))
	return s.opts.MasterLeaseTimeout, nil
}

// handleElect serves CONTROLLER_ELECT (9203): an operator's switch to a
// given broker (To >= 0) or an election of the best live member (To < 0);
// without Force only from the in-sync set.
func (s *Server) handleElect(ctx context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.ControllerElectRequestHeader
	if resp := decodeHeader(req, &h); resp != nil {
		return resp
	}
	if h.Cluster == "" || h.BrokerName == "" {
		return reply(req, protocol.InvalidParameter, "bad CONTROLLER_ELECT: cluster and brokerName are required")
	}
	if !s.IsLeader() {
		return s.notLeader(req)
	}
	key := groupKey{Cluster: h.Cluster, Name: h.BrokerName}
	s.decideMu.Lock()
	locked := true
	defer func() {
		if locked {
			s.decideMu.Unlock()
		}
	}()
	g := s.fsm.group(key)
	if g == nil {
		return reply(req, protocol.InvalidParameter, "no broker group "+key.String()+" has reported to the controller")
	}
	now := s.now()
	decide := func() (int64, int64, error) {
		pick, known, err := s.pickMaster(g, now, h.Force)
		if h.To >= 0 {
			pick, err = h.To, s.checkSwitchTarget(g, h.To, h.Force, now)
		}
		return pick, known, err
	}
	pick, known, err := decide()
	if err != nil {
		return reply(req, protocol.IllegalOperation, "no election: "+err.Error())
	}
	// The current master may hold a lease (a planned switch): stop
	// renewing it and commit the election only once it has ended, so the
	// old master acknowledges nothing after the new one is elected. The
	// wait releases decideMu: other groups' leases go on meanwhile.
	if until := s.live.retire(key, g.Epoch, s.opts.MasterLeaseTimeout); until.After(now) {
		defer s.live.unretire(key)
		s.decideMu.Unlock()
		locked = false
		t := time.NewTimer(until.Sub(now))
		select {
		case <-ctx.Done():
			t.Stop()
			return reply(req, protocol.ServiceNotAvailable, "no election: the controller is stopping")
		case <-t.C:
		}
		s.decideMu.Lock()
		locked = true
		prev := g.Epoch
		if g = s.fsm.group(key); g == nil || g.Epoch != prev {
			if g != nil && h.To >= 0 && g.MasterID == h.To {
				// The lease check elected the requested member as the
				// old lease ran out (the master was silent meanwhile):
				// what was asked is done.
				out := protocol.ControllerElectResponseHeader{MasterID: g.MasterID, MasterAddr: g.MasterAddr, Epoch: g.Epoch}
				resp := reply(req, protocol.Success, "")
				resp.ExtFields = out.Ext()
				return resp
			}
			return reply(req, protocol.ServiceNotAvailable, "no election: the group changed while the old master's lease ran out")
		}
		now = s.now()
		if pick, known, err = decide(); err != nil {
			return reply(req, protocol.IllegalOperation, "no election: "+err.Error())
		}
	}
	_, pickEnd, _ := s.live.alive(key, pick, now, s.opts.MasterLeaseTimeout)
	if err := s.elect(g, pick, "operator from "+conn.RemoteAddr(), h.Force); err != nil {
		return reply(req, protocol.ServiceNotAvailable, "no election: "+err.Error())
	}
	g = s.fsm.group(key)
	out := protocol.ControllerElectResponseHeader{MasterID: g.MasterID, MasterAddr: g.MasterAddr, Epoch: g.Epoch}
	if h.Force {
		out.MayLoseBytes = max(0, known-pickEnd)
	}
	resp := reply(req, protocol.Success, "")
	if out.MayLoseBytes > 0 {
		resp.Remark = fmt.Sprintf("forced: up to %d log bytes beyond the new master's end may be lost", out.MayLoseBytes)
	}
	resp.ExtFields = out.Ext()
	return resp
}

// checkSwitchTarget says whether broker id may become g's master now.
func (s *Server) checkSwitchTarget(g *group, id int64, force bool, now time.Time) error {
	switch alive, _, _ := s.live.alive(g.Key, id, now, s.opts.MasterLeaseTimeout); {
	case id == g.MasterID:
		return fmt.Errorf("broker %d is already master at epoch %d", id, g.Epoch)
	case g.Members[id] == nil:
		return fmt.Errorf("broker %d is not a member of %s", id, g.Key)
	case !alive:
		return fmt.Errorf("broker %d has not been heard from within %s", id, s.opts.MasterLeaseTimeout)
	case !force && !g.inSync(id):
		return fmt.Errorf("broker %d is not in the in-sync set %v (force would risk acknowledged messages)", id, g.InSync)
	}
	return nil
}

// handleGetStatus serves CONTROLLER_GET_STATUS (9202) from any voter: its
// own view, with liveness only when it leads.
func (s *Server) handleGetStatus(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	st := s.Status()
	body, err := json.Marshal(&st)
	if err != nil {
		return reply(req, protocol.SystemError, "encoding the status failed")
	}
	resp := reply(req, protocol.Success, "")
	resp.Body = body
	return resp
}

// Status is this voter's view of the controller.
func (s *Server) Status() protocol.ControllerStatus {
	_, leaderID := s.raft.LeaderWithID()
	stats := s.raft.Stats()
	term, _ := strconv.ParseUint(stats["term"], 10, 64)
	commit, _ := strconv.ParseUint(stats["commit_index"], 10, 64)
	st := protocol.ControllerStatus{
		NodeID: s.opts.NodeID, Leader: string(leaderID), LeaderAddr: s.fsm.apiAddr(string(leaderID)),
		IsLeader: s.IsLeader(), Term: term, Commit: commit, Applied: s.raft.AppliedIndex(),
		Voters: []protocol.ControllerVoter{}, Groups: []protocol.ControllerGroup{},
	}
	if f := s.raft.GetConfiguration(); f.Error() == nil {
		for _, sv := range f.Configuration().Servers {
			st.Voters = append(st.Voters, protocol.ControllerVoter{ID: string(sv.ID), RaftAddr: string(sv.Address),
				Addr: s.fsm.apiAddr(string(sv.ID)), Suffrage: suffrage(sv.Suffrage)})
		}
	}
	now := s.now()
	for _, g := range s.fsm.allGroups() {
		cg := protocol.ControllerGroup{Cluster: g.Key.Cluster, BrokerName: g.Key.Name, MasterID: g.MasterID,
			MasterAddr: g.MasterAddr, Epoch: g.Epoch, InSync: g.InSync, History: []protocol.ControllerEpoch{}, Floor: g.Floor,
			Eligible: g.Eligible}
		for _, h := range g.History {
			cg.History = append(cg.History, protocol.ControllerEpoch{Epoch: h.Epoch, MasterID: h.MasterID,
				Addr: h.Addr, ElectedAtMillis: h.AtMillis})
		}
		for id, m := range g.Members {
			cm := protocol.ControllerMember{ID: id, Addr: m.Addr, IDC: m.IDC, LogEnd: m.LogEnd}
			if st.IsLeader {
				alive, logEnd, seen := s.live.alive(g.Key, id, now, s.opts.MasterLeaseTimeout)
				cm.Alive = alive
				if !seen.IsZero() {
					cm.LogEnd, cm.LastSeenMillis = logEnd, now.Sub(seen).Milliseconds()
				}
			}
			cg.Members = append(cg.Members, cm)
		}
		slices.SortFunc(cg.Members, func(a, b protocol.ControllerMember) int { return cmp.Compare(a.ID, b.ID) })
		st.Groups = append(st.Groups, cg)
	}
	return st
}

func suffrage(v raft.ServerSuffrage) string {
	if v == raft.Voter {
		return "voter"
	}
	return "nonvoter"
}
