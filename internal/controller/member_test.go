package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/zonemq/zonemq/internal/member"
	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/testutil"
)

func testSecret(t *testing.T) *member.Secret {
	t.Helper()
	s, err := member.ParseSecret(member.NewSecretText())
	testutil.NoError(t, err)
	return s
}

// forgeElection plays issue 22's attack: a stranger with hashicorp/raft's
// own transport sends every voter one AppendEntries at the leader's term +
// 1, right after the last entry, carrying a report of a fake member 9 and
// its election, with a commit index that covers them. It returns how many
// voters answered.
func forgeElection(t *testing.T, c *testCluster) int {
	t.Helper()
	lead := c.leader()
	term, err := strconv.ParseUint(lead.srv.raft.Stats()["term"], 10, 64)
	testutil.NoError(t, err)
	last := lead.srv.raft.LastIndex()
	lastTerm, err := strconv.ParseUint(lead.srv.raft.Stats()["last_log_term"], 10, 64)
	testutil.NoError(t, err)
	key := groupKey{Cluster: "zc", Name: "g1"}
	report, _ := json.Marshal(command{Type: cmdReport, Key: key, ID: 9, Addr: "127.0.9.9:10911", IDC: "idcEVIL", LogEnd: 1 << 40, Epoch: 1})
	elect, _ := json.Marshal(command{Type: cmdElect, Key: key, ID: 9, FromEpoch: 1, At: time.Now().UnixMilli()})
	trans, err := raft.NewTCPTransport("127.0.9.9:0", nil, 1, 2*time.Second, io.Discard)
	testutil.NoError(t, err)
	defer trans.Close()
	answered := 0
	for _, v := range c.voters {
		args := &raft.AppendEntriesRequest{
			RPCHeader:    raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("stranger"), Addr: []byte(trans.LocalAddr())},
			Term:         term + 1,
			PrevLogEntry: last, PrevLogTerm: lastTerm,
			Entries: []*raft.Log{
				{Index: last + 1, Term: term + 1, Type: raft.LogCommand, Data: report},
				{Index: last + 2, Term: term + 1, Type: raft.LogCommand, Data: elect},
			},
			LeaderCommitIndex: last + 2,
		}
		var resp raft.AppendEntriesResponse
		err := trans.AppendEntries(raft.ServerID(v.opts.NodeID), raft.ServerAddress(v.srv.RaftAddr()), args, &resp)
		t.Logf("forged AppendEntries to %s: err=%v success=%v term=%d", v.opts.NodeID, err, resp.Success, resp.Term)
		if err == nil {
			answered++
		}
	}
	return answered
}

// TestControllerRaftRefusesAStranger: with a cluster secret the Raft port
// speaks mutual TLS, so the forged AppendEntries reaches no voter and the
// group keeps its master. (Issue 22: on plain TCP all three voters applied
// it and the stranger's member became master.)
func TestControllerRaftRefusesAStranger(t *testing.T) {
	secret := testSecret(t)
	c := startClusterWith(t, 3, func(o *Options) { o.ClusterSecret = secret })
	lead := c.leader()
	cl := NewClientWithOptions([]string{lead.srv.Addr()}, ClientOptions{ClusterSecret: secret})
	t.Cleanup(func() { cl.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	defer cancel()
	ans, err := cl.Heartbeat(ctx, (&testBroker{id: 0, role: protocol.RoleMaster, epoch: 1, logEnd: 100}).header())
	testutil.NoError(t, err, "a member's heartbeat")
	testutil.Equal(t, ans.MasterID, int64(0))

	testutil.Equal(t, forgeElection(t, c), 0, "voters that answered the stranger")
	// Whatever the voters saw, the group's master is still broker 0.
	for _, v := range c.voters {
		testutil.Eventually(t, testDeadline, func() error {
			g := groupStatus(c.status(v.srv.Addr()))
			if g == nil || g.MasterID != 0 {
				return fmt.Errorf("voter %s: group %+v", v.opts.NodeID, g)
			}
			return nil
		})
	}
	testutil.True(t, c.leader() != nil, "the voters still have a leader")
}

// TestControllerRaftPlainTCPIsOpen documents what the secret closes: with
// no secret (loopback only, or --insecure) the same forgery is answered by
// every voter and crowns the fake member. If this ever fails, the forgery
// above no longer proves anything and must be rewritten.
func TestControllerRaftPlainTCPIsOpen(t *testing.T) {
	c := startCluster(t, 3)
	c.establishGroup(c.leader(), []int64{1, 2})
	testutil.Equal(t, forgeElection(t, c), 3, "voters that answered the stranger")
	testutil.Eventually(t, testDeadline, func() error {
		g := groupStatus(c.status(c.voters[0].srv.Addr()))
		if g == nil || g.MasterID != 9 {
			return fmt.Errorf("group %+v: the forged election did not apply", g)
		}
		return nil
	})
}

// TestControllerVoterWithAnotherSecretCannotJoin: a voter holding another
// secret neither reaches the others nor is reached; the two that share the
// secret still elect a leader and commit.
func TestControllerVoterWithAnotherSecretCannotJoin(t *testing.T) {
	good, bad := testSecret(t), testSecret(t)
	i := 0
	c := startClusterWith(t, 3, func(o *Options) {
		o.ClusterSecret = good
		if i == 2 {
			o.ClusterSecret = bad
		}
		i++
	})
	lead := c.leader(c.voters[0], c.voters[1])
	cl := NewClientWithOptions([]string{lead.srv.Addr()}, ClientOptions{ClusterSecret: good})
	t.Cleanup(func() { cl.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	defer cancel()
	_, err := cl.Heartbeat(ctx, (&testBroker{id: 0, role: protocol.RoleMaster, epoch: 1}).header())
	testutil.NoError(t, err, "the two voters that share the secret commit")
	testutil.True(t, !c.voters[2].srv.IsLeader(), "the odd voter leads nobody")
	testutil.Equal(t, c.voters[2].srv.raft.LastIndex() < lead.srv.raft.LastIndex(), true, "the odd voter got no entries")
}

// TestControllerMemberCodesNeedTheSecret: with a cluster secret, a broker
// heartbeat and an election without the member MAC, or with another
// secret's, are refused NO_PERMISSION and change nothing; a status read
// stays open.
func TestControllerMemberCodesNeedTheSecret(t *testing.T) {
	secret := testSecret(t)
	c := startClusterWith(t, 1, func(o *Options) { o.ClusterSecret = secret })
	addr := c.leader().srv.Addr()
	report := (&testBroker{id: 0, role: protocol.RoleMaster, epoch: 1}).header()
	elect := &protocol.ControllerElectRequestHeader{Cluster: "zc", BrokerName: "g1", To: 0, Force: true}

	resp := c.invoke(addr, protocol.ControllerBrokerHeartbeat, report)
	testutil.Equal(t, protocol.ResponseCode(resp.Code), protocol.NoPermission, resp.Remark)
	testutil.True(t, strings.Contains(resp.Remark, "cluster secret"), resp.Remark)
	resp = c.invoke(addr, protocol.ControllerElect, elect)
	testutil.Equal(t, protocol.ResponseCode(resp.Code), protocol.NoPermission, resp.Remark)

	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	defer cancel()
	other := NewClientWithOptions([]string{addr}, ClientOptions{ClusterSecret: testSecret(t)})
	t.Cleanup(func() { other.Close() })
	_, err := other.Heartbeat(ctx, report)
	testutil.True(t, err != nil && strings.Contains(err.Error(), "NO_PERMISSION"), "another secret's MAC", err)
	testutil.Equal(t, len(c.status(addr).Groups), 0, "nothing was created")

	mc := NewClientWithOptions([]string{addr}, ClientOptions{ClusterSecret: secret})
	t.Cleanup(func() { mc.Close() })
	_, err = mc.Heartbeat(ctx, report)
	testutil.NoError(t, err, "a member's heartbeat")
	testutil.Equal(t, len(c.status(addr).Groups), 1)
}
