package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/testutil"
)

// A 3-voter cluster elects one leader; followers send callers to it.
func TestControllerElectsLeader(t *testing.T) {
	c := startCluster(t, 3)
	leader := c.leader()
	for _, v := range c.voters {
		if v == leader {
			continue
		}
		// The leader records its request address through Raft just
		// after taking over; followers learn it from the log.
		testutil.Eventually(t, testDeadline, func() error {
			st := c.status(v.srv.Addr())
			if st.Leader != leader.opts.NodeID || st.LeaderAddr != leader.srv.Addr() {
				return fmt.Errorf("follower %s sees leader %q at %q", v.opts.NodeID, st.Leader, st.LeaderAddr)
			}
			return nil
		})
		resp := c.invoke(v.srv.Addr(), protocol.ControllerBrokerHeartbeat,
			(&testBroker{id: 0, role: protocol.RoleMaster, epoch: 1}).header())
		testutil.Equal(t, protocol.ResponseCode(resp.Code), protocol.ServiceNotAvailable, "follower heartbeat")
		var nl protocol.ControllerNotLeaderHeader
		testutil.NoError(t, nl.SetExt(resp.ExtFields))
		testutil.Equal(t, nl.LeaderAddr, leader.srv.Addr(), "follower points at the leader")
	}
	st := c.status(leader.srv.Addr())
	testutil.Equal(t, len(st.Voters), 3, "voters")
	testutil.True(t, st.IsLeader && st.Term > 0, "leader status")
}

// Bad reports are refused with INVALID_PARAMETER, never a crash.
func TestControllerHeartbeatBadInput(t *testing.T) {
	c := startCluster(t, 1)
	leader := c.leader()
	bad := []func(h *protocol.ControllerHeartbeatRequestHeader){
		func(h *protocol.ControllerHeartbeatRequestHeader) { h.Cluster = "" },
		func(h *protocol.ControllerHeartbeatRequestHeader) { h.BrokerID = -1 },
		func(h *protocol.ControllerHeartbeatRequestHeader) { h.Role = "boss" },
		func(h *protocol.ControllerHeartbeatRequestHeader) { h.InSyncIDs = "1,x" },
		func(h *protocol.ControllerHeartbeatRequestHeader) { h.Role, h.InSyncIDs = protocol.RoleReplica, "1" },
		func(h *protocol.ControllerHeartbeatRequestHeader) { h.Addr = strings.Repeat("a", maxNameLen+1) },
	}
	for i, mutate := range bad {
		h := (&testBroker{id: 0, role: protocol.RoleMaster, epoch: 1}).header()
		mutate(h)
		resp := c.invoke(leader.srv.Addr(), protocol.ControllerBrokerHeartbeat, h)
		testutil.Equal(t, protocol.ResponseCode(resp.Code), protocol.InvalidParameter, "bad report", i)
	}
	// A group is limited in members.
	for id := range int64(maxMembers) {
		_, err := c.heartbeat(leader.srv.Addr(), &testBroker{id: id, role: protocol.RoleReplica, epoch: 1})
		testutil.NoError(t, err, "member", id)
	}
	_, err := c.heartbeat(leader.srv.Addr(), &testBroker{id: maxMembers, role: protocol.RoleReplica, epoch: 1})
	testutil.True(t, err != nil && strings.Contains(err.Error(), "INVALID_PARAMETER"), "one member too many", err)
	resp := c.invoke(leader.srv.Addr(), protocol.ControllerElect, &protocol.ControllerElectRequestHeader{
		Cluster: "zc", BrokerName: "nope", To: -1})
	testutil.Equal(t, protocol.ResponseCode(resp.Code), protocol.InvalidParameter, "elect in an unknown group")
}

// When the master falls silent, the live in-sync replica with the highest
// log end becomes master at epoch+1; a faster replica outside the set does
// not. The new master's first lease waits for the old one's to end.
func TestControllerLeaseLapseElectsInSyncReplica(t *testing.T) {
	c := startCluster(t, 3)
	leader := c.leader()
	brokers := c.establishGroup(leader, []int64{2})
	// Replica 1 is ahead of 2 but out of the in-sync set: only 2 may win.
	r1, r2 := brokers[1], brokers[2]
	testutil.Eventually(t, testDeadline, func() error {
		for _, b := range []*testBroker{r1, r2} {
			out, err := c.heartbeat(leader.srv.Addr(), b)
			if err != nil {
				return err
			}
			if out.Epoch == 2 {
				testutil.Equal(t, out.MasterID, int64(2), "elected")
				return nil
			}
		}
		return errors.New("no election yet")
	})
	g := groupStatus(c.status(leader.srv.Addr()))
	testutil.Equal(t, g.MasterID, int64(2), "status master")
	testutil.Equal(t, g.Epoch, int64(2), "status epoch")
	// Until the new master's first report the set keeps the old master,
	// which wrote everything its epoch acknowledged.
	testutil.True(t, slices.Equal(g.InSync, []int64{0, 2}), "in-sync set: the new master and the old", g.InSync)
	// The status carries the epoch history: the adopted master, then the
	// elected one, each with its address and a commit time.
	testutil.Equal(t, len(g.History), 2, "history entries")
	testutil.Equal(t, g.History[0].MasterID, int64(0), "first master")
	testutil.Equal(t, g.History[1].MasterID, int64(2), "second master")
	testutil.Equal(t, g.History[1].Epoch, int64(2), "second epoch")
	testutil.Equal(t, g.History[1].Addr, g.MasterAddr, "history address")
	testutil.True(t, g.History[1].ElectedAtMillis >= g.History[0].ElectedAtMillis && g.History[0].ElectedAtMillis > 0,
		"election times", g.History)

	// The new master, promoted, reports at epoch 2 and gets a lease.
	r2.role, r2.epoch = protocol.RoleMaster, 2
	testutil.Eventually(t, testDeadline, func() error {
		out, err := c.heartbeat(leader.srv.Addr(), r2)
		if err != nil {
			return err
		}
		if out.LeaseMillis != testLeaseTimeout.Milliseconds() {
			return fmt.Errorf("lease %d ms", out.LeaseMillis)
		}
		return nil
	})
	// The old master, back at epoch 1, learns it is not master: no lease.
	out, err := c.heartbeat(leader.srv.Addr(), brokers[0])
	testutil.NoError(t, err)
	testutil.Equal(t, out.MasterID, int64(2), "old master told the new one")
	testutil.Equal(t, out.LeaseMillis, int64(0), "old master gets no lease")
}

// A replica outside the in-sync set is never elected on its own, nor by an
// operator without force; a forced election takes it and says what may be
// lost.
func TestControllerNonInSyncNeedsForce(t *testing.T) {
	c := startCluster(t, 3)
	leader := c.leader()
	brokers := c.establishGroup(leader, nil) // in-sync set {0}
	r1 := brokers[1]
	key := groupKey{Cluster: "zc", Name: "g1"}
	// Keep replica 1 alive until the leader has found the lapsed lease
	// and no one to elect.
	testutil.Eventually(t, testDeadline, func() error {
		if _, err := c.heartbeat(leader.srv.Addr(), r1); err != nil {
			return err
		}
		leader.srv.live.mu.Lock()
		defer leader.srv.live.mu.Unlock()
		if gl := leader.srv.live.groups[key]; gl == nil || gl.blocked == "" {
			return errors.New("the lease check has not given up yet")
		}
		return nil
	})
	g := groupStatus(c.status(leader.srv.Addr()))
	testutil.Equal(t, g.MasterID, int64(0), "no election without an in-sync replica")
	testutil.Equal(t, g.Epoch, int64(1), "epoch unchanged")

	elect := func(to int64, force bool) (*protocol.ControllerElectResponseHeader, protocol.ResponseCode) {
		_, err := c.heartbeat(leader.srv.Addr(), r1)
		testutil.NoError(t, err)
		resp := c.invoke(leader.srv.Addr(), protocol.ControllerElect,
			&protocol.ControllerElectRequestHeader{Cluster: "zc", BrokerName: "g1", To: to, Force: force})
		var out protocol.ControllerElectResponseHeader
		if protocol.ResponseCode(resp.Code) == protocol.Success {
			testutil.NoError(t, out.SetExt(resp.ExtFields))
		}
		return &out, protocol.ResponseCode(resp.Code)
	}
	_, code := elect(1, false)
	testutil.Equal(t, code, protocol.IllegalOperation, "switch to a non-in-sync replica")
	_, code = elect(-1, false)
	testutil.Equal(t, code, protocol.IllegalOperation, "election without an in-sync candidate")
	// Replica 2 reported last just after the master: wait until the
	// leader counts it silent too.
	testutil.Eventually(t, testDeadline, func() error {
		for _, m := range groupStatus(c.status(leader.srv.Addr())).Members {
			if m.ID == 2 && m.Alive {
				return errors.New("replica 2 still counts as alive")
			}
		}
		return nil
	})
	_, code = elect(2, true)
	testutil.Equal(t, code, protocol.IllegalOperation, "forced switch to a silent replica")
	out, code := elect(-1, true)
	testutil.Equal(t, code, protocol.Success, "forced election")
	testutil.Equal(t, out.MasterID, int64(1), "forced master")
	testutil.Equal(t, out.Epoch, int64(2), "forced epoch")
	testutil.Equal(t, out.MayLoseBytes, brokers[0].logEnd-r1.logEnd, "what may be lost")
}

// Losing the leader keeps the state; the next leader serves it and still
// elects.
func TestControllerLeaderLossKeepsState(t *testing.T) {
	// A longer lease, so the next leader cannot elect before the state
	// is checked, however slow the machine.
	c := startClusterWith(t, 3, func(o *Options) { o.MasterLeaseTimeout = 3 * time.Second })
	old := c.leader()
	brokers := c.establishGroup(old, []int64{1, 2})
	old.stop()
	var rest []*testVoter
	for _, v := range c.voters {
		if v != old {
			rest = append(rest, v)
		}
	}
	leader := c.leader(rest...)
	out, err := c.heartbeat(leader.srv.Addr(), brokers[1])
	testutil.NoError(t, err)
	testutil.Equal(t, out.MasterID, int64(0), "master kept")
	testutil.Equal(t, out.Epoch, int64(1), "epoch kept")
	// The master is gone too: the new leader elects after its own lease
	// timeout.
	testutil.Eventually(t, testDeadline, func() error {
		out, err := c.heartbeat(leader.srv.Addr(), brokers[1])
		if err != nil {
			return err
		}
		if out.Epoch != 2 {
			return errors.New("no election yet")
		}
		testutil.Equal(t, out.MasterID, int64(1), "in-sync replica with the highest log end")
		return nil
	})
}

// All voters restarted recover the groups from their Raft logs.
func TestControllerRestartAllRecovers(t *testing.T) {
	// A long lease: the restarted leader must not elect (the master is
	// silent) before the state is compared.
	c := startClusterWith(t, 3, func(o *Options) { o.MasterLeaseTimeout = time.Minute })
	leader := c.leader()
	c.establishGroup(leader, []int64{1})
	want := groupStatus(c.status(leader.srv.Addr()))
	// One voter restores from a snapshot plus the log after it, the
	// others from the log alone.
	testutil.NoError(t, c.voters[0].srv.raft.Snapshot().Error(), "snapshot")
	var restarted []*testVoter
	for _, v := range c.voters {
		v.stop()
	}
	for _, v := range c.voters[:3] {
		opts := v.opts
		opts.Bootstrap = false
		restarted = append(restarted, c.startVoter(opts))
	}
	leader = c.leader(restarted...)
	testutil.Eventually(t, testDeadline, func() error {
		got := groupStatus(c.status(leader.srv.Addr()))
		if got == nil {
			return errors.New("no group after restart")
		}
		if got.MasterID != want.MasterID || got.Epoch != want.Epoch || !slices.Equal(got.InSync, want.InSync) ||
			len(got.Members) != len(want.Members) || !slices.Equal(got.History, want.History) {
			return fmt.Errorf("after restart %+v, before %+v", got, want)
		}
		return nil
	})
}

// One voter of three refuses heartbeats and elections: no majority.
func TestControllerMinorityRefusesElections(t *testing.T) {
	c := startCluster(t, 3)
	leader := c.leader()
	brokers := c.establishGroup(leader, []int64{1, 2})
	survivor := c.voters[0]
	for _, v := range c.voters[1:] {
		v.stop()
	}
	testutil.Eventually(t, testDeadline, func() error {
		if survivor.srv.raft.State().String() == "Leader" {
			return errors.New("the survivor still believes it leads")
		}
		return nil
	})
	resp := c.invoke(survivor.srv.Addr(), protocol.ControllerElect,
		&protocol.ControllerElectRequestHeader{Cluster: "zc", BrokerName: "g1", To: 1})
	testutil.Equal(t, protocol.ResponseCode(resp.Code), protocol.ServiceNotAvailable, "elect on a minority")
	_, err := c.heartbeat(survivor.srv.Addr(), brokers[1])
	testutil.True(t, err != nil, "heartbeat on a minority is refused")
	g := groupStatus(c.status(survivor.srv.Addr()))
	testutil.Equal(t, g.MasterID, int64(0), "master unchanged")
	testutil.Equal(t, g.Epoch, int64(1), "epoch unchanged")
}

// The Client finds the leader from a follower's answer and keeps using it.
func TestControllerClientFollowsLeader(t *testing.T) {
	c := startCluster(t, 3)
	leader := c.leader()
	var follower *testVoter
	for _, v := range c.voters {
		if v != leader {
			follower = v
		}
	}
	// Wait until the follower knows the leader's request address.
	testutil.Eventually(t, testDeadline, func() error {
		if c.status(follower.srv.Addr()).LeaderAddr != leader.srv.Addr() {
			return errors.New("follower does not know the leader's address yet")
		}
		return nil
	})
	cl := NewClient([]string{follower.srv.Addr()})
	t.Cleanup(func() { cl.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	defer cancel()
	out, err := cl.Heartbeat(ctx, (&testBroker{id: 0, role: protocol.RoleMaster, epoch: 1, logEnd: 7}).header())
	testutil.NoError(t, err)
	testutil.Equal(t, out.MasterID, int64(0), "adopted through the redirect")
	testutil.True(t, out.LeaseMillis > 0, "leased")
	_, _, err = cl.Elect(ctx, &protocol.ControllerElectRequestHeader{Cluster: "zc", BrokerName: "g1", To: 5})
	var perr *protocol.Error
	testutil.True(t, errors.As(err, &perr) && perr.Code == protocol.IllegalOperation, "switch to an unknown broker", err)
	st, err := cl.Status(ctx, follower.srv.Addr())
	testutil.NoError(t, err)
	testutil.Equal(t, st.Leader, leader.opts.NodeID, "status through the client")
}

// An operator switch while the old master is alive: the new master's first
// lease starts only after the old master's last lease has ended, so the
// two never hold one at once.
func TestControllerSwitchWaitsForOldLease(t *testing.T) {
	c := startCluster(t, 3)
	leader := c.leader()
	brokers := c.establishGroup(leader, []int64{1})
	m0, r1 := brokers[0], brokers[1]
	sent := time.Now()
	out, err := c.heartbeat(leader.srv.Addr(), m0)
	testutil.NoError(t, err)
	testutil.True(t, out.LeaseMillis > 0, "old master leased")
	oldLeaseEnd := sent.Add(time.Duration(out.LeaseMillis) * time.Millisecond)

	_, err = c.heartbeat(leader.srv.Addr(), r1)
	testutil.NoError(t, err)
	// The switch is committed only once the old master's lease has ended
	// (it is not renewed meanwhile): the old master acknowledges nothing
	// after the new one is elected.
	switched := make(chan *remoting.Command, 1)
	go func() {
		switched <- c.invoke(leader.srv.Addr(), protocol.ControllerElect,
			&protocol.ControllerElectRequestHeader{Cluster: "zc", BrokerName: "g1", To: 1})
	}()
	testutil.Eventually(t, testDeadline, func() error {
		out, err := c.heartbeat(leader.srv.Addr(), m0)
		if err != nil {
			return err
		}
		if out.LeaseMillis != 0 {
			return errors.New("the old master's lease is still renewed")
		}
		return nil
	})
	// The candidate keeps reporting while the switch waits.
	var resp *remoting.Command
	testutil.Eventually(t, testDeadline, func() error {
		if _, err := c.heartbeat(leader.srv.Addr(), r1); err != nil {
			return err
		}
		select {
		case resp = <-switched:
			return nil
		default:
			return errors.New("the switch is waiting for the old lease")
		}
	})
	testutil.Equal(t, protocol.ResponseCode(resp.Code), protocol.Success, "switch", resp.Remark)
	testutil.True(t, time.Now().After(oldLeaseEnd), "the switch is committed after the old lease ended")
	for _, e := range groupStatus(c.status(leader.srv.Addr())).History {
		if e.Epoch == 2 {
			testutil.True(t, !time.UnixMilli(e.ElectedAtMillis).Before(oldLeaseEnd.Truncate(time.Millisecond)),
				"history: elected after the old lease", e.ElectedAtMillis, oldLeaseEnd)
		}
	}

	out, err = c.heartbeat(leader.srv.Addr(), m0)
	testutil.NoError(t, err)
	testutil.Equal(t, out.MasterID, int64(1), "old master told")
	testutil.Equal(t, out.LeaseMillis, int64(0), "old master not renewed")

	r1.role, r1.epoch = protocol.RoleMaster, 2
	testutil.Eventually(t, testDeadline, func() error {
		out, err := c.heartbeat(leader.srv.Addr(), r1)
		if err != nil {
			return err
		}
		if out.LeaseMillis == 0 {
			return errors.New("new master not leased yet")
		}
		// The answer came after the old master's lease (counted from
		// its send time, as a broker counts it) had ended.
		testutil.True(t, time.Now().After(oldLeaseEnd), "new lease only after the old one ended")
		return nil
	})
}

// A second voter on a data directory in use fails with a message, instead
// of waiting for the file lock for ever.
func TestControllerDataDirInUse(t *testing.T) {
	c := startCluster(t, 1)
	opts := testOptions(t, 1, c.voters[0].opts.DataDir)
	_, err := New(opts)
	testutil.True(t, err != nil && strings.Contains(err.Error(), "another voter"), "data dir in use", err)
}

// A replica whose log shrank since it last reported — its disk lost data,
// its log was moved aside — is no candidate, even in the in-sync set: the
// group waits (or an operator forces) rather than elect a log that may lack
// acknowledged messages. Once it holds as much again it is one.
func TestControllerSkipsAReplicaWhoseLogShrank(t *testing.T) {
	c := startCluster(t, 3)
	leader := c.leader()
	brokers := c.establishGroup(leader, []int64{1})
	r1 := brokers[1]
	_, err := c.heartbeat(leader.srv.Addr(), r1)
	testutil.NoError(t, err)
	r1.logEnd = 100 // restarted with most of its log gone
	_, err = c.heartbeat(leader.srv.Addr(), r1)
	testutil.NoError(t, err)
	// The master falls silent: its lease lapses, but the only in-sync
	// replica lost data.
	c.noElection(leader.srv.Addr(), r1, 1, "no election of a replica whose log shrank")
	r1.logEnd = 4900 // caught up again
	c.waitElected(leader.srv.Addr(), r1, 2)
}

// noElection heartbeats b to addr for three lease timeouts and fails the
// test if the group's epoch moves from epoch.
func (c *testCluster) noElection(addr string, b *testBroker, epoch int64, what string) {
	c.t.Helper()
	deadline := time.Now().Add(3 * testLeaseTimeout)
	for time.Now().Before(deadline) {
		out, err := c.heartbeat(addr, b)
		testutil.NoError(c.t, err)
		testutil.Equal(c.t, out.Epoch, epoch, what)
		time.Sleep(testLeaseTimeout / 5)
	}
}

// waitElected heartbeats b to addr until b is master at epoch.
func (c *testCluster) waitElected(addr string, b *testBroker, epoch int64) {
	c.t.Helper()
	testutil.Eventually(c.t, testDeadline, func() error {
		out, err := c.heartbeat(addr, b)
		if err != nil {
			return err
		}
		if out.Epoch != epoch || out.MasterID != b.id {
			return fmt.Errorf("epoch %d master %d, want %d and %d", out.Epoch, out.MasterID, epoch, b.id)
		}
		return nil
	})
}

// A master that comes back having lost records — its log shorter than it
// reported, or shorter than a replica that follows it at its epoch (a power
// loss took its unsynced tail) — keeps heartbeating, but gets no lease, its
// in-sync set (which leaves out the replicas that now refuse it) is not
// taken, and the group is given to the member with the most log. So is a
// master that heartbeats only as a replica (a broker refusing the role).
func TestControllerElectsAwayFromAMasterThatLostRecords(t *testing.T) {
	for _, tc := range []struct {
		name   string
		master func(b *testBroker)
	}{
		{"outrun by a replica", func(b *testBroker) { b.logEnd, b.inSync = 4500, nil }},
		{"log shrank", func(b *testBroker) { b.logEnd, b.inSync = 4950, nil }},
		{"refuses the role", func(b *testBroker) { b.role, b.inSync = protocol.RoleReplica, nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := startCluster(t, 3)
			leader := c.leader()
			brokers := c.establishGroup(leader, []int64{1, 2})
			m := brokers[0]
			tc.master(m)
			out, err := c.heartbeat(leader.srv.Addr(), m)
			testutil.NoError(t, err)
			testutil.Equal(t, out.LeaseMillis, int64(0), "no lease for a master that lost records")
			testutil.Eventually(t, testDeadline, func() error {
				for _, b := range brokers {
					if _, err := c.heartbeat(leader.srv.Addr(), b); err != nil {
						return err
					}
				}
				out, err := c.heartbeat(leader.srv.Addr(), m)
				if err != nil {
					return err
				}
				testutil.Equal(t, out.LeaseMillis, int64(0), "still no lease")
				if out.Epoch != 2 || out.MasterID != 1 {
					return fmt.Errorf("epoch %d master %d", out.Epoch, out.MasterID)
				}
				return nil
			})
		})
	}
}

// An elected master that never takes the role (it dies at once, or
// refuses it) does not leave its group stuck: the replicas that were in
// sync before the election stay candidates until the new master reports,
// and one of them is elected next.
func TestControllerElectsAgainWhenTheNewMasterNeverTakesTheRole(t *testing.T) {
	c := startCluster(t, 3)
	leader := c.leader()
	brokers := c.establishGroup(leader, []int64{1, 2})
	// The master falls silent; replica 1 (the most log) is elected, and
	// dies before it ever heartbeats as master: replica 2 is elected.
	c.electedWhile(leader.srv.Addr(), 1, 2, -1, brokers[1], brokers[2])
	c.electedWhile(leader.srv.Addr(), 2, 3, -1, brokers[2])
}

// The chaos campaign's seed 65: the master died, its only in-sync replica
// was elected, and that replica came back damaged (its log moved aside, so
// it refuses the role). The old master is back with the whole log: it is
// elected, where the group used to wait for ever on a set of one refusing
// broker. A copy that was never in sync is still no candidate.
func TestControllerElectsTheOldMasterWhenTheOnlyInSyncReplicaCannotLead(t *testing.T) {
	c := startCluster(t, 3)
	leader := c.leader()
	brokers := c.establishGroup(leader, []int64{1})
	m, r1, r2 := brokers[0], brokers[1], brokers[2]
	// The master falls silent: r1, the only in-sync replica, is elected.
	testutil.Eventually(t, testDeadline, func() error {
		out, err := c.heartbeat(leader.srv.Addr(), r1)
		if err != nil {
			return err
		}
		if out.Epoch != 2 || out.MasterID != 1 {
			return fmt.Errorf("epoch %d master %d", out.Epoch, out.MasterID)
		}
		return nil
	})
	// r1 restarts damaged and refuses; the old master comes back as a
	// replica holding everything; r2 (never in sync) has more log still.
	r1.logEnd, r1.noLead = 0, "it is copying its log again after damage"
	m.role, m.inSync = protocol.RoleReplica, nil
	r2.logEnd = 6000
	c.electedWhile(leader.srv.Addr(), 0, 3, 2, r1, r2, m) // never 2: it was never in sync
}

// The seventh 60-minute campaign's stuck group: the in-sync set shrank to
// its master alone under --min-insync-replicas 2 (a replica stopped), so the
// master acknowledged nothing since; then the master's disk was damaged. The
// stopped replica holds everything acknowledged: the controller keeps it
// eligible and elects it. A replica dropped while the set was still large
// enough to acknowledge is not, however much log it has.
func TestControllerElectsAnEligibleMemberWhenTheSetIsTooSmall(t *testing.T) {
	c := startCluster(t, 3)
	leader := c.leader()
	brokers := c.establishGroup(leader, []int64{1, 2})
	m, r1, r2 := brokers[0], brokers[1], brokers[2]
	m.minInSync = 2
	status := func() *protocol.ControllerGroup { return groupStatus(c.status(leader.srv.Addr())) }
	// r2 falls behind: {0, 1}, still two copies.
	m.inSync = []int64{1}
	_, err := c.heartbeat(leader.srv.Addr(), m)
	testutil.NoError(t, err)
	testutil.True(t, slices.Equal(status().InSync, []int64{0, 1}) && len(status().Eligible) == 0, "set {0,1}, none eligible", status())
	// r1 stops: the master alone, below min-insync-replicas.
	m.inSync = nil
	_, err = c.heartbeat(leader.srv.Addr(), m)
	testutil.NoError(t, err)
	testutil.True(t, slices.Equal(status().InSync, []int64{0}) && slices.Equal(status().Eligible, []int64{1}), "set {0}, 1 eligible", status())
	// The master falls silent (its disk damaged); r1 is back, r2 has more
	// log but missed acknowledged messages.
	r2.logEnd = 6000
	c.electedWhile(leader.srv.Addr(), 1, 2, 2, r2, r1) // never 2: it left while the set could acknowledge
}

// A member that says it will not lead (NoLead: it copied its log again
// after damage, or lost records) is not elected, however much log it has.
func TestControllerDoesNotElectAMemberThatWillNotLead(t *testing.T) {
	c := startCluster(t, 3)
	leader := c.leader()
	brokers := c.establishGroup(leader, []int64{1, 2})
	brokers[1].noLead = "it copied its log again after damage"
	c.electedWhile(leader.srv.Addr(), 2, 2, 1, brokers[1:]...) // never 1: it said it will not lead
}

// A master that lost records keeps the role when no other member can take
// over (none in sync): a group with a master that lost an unacknowledged
// tail is better than a group with none. The chaos campaign saw the group
// refuse writes for good: no lease for the master, no one to elect. It
// keeps it at a new epoch, so what it writes next never shares an epoch
// with the records it lost (the campaign saw two copies diverge in one).
func TestControllerKeepsAMasterThatLostRecordsWhenNoneCanTakeOver(t *testing.T) {
	c := startCluster(t, 3)
	leader := c.leader()
	brokers := c.establishGroup(leader, nil) // no replica in sync
	m := brokers[0]
	m.logEnd = 4500 // lost power: shorter than it reported
	testutil.Eventually(t, testDeadline, func() error {
		out, err := c.heartbeat(leader.srv.Addr(), m)
		if err != nil {
			return err
		}
		m.epoch = out.Epoch // the broker takes the epoch it is given
		if out.LeaseMillis == 0 || out.MasterID != 0 || out.Epoch != 2 {
			return fmt.Errorf("master %d epoch %d lease %d ms", out.MasterID, out.Epoch, out.LeaseMillis)
		}
		return nil
	})
}

// An in-sync replica whose disk was replaced (it reports an empty log) is
// no candidate, even for a leader that never heard it report more: the
// group's floor, the least log end of the in-sync members at the last
// election, is in the replicated state. Once it holds that much again it is.
func TestControllerSkipsAMemberBelowTheGroupsFloorAfterALeaderChange(t *testing.T) {
	c := startCluster(t, 3)
	old := c.leader()
	brokers := c.establishGroup(old, []int64{1, 2})
	r1, r2 := brokers[1], brokers[2]
	// The master falls silent: r1 (the longest in-sync log) is elected,
	// and the floor is r2's 4000.
	testutil.Eventually(t, testDeadline, func() error {
		out, err := c.heartbeat(old.srv.Addr(), r1)
		if err != nil {
			return err
		}
		if _, err := c.heartbeat(old.srv.Addr(), r2); err != nil {
			return err
		}
		if out.Epoch != 2 || out.MasterID != 1 {
			return fmt.Errorf("epoch %d master %d", out.Epoch, out.MasterID)
		}
		return nil
	})
	r1.role, r1.epoch, r1.inSync = protocol.RoleMaster, 2, []int64{2}
	r2.epoch = 2
	out, err := c.heartbeat(old.srv.Addr(), r1)
	testutil.NoError(t, err)
	testutil.True(t, out.LeaseMillis > 0, "the new master is leased", out.LeaseMillis)
	testutil.Equal(t, groupStatus(c.status(old.srv.Addr())).Floor, int64(4000), "the group's floor")

	// The leader changes, and r2 comes back with an empty disk; then the
	// master falls silent.
	old.stop()
	var rest []*testVoter
	for _, v := range c.voters {
		if v != old {
			rest = append(rest, v)
		}
	}
	leader := c.leader(rest...)
	r2.logEnd, r2.epoch = 0, 0
	c.noElection(leader.srv.Addr(), r2, 2, "no election of a member below the floor")
	r2.logEnd = 4000 // copied the log again
	c.waitElected(leader.srv.Addr(), r2, 3)
}
