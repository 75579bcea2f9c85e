package broker

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/namesrv"
	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/testutil"
)

// runBroker starts a broker and returns a stop function (idempotent; also
// run at the end of the test), so a test can stop and restart brokers on
// the same data directory.
func runBroker(t *testing.T, opts Options) (*Server, func()) {
	t.Helper()
	s, err := New(opts)
	testutil.NoError(t, err, "broker.New")
	done := make(chan error, 1)
	go func() { done <- s.Run(context.Background()) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			s.Shutdown()
			select {
			case err := <-done:
				testutil.NoError(t, err, "broker Run")
			case <-time.After(15 * time.Second):
				t.Errorf("broker did not stop within 15 s")
			}
		})
	}
	t.Cleanup(stop)
	return s, stop
}

// groupOptions returns options for member id of broker group name in idc.
func groupOptions(t *testing.T, idc int, name string, id int64, mode string, ns string) Options {
	opts := testBrokerOptions(t, fmt.Sprintf("127.0.%d.1", idc), fmt.Sprintf("idc%d", idc), name, ns)
	opts.BrokerID = id
	opts.Replication = mode
	opts.HeartbeatInterval = 100 * time.Millisecond
	opts.SegmentSize = 64 << 10 // small segments: replication crosses rolls
	return opts
}

// waitCaughtUp waits until the replica's log ends where the master's does.
func waitCaughtUp(t *testing.T, master, replica *Server) {
	t.Helper()
	testutil.Eventually(t, 15*time.Second, func() error {
		m, r := master.store.CommitLogMaxOffset(), replica.store.CommitLogMaxOffset()
		if m != r {
			return fmt.Errorf("replica at %d, master at %d", r, m)
		}
		return nil
	})
}

// waitInSync waits until the master counts n replicas in sync.
func waitInSync(t *testing.T, master *Server, n int) {
	t.Helper()
	testutil.Eventually(t, 15*time.Second, func() error {
		got := 0
		for _, st := range master.repl.replicaStates() {
			if st.InSync {
				got++
			}
		}
		if got != n {
			return fmt.Errorf("%d replicas in sync, want %d", got, n)
		}
		return nil
	})
}

// sendKeys sends n messages with keys prefix-0… to topic on addr and
// returns the keys acknowledged.
func sendKeys(t *testing.T, c *remoting.Client, addr, topic, prefix string, n int) []string {
	t.Helper()
	var acked []string
	for i := range n {
		key := prefix + strconv.Itoa(i)
		resp := sendRaw(t, c, addr, topic, int32(i%4), map[string]string{"KEYS": key}, []byte("body-"+key))
		if resp.Code == int32(protocol.Success) {
			acked = append(acked, key)
		}
	}
	return acked
}

// waitKeys waits until n distinct keys are readable from topic on addr.
func waitKeys(t *testing.T, c *remoting.Client, addr, topic string, queues, n int) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, func() error {
		if got := len(readKeys(t, c, addr, topic, queues)); got != n {
			return fmt.Errorf("%d keys readable from %s, want %d", got, addr, n)
		}
		return nil
	})
}

// readKeys pulls every queue of topic from the broker at addr and returns
// the keys found.
func readKeys(t *testing.T, c *remoting.Client, addr, topic string, queues int) map[string]int {
	t.Helper()
	keys := map[string]int{}
	for q := range int32(queues) {
		for off := int64(0); ; {
			resp := pullRaw(t, c, addr, "reader", topic, q, off, "*", 32)
			if resp.Code != int32(protocol.Success) {
				break
			}
			for _, m := range decodeAll(t, resp.Body) {
				k, _ := protocol.Property(m.Properties, "KEYS")
				keys[k]++
				off = m.QueueOffset + 1
			}
		}
	}
	return keys
}

// TestReplicationSyncCopiesEveryAck: with sync replication every
// acknowledged send is already on the replica when the producer hears of
// it; the replica serves reads, refuses writes, copies topics and offsets.
func TestReplicationSyncCopiesEveryAck(t *testing.T) {
	ns := startNamesrv(t, "127.0.1.1:0", "idc1", nil)
	master, _ := runBroker(t, groupOptions(t, 1, "broker-g", 0, ReplicationSync, ns.Addr()))
	replica, _ := runBroker(t, groupOptions(t, 2, "broker-g", 1, ReplicationSync, ns.Addr()))
	c := newRawClient(t)
	createTopic(t, c, master.Addr(), "RepTopic", 4)
	waitInSync(t, master, 1)

	for i := range 300 {
		key := "k" + strconv.Itoa(i)
		resp := sendRaw(t, c, master.Addr(), "RepTopic", int32(i%4), map[string]string{"KEYS": key}, []byte(fmt.Sprintf("%0200d", i)))
		expectCode(t, resp, protocol.Success, "send "+key)
		// The acknowledgement means the replica holds the record.
		off, _ := strconv.ParseInt(resp.Ext("queueOffset"), 10, 64)
		if got := replica.store.MaxOffset("RepTopic", int32(i%4)); got <= off {
			t.Fatalf("send %s acknowledged at queue offset %d, the replica's queue ends at %d", key, off, got)
		}
	}
	waitCaughtUp(t, master, replica)
	waitKeys(t, c, replica.Addr(), "RepTopic", 4, 300)

	// The log is the same byte for byte, offset message ids included.
	segSize := master.store.SegmentSize()
	for from := int64(0); ; {
		a, err := master.store.ReadLog(from, 1<<20)
		testutil.NoError(t, err)
		if a == nil {
			break
		}
		b, err := replica.store.ReadLog(from, 1<<20)
		testutil.NoError(t, err)
		if string(a) != string(b) {
			t.Fatalf("logs differ from offset %d", from)
		}
		from = chunkEnd(from, a, segSize)
	}

	// Writes to the replica are refused, before a topic could be created.
	expectCode(t, sendRaw(t, c, replica.Addr(), "RepTopic", 0, nil, []byte("x")), protocol.ServiceNotAvailable, "send to the replica")
	expectCode(t, sendRaw(t, c, replica.Addr(), "BrandNewTopic", 0, nil, []byte("x")), protocol.ServiceNotAvailable, "auto-create on the replica")

	// Topics, groups and consumer offsets reach the replica.
	commit := protocol.UpdateConsumerOffsetRequestHeader{ConsumerGroup: "cg", Topic: "RepTopic", QueueID: 2, CommitOffset: 42}
	expectCode(t, invoke(t, c, master.Addr(), protocol.UpdateConsumerOffset, commit.Ext(), nil), protocol.Success, "commit on the master")
	testutil.Eventually(t, 10*time.Second, func() error {
		if _, ok := replica.topics.get("RepTopic"); !ok {
			return fmt.Errorf("topic not on the replica yet")
		}
		if off, ok := replica.store.QueryOffset("cg", "RepTopic", 2); !ok || off != 42 {
			return fmt.Errorf("offset on the replica %d %v", off, ok)
		}
		return nil
	})
}

// TestReplicationMinInsyncRefusesOneCopy: with min-insync-replicas 2 and
// the only replica gone, sends are refused and nothing is stored; the
// replica comes back, catches up and sends are acknowledged again.
func TestReplicationMinInsyncRefusesOneCopy(t *testing.T) {
	ns := startNamesrv(t, "127.0.1.1:0", "idc1", nil)
	mopts := groupOptions(t, 1, "broker-m", 0, ReplicationSync, ns.Addr())
	mopts.MinInsyncReplicas = 2
	master, _ := runBroker(t, mopts)
	ropts := groupOptions(t, 2, "broker-m", 1, ReplicationSync, ns.Addr())
	replica, stopReplica := runBroker(t, ropts)
	c := newRawClient(t)
	createTopic(t, c, master.Addr(), "MinTopic", 4)
	waitInSync(t, master, 1)
	acked := sendKeys(t, c, master.Addr(), "MinTopic", "a", 50)
	testutil.Equal(t, len(acked), 50, "acknowledged with the replica in sync")

	stopReplica()
	waitInSync(t, master, 0)
	end := master.store.CommitLogMaxOffset()
	resp := sendRaw(t, c, master.Addr(), "MinTopic", 0, nil, []byte("one copy only"))
	expectCode(t, resp, protocol.SlaveNotAvailable, "send with too few in-sync copies")
	testutil.Equal(t, master.store.CommitLogMaxOffset(), end, "nothing stored for a refused send")

	// The replica returns, catches up from where it stopped, rejoins.
	ropts.Listen = replica.Addr()
	replica, _ = runBroker(t, ropts)
	waitInSync(t, master, 1)
	acked = sendKeys(t, c, master.Addr(), "MinTopic", "b", 50)
	testutil.Equal(t, len(acked), 50, "acknowledged after the replica rejoined")
	waitCaughtUp(t, master, replica)
	waitKeys(t, c, replica.Addr(), "MinTopic", 4, 100)
}

// TestReplicationReplicaServesWhileMasterDown: consumers read and commit on
// the replica while the master is down; the master, back, takes the
// offsets over and they never move back.
func TestReplicationReplicaServesWhileMasterDown(t *testing.T) {
	ns := startNamesrv(t, "127.0.1.1:0", "idc1", nil)
	mopts := groupOptions(t, 1, "broker-r", 0, ReplicationAsync, ns.Addr())
	master, stopMaster := runBroker(t, mopts)
	replica, _ := runBroker(t, groupOptions(t, 2, "broker-r", 1, ReplicationAsync, ns.Addr()))
	c := newRawClient(t)
	createTopic(t, c, master.Addr(), "DownTopic", 4)
	acked := sendKeys(t, c, master.Addr(), "DownTopic", "d", 80)
	testutil.Equal(t, len(acked), 80, "acknowledged")
	commit := protocol.UpdateConsumerOffsetRequestHeader{ConsumerGroup: "cg", Topic: "DownTopic", QueueID: 1, CommitOffset: 5}
	expectCode(t, invoke(t, c, master.Addr(), protocol.UpdateConsumerOffset, commit.Ext(), nil), protocol.Success, "commit on the master")
	waitCaughtUp(t, master, replica)
	testutil.Eventually(t, 10*time.Second, func() error {
		if off, _ := replica.store.QueryOffset("cg", "DownTopic", 1); off != 5 {
			return fmt.Errorf("replica offset %d", off)
		}
		return nil
	})

	stopMaster()
	// Everything acknowledged is readable from the replica.
	keys := readKeys(t, c, replica.Addr(), "DownTopic", 4)
	testutil.Equal(t, len(keys), 80, "keys on the replica with the master down")
	commit.CommitOffset = 15
	expectCode(t, invoke(t, c, replica.Addr(), protocol.UpdateConsumerOffset, commit.Ext(), nil), protocol.Success, "commit on the replica")

	mopts.Listen = master.Addr()
	master, _ = runBroker(t, mopts)
	testutil.Eventually(t, 15*time.Second, func() error {
		if off, _ := master.store.QueryOffset("cg", "DownTopic", 1); off != 15 {
			return fmt.Errorf("master offset %d, want the replica's 15", off)
		}
		if off, _ := replica.store.QueryOffset("cg", "DownTopic", 1); off != 15 {
			return fmt.Errorf("replica offset moved to %d", off)
		}
		return nil
	})
}

// TestReplicationSwitchover: a planned switchover under load moves the
// group's master to the replica with no acknowledged message lost; the old
// master follows the new one and the name server lists the new master as
// id 0.
func TestReplicationSwitchover(t *testing.T) {
	ns := startNamesrv(t, "127.0.1.1:0", "idc1", nil)
	oldMaster, _ := runBroker(t, groupOptions(t, 1, "broker-s", 0, ReplicationSync, ns.Addr()))
	newMaster, _ := runBroker(t, groupOptions(t, 2, "broker-s", 1, ReplicationSync, ns.Addr()))
	c := newRawClient(t)
	createTopic(t, c, oldMaster.Addr(), "SwTopic", 4)
	waitInSync(t, oldMaster, 1)

	// Load on the old master during the switch; sends that hit the pause
	// are refused (the SDK retries them elsewhere), none is lost.
	var mu sync.Mutex
	var acked []string
	stop := make(chan struct{})
	loaded := make(chan struct{})
	go func() {
		defer close(loaded)
		lc := remoting.NewClient(remoting.ClientOptions{})
		defer lc.Close()
		for i := 0; i < 5000; i++ {
			select {
			case <-stop:
				return
			default:
			}
			key := "s" + strconv.Itoa(i)
			h := protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: "SwTopic", QueueID: int32(i % 4),
				BornTimestamp: time.Now().UnixMilli(), Properties: protocol.EncodeProperties(map[string]string{"KEYS": key})}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			resp, err := lc.Invoke(ctx, oldMaster.Addr(), remoting.NewRequest(int32(protocol.SendMessage), h.Ext(), []byte(key)))
			cancel()
			if err == nil && resp.Code == int32(protocol.Success) {
				mu.Lock()
				acked = append(acked, key)
				mu.Unlock()
			}
		}
	}()
	testutil.Eventually(t, 10*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(acked) < 100 {
			return fmt.Errorf("%d sends so far", len(acked))
		}
		return nil
	})
	sw := protocol.ReplicaSwitchRequestHeader{BrokerName: "broker-s", To: 1}
	resp := invoke(t, c, oldMaster.Addr(), protocol.ReplicaSwitch, sw.Ext(), nil)
	expectCode(t, resp, protocol.Success, "switchover")
	close(stop)
	<-loaded

	testutil.True(t, newMaster.isMaster(), "the replica is master")
	testutil.True(t, !oldMaster.isMaster(), "the old master is a replica")
	testutil.Equal(t, newMaster.repl.regID.Load(), int64(0), "new master's registered id")
	testutil.Equal(t, oldMaster.repl.regID.Load(), int64(1), "old master's registered id")
	testutil.Eventually(t, 10*time.Second, func() error {
		ci, err := clusterInfo(t, c, ns.Addr())
		if err != nil {
			return err
		}
		bd := ci.BrokerAddrTable["broker-s"]
		if bd.BrokerAddrs[0] != newMaster.Addr() || bd.BrokerAddrs[1] != oldMaster.Addr() {
			return fmt.Errorf("name server lists %v", bd.BrokerAddrs)
		}
		return nil
	})

	// Writes go to the new master and reach the old one.
	more := sendKeys(t, c, newMaster.Addr(), "SwTopic", "n", 50)
	testutil.Equal(t, len(more), 50, "sends to the new master")
	expectCode(t, sendRaw(t, c, oldMaster.Addr(), "SwTopic", 0, nil, []byte("x")), protocol.ServiceNotAvailable, "send to the old master")
	waitCaughtUp(t, newMaster, oldMaster)
	keys := readKeys(t, c, newMaster.Addr(), "SwTopic", 4)
	mu.Lock()
	defer mu.Unlock()
	for _, k := range append(acked, more...) {
		if keys[k] == 0 {
			t.Fatalf("acknowledged key %s missing on the new master", k)
		}
	}
	t.Logf("%d sends acknowledged during the switchover load", len(acked))
}

// divergedGroup is a group whose old master holds a tail nobody else has:
// written after its replica stopped following, and the replica promoted
// by force since (the old master is stopped).
type divergedGroup struct {
	ns                  *namesrv.Server
	mopts               Options
	master, replica     *Server
	c                   *remoting.Client
	common, tail, after []string
}

func divergeGroup(t *testing.T, name, topic string) divergedGroup {
	t.Helper()
	g := divergedGroup{ns: startNamesrv(t, "127.0.1.1:0", "idc1", nil)}
	g.mopts = groupOptions(t, 1, name, 0, ReplicationAsync, g.ns.Addr())
	master, stopMaster := runBroker(t, g.mopts)
	ropts := groupOptions(t, 2, name, 1, ReplicationAsync, g.ns.Addr())
	replica, stopReplica := runBroker(t, ropts)
	g.c = newRawClient(t)
	createTopic(t, g.c, master.Addr(), topic, 4)
	g.common = sendKeys(t, g.c, master.Addr(), topic, "c", 40)
	waitCaughtUp(t, master, replica)
	stopReplica()
	// Async: acknowledged by the master alone, then lost with it.
	g.tail = sendKeys(t, g.c, master.Addr(), topic, "t", 30)
	testutil.Equal(t, len(g.tail), 30, "tail written")
	stopMaster()
	g.master = master

	// The replica comes back and is promoted by force (the master is gone).
	ropts.Listen = replica.Addr()
	g.replica, _ = runBroker(t, ropts)
	promote := protocol.ReplicaPromoteRequestHeader{BrokerName: name, LogEnd: -1}
	expectCode(t, invoke(t, g.c, g.replica.Addr(), protocol.ReplicaPromote, promote.Ext(), nil), protocol.Success, "forced promotion")
	testutil.Eventually(t, 10*time.Second, func() error {
		addr, _, err := registeredAt(t, g.c, g.ns.Addr(), name)
		if err != nil || addr != g.replica.Addr() {
			return fmt.Errorf("master listed at %q (%v)", addr, err)
		}
		return nil
	})
	g.after = sendKeys(t, g.c, g.replica.Addr(), topic, "p", 25)
	testutil.Equal(t, len(g.after), 25, "sends to the promoted replica")
	return g
}

// followsWithoutTail restarts the old master and checks that it follows
// the promoted replica with the group's log: every common and later key
// once, none of its own tail.
func (g divergedGroup) followsWithoutTail(t *testing.T, topic string) {
	t.Helper()
	g.mopts.Listen = g.master.Addr()
	master, _ := runBroker(t, g.mopts)
	testutil.Eventually(t, 10*time.Second, func() error {
		if master.isMaster() || master.repl.masterAddr() != g.replica.Addr() {
			return fmt.Errorf("the returning old master is not following the promoted replica (master %v, following %q)",
				master.isMaster(), master.repl.masterAddr())
		}
		return nil
	})
	waitCaughtUp(t, g.replica, master)
	keys := readKeys(t, g.c, master.Addr(), topic, 4)
	for _, k := range append(g.common, g.after...) {
		if keys[k] != 1 {
			t.Fatalf("key %s appears %d times on the old master after it followed", k, keys[k])
		}
	}
	for _, k := range g.tail {
		if keys[k] != 0 {
			t.Fatalf("divergent key %s survived the truncation", k)
		}
	}
}

// TestReplicationDivergentTailTruncated: an old master that comes back
// after its replica was promoted steps down, cuts the tail nobody else
// had (written after the replica stopped following) and follows.
func TestReplicationDivergentTailTruncated(t *testing.T) {
	g := divergeGroup(t, "broker-d", "DivTopic")
	g.followsWithoutTail(t, "DivTopic")
}

// TestDivergentTailCutAfterAnEarlyMetadataExchange: a metadata exchange
// with the new master that comes before the HELLO (the step-down and the
// first exchange raced it in the seed-61 campaign) must not hand the old
// master the new master's epoch history: that history calls the old
// master's unacknowledged tail part of the new epoch, so the HELLO kept
// it and the copies diverged for good ("no whole record at commit-log
// offset …" on every fetch).
func TestDivergentTailCutAfterAnEarlyMetadataExchange(t *testing.T) {
	g := divergeGroup(t, "broker-dm", "DivMeta")
	old, err := New(g.mopts)
	testutil.NoError(t, err, "opening the old master's data")
	before := old.repl.epochs()
	old.repl.mu.Lock()
	old.repl.state.Master = false // stepped down (its lease ended), HELLO not yet done
	old.repl.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	testutil.NoError(t, old.repl.syncMeta(ctx, g.replica.Addr()), "the metadata exchange")
	testutil.Equal(t, fmt.Sprint(old.repl.epochs()), fmt.Sprint(before), "the old master's epoch history after the exchange")
	// A history that agrees on every record held is still taken.
	taken := append(append([]protocol.EpochEntry(nil), before...),
		protocol.EpochEntry{Epoch: before[len(before)-1].Epoch + 1, StartOffset: old.store.CommitLogMaxOffset()})
	testutil.NoError(t, old.repl.applyMeta(&protocol.ReplicaMeta{Epochs: taken}, nil), "applying an agreeing history")
	testutil.Equal(t, fmt.Sprint(old.repl.epochs()), fmt.Sprint(taken), "an agreeing history")
	old.repl.mu.Lock()
	old.repl.state.Epochs = before
	old.repl.state.Master = true
	testutil.NoError(t, old.repl.persistLocked(), "restoring the data directory's state")
	old.repl.mu.Unlock()
	old.Shutdown()
	g.followsWithoutTail(t, "DivMeta")
}

// chunkEnd returns where the log continues after a ReadLog chunk read at
// from: past its records, or at the next segment after an end marker.
func chunkEnd(from int64, chunk []byte, segSize int64) int64 {
	for pos := 0; pos+8 <= len(chunk); {
		if binary.BigEndian.Uint32(chunk[pos+4:]) == protocol.BlankMagicCode {
			return (from/segSize + 1) * segSize
		}
		pos += int(binary.BigEndian.Uint32(chunk[pos:]))
	}
	return from + int64(len(chunk))
}

// TestReplicationEmptyMasterDoesNotWipeReplica: a master that returns with
// an empty data directory (its disk was lost) must not lead the group and
// make the replica drop what it holds: it follows, an operator promotes the
// replica, and the new broker copies the whole log back.
func TestReplicationEmptyMasterDoesNotWipeReplica(t *testing.T) {
	ns := startNamesrv(t, "127.0.1.1:0", "idc1", nil)
	mopts := groupOptions(t, 1, "broker-e", 0, ReplicationSync, ns.Addr())
	master, stopMaster := runBroker(t, mopts)
	replica, _ := runBroker(t, groupOptions(t, 2, "broker-e", 1, ReplicationSync, ns.Addr()))
	c := newRawClient(t)
	createTopic(t, c, master.Addr(), "WipeTopic", 4)
	waitInSync(t, master, 1)
	acked := sendKeys(t, c, master.Addr(), "WipeTopic", "w", 60)
	testutil.Equal(t, len(acked), 60, "acknowledged")
	end := replica.store.CommitLogMaxOffset()
	stopMaster()

	mopts.Listen = master.Addr()
	mopts.DataDir = t.TempDir() // the disk was replaced
	master, _ = runBroker(t, mopts)
	testutil.Eventually(t, 10*time.Second, func() error {
		if master.repl.regID.Load() == 0 {
			return fmt.Errorf("the empty broker has not stepped down yet")
		}
		return nil
	})
	testutil.True(t, !master.isMaster(), "an empty broker does not lead a group with data")
	testutil.Equal(t, replica.store.CommitLogMaxOffset(), end, "the replica kept its log")

	promote := protocol.ReplicaPromoteRequestHeader{BrokerName: "broker-e", LogEnd: -1}
	expectCode(t, invoke(t, c, replica.Addr(), protocol.ReplicaPromote, promote.Ext(), nil), protocol.Success, "forced promotion")
	waitCaughtUp(t, replica, master)
	waitKeys(t, c, master.Addr(), "WipeTopic", 4, 60)
}

// TestReplicationLaggingReplicaLeavesAndRejoins: a replica whose link to
// the master goes silent (no close) leaves the in-sync set after
// ReplicaLagMax, so sync sends stop waiting for it; when the link heals it
// catches up and rejoins, and sync sends wait for it again.
func TestReplicationLaggingReplicaLeavesAndRejoins(t *testing.T) {
	ns := startNamesrv(t, "127.0.1.1:0", "idc1", nil)
	mopts := groupOptions(t, 1, "broker-l", 0, ReplicationSync, ns.Addr())
	mopts.ReplicaLagMax = 500 * time.Millisecond
	master, _ := runBroker(t, mopts)
	proxy, err := testutil.NewProxy("127.0.2.1:0", master.Addr())
	testutil.NoError(t, err, "proxy")
	t.Cleanup(func() { proxy.Close() })
	ropts := groupOptions(t, 2, "broker-l", 1, ReplicationSync, ns.Addr())
	ropts.MasterAddr = proxy.Addr() // the replica's link to the master goes through the proxy
	replica, _ := runBroker(t, ropts)
	c := newRawClient(t)
	createTopic(t, c, master.Addr(), "LagTopic", 4)
	waitInSync(t, master, 1)

	proxy.Blackhole(true)
	// Sends wait for the silent replica until it is evicted, then go on.
	acked := sendKeys(t, c, master.Addr(), "LagTopic", "l", 20)
	testutil.Equal(t, len(acked), 20, "sends acknowledged once the silent replica left the in-sync set")
	waitInSync(t, master, 0)

	proxy.Restore()
	waitInSync(t, master, 1)
	more := sendKeys(t, c, master.Addr(), "LagTopic", "m", 20)
	testutil.Equal(t, len(more), 20, "acknowledged with the replica back in sync")
	waitCaughtUp(t, master, replica)
	waitKeys(t, c, replica.Addr(), "LagTopic", 4, len(acked)+20)
}
