package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/testutil"
)

// Test timings: short enough for a quick suite, long enough that a busy
// 2-core machine under -race does not flap Raft leadership.
const (
	testLeaseTimeout = 600 * time.Millisecond
	testDeadline     = 20 * time.Second
)

// testVoter is one controller voter of a test cluster.
type testVoter struct {
	srv  *Server
	opts Options
	done chan error
}

// testCluster is n voters, voter i in IDC i+1 on 127.0.(i+1).1.
type testCluster struct {
	t      *testing.T
	voters []*testVoter
	client *remoting.Client
}

func testOptions(t *testing.T, i int, dataDir string) Options {
	opts := NewOptions()
	ip := fmt.Sprintf("127.0.%d.1", i+1)
	opts.Listen = ip + ":0"
	opts.RaftListen = ip + ":0"
	opts.NodeID = fmt.Sprintf("c%d", i+1)
	opts.DataDir = dataDir
	opts.MasterLeaseTimeout = testLeaseTimeout
	opts.CheckInterval = 50 * time.Millisecond
	opts.HeartbeatTimeout = 500 * time.Millisecond
	opts.ElectionTimeout = 500 * time.Millisecond
	opts.LeaderLeaseTimeout = 250 * time.Millisecond
	if os.Getenv("ZONEMQ_TEST_LOG") != "" {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return opts
}

// startCluster starts n voters on port 0 and bootstraps them together.
func startCluster(t *testing.T, n int) *testCluster {
	t.Helper()
	return startClusterWith(t, n, nil)
}

// startClusterWith is startCluster with each voter's options changed by
// mutate first.
func startClusterWith(t *testing.T, n int, mutate func(*Options)) *testCluster {
	t.Helper()
	c := &testCluster{t: t, client: remoting.NewClient(remoting.ClientOptions{})}
	t.Cleanup(func() { c.client.Close() })
	var peers []Peer
	for i := range n {
		opts := testOptions(t, i, t.TempDir())
		if mutate != nil {
			mutate(&opts)
		}
		v := c.startVoter(opts)
		peers = append(peers, Peer{ID: v.opts.NodeID, RaftAddr: v.srv.RaftAddr()})
	}
	for _, v := range c.voters {
		testutil.NoError(t, v.srv.Bootstrap(peers), "bootstrap", v.opts.NodeID)
	}
	return c
}

// startVoter creates and runs a voter, stopped at cleanup.
func (c *testCluster) startVoter(opts Options) *testVoter {
	c.t.Helper()
	srv, err := New(opts)
	testutil.NoError(c.t, err, "New", opts.NodeID)
	// Restarts reuse the bound Raft address (the Raft configuration
	// names it); the request address may change.
	opts.RaftListen = srv.RaftAddr()
	v := &testVoter{srv: srv, opts: opts, done: make(chan error, 1)}
	go func() { v.done <- srv.Run(context.Background()) }()
	c.t.Cleanup(v.stop)
	c.voters = append(c.voters, v)
	return v
}

// stop shuts the voter down and waits for Run to return.
func (v *testVoter) stop() {
	v.srv.Shutdown()
	<-v.done
	v.done <- nil // later stops return at once
}

// leader waits for exactly one leading voter among the running ones.
func (c *testCluster) leader(running ...*testVoter) *testVoter {
	c.t.Helper()
	if running == nil {
		running = c.voters
	}
	var found *testVoter
	testutil.Eventually(c.t, testDeadline, func() error {
		found = nil
		for _, v := range running {
			if v.srv.IsLeader() {
				if found != nil {
					return errors.New("two voters lead")
				}
				found = v
			}
		}
		if found == nil {
			return errors.New("no leader yet")
		}
		return nil
	})
	return found
}

func (c *testCluster) invoke(addr string, code protocol.RequestCode, h protocol.Header) *remoting.Command {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var ext map[string]string
	if h != nil {
		ext = h.Ext()
	}
	resp, err := c.client.Invoke(ctx, addr, remoting.NewRequest(int32(code), ext, nil))
	testutil.NoError(c.t, err, code)
	return resp
}

// testBroker is a broker's identity and what it reports.
type testBroker struct {
	id     int64
	role   string
	epoch  int64
	logEnd int64
	inSync []int64
	noLead string
	// minInSync is a master's --min-insync-replicas (0: not said).
	minInSync int64
}

func (b *testBroker) header() *protocol.ControllerHeartbeatRequestHeader {
	return &protocol.ControllerHeartbeatRequestHeader{
		Cluster: "zc", BrokerName: "g1", BrokerID: b.id, Addr: fmt.Sprintf("127.0.%d.1:109%02d", b.id+1, b.id),
		IDC: fmt.Sprintf("idc%d", b.id+1), Epoch: b.epoch, LogEnd: b.logEnd, Role: b.role,
		InSyncIDs: protocol.FormatIDs(b.inSync), NoLead: b.noLead, MinInSync: b.minInSync,
	}
}

// heartbeat sends b's report to addr and decodes a successful answer.
func (c *testCluster) heartbeat(addr string, b *testBroker) (protocol.ControllerHeartbeatResponseHeader, error) {
	c.t.Helper()
	resp := c.invoke(addr, protocol.ControllerBrokerHeartbeat, b.header())
	var out protocol.ControllerHeartbeatResponseHeader
	if protocol.ResponseCode(resp.Code) != protocol.Success {
		return out, fmt.Errorf("heartbeat answered %v: %s", protocol.ResponseCode(resp.Code), resp.Remark)
	}
	testutil.NoError(c.t, out.SetExt(resp.ExtFields))
	return out, nil
}

// status asks addr for its view.
func (c *testCluster) status(addr string) protocol.ControllerStatus {
	c.t.Helper()
	resp := c.invoke(addr, protocol.ControllerGetStatus, nil)
	testutil.Equal(c.t, protocol.ResponseCode(resp.Code), protocol.Success, "status")
	var st protocol.ControllerStatus
	testutil.NoError(c.t, json.Unmarshal(resp.Body, &st))
	return st
}

// groupStatus is g1's part of st, or nil.
func groupStatus(st protocol.ControllerStatus) *protocol.ControllerGroup {
	for i := range st.Groups {
		if st.Groups[i].BrokerName == "g1" {
			return &st.Groups[i]
		}
	}
	return nil
}

// establishGroup makes broker 0 master at epoch 1 with replicas 1 and 2,
// the master reporting inSync as its in-sync replicas; it returns the
// brokers.
func (c *testCluster) establishGroup(leader *testVoter, inSync []int64) []*testBroker {
	c.t.Helper()
	brokers := []*testBroker{
		{id: 0, role: protocol.RoleMaster, epoch: 1, logEnd: 5000, inSync: inSync},
		{id: 1, role: protocol.RoleReplica, epoch: 1, logEnd: 4900},
		{id: 2, role: protocol.RoleReplica, epoch: 1, logEnd: 4000},
	}
	out, err := c.heartbeat(leader.srv.Addr(), brokers[0])
	testutil.NoError(c.t, err)
	testutil.Equal(c.t, out.MasterID, int64(0), "adopted master")
	testutil.Equal(c.t, out.Epoch, int64(1), "adopted epoch")
	testutil.True(c.t, out.LeaseMillis > 0, "the adopted master is leased")
	for _, b := range brokers[1:] {
		out, err := c.heartbeat(leader.srv.Addr(), b)
		testutil.NoError(c.t, err)
		testutil.Equal(c.t, out.MasterID, int64(0), "replica told the master")
		testutil.Equal(c.t, out.LeaseMillis, int64(0), "a replica gets no lease")
	}
	return brokers
}

// electedWhile heartbeats live, in turn, until the group's master is want
// at epoch; it fails at once if never (-1: no one) is elected meanwhile.
func (c *testCluster) electedWhile(addr string, want, epoch, never int64, live ...*testBroker) {
	c.t.Helper()
	testutil.Eventually(c.t, testDeadline, func() error {
		var out protocol.ControllerHeartbeatResponseHeader
		for _, b := range live {
			var err error
			if out, err = c.heartbeat(addr, b); err != nil {
				return err
			}
		}
		if never >= 0 && out.MasterID == never {
			c.t.Fatalf("broker %d was elected at epoch %d", never, out.Epoch)
		}
		if out.Epoch != epoch || out.MasterID != want {
			return fmt.Errorf("epoch %d master %d", out.Epoch, out.MasterID)
		}
		return nil
	})
}
