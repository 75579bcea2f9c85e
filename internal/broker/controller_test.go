package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/controller"
	"github.com/zonemq/zonemq/internal/namesrv"
	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/testutil"
)

// startControllers runs a 3-voter controller cluster, voter i in IDC i, with
// a short master lease, and returns the voters' request addresses.
func startControllers(t *testing.T, lease time.Duration) []string {
	t.Helper()
	return startControllersWith(t, lease, nil)
}

// startControllersWith is startControllers with each voter's options
// changed by mutate first.
func startControllersWith(t *testing.T, lease time.Duration, mutate func(*controller.Options)) []string {
	t.Helper()
	var srvs []*controller.Server
	var peers []controller.Peer
	var addrs []string
	for i := 1; i <= 3; i++ {
		o := controller.NewOptions()
		ip := fmt.Sprintf("127.0.%d.1", i)
		o.Listen, o.RaftListen = ip+":0", ip+":0"
		o.NodeID = fmt.Sprintf("c%d", i)
		o.DataDir = t.TempDir()
		o.MasterLeaseTimeout = lease
		o.CheckInterval = 50 * time.Millisecond
		o.HeartbeatTimeout, o.ElectionTimeout, o.LeaderLeaseTimeout = 500*time.Millisecond, 500*time.Millisecond, 250*time.Millisecond
		o.Logger = testLogger()
		if mutate != nil {
			mutate(&o)
		}
		s, err := controller.New(o)
		testutil.NoError(t, err, "controller.New")
		done := make(chan error, 1)
		go func() { done <- s.Run(context.Background()) }()
		t.Cleanup(func() { s.Shutdown(); <-done })
		srvs = append(srvs, s)
		peers = append(peers, controller.Peer{ID: o.NodeID, RaftAddr: s.RaftAddr()})
		addrs = append(addrs, s.Addr())
	}
	for _, s := range srvs {
		testutil.NoError(t, s.Bootstrap(peers), "bootstrap")
	}
	return addrs
}

// TestControllerFailoverFencesTheOldMaster: a group's master cut off from
// the controller (its process alive) stops acknowledging when its lease
// lapses; the controller elects the in-sync replica, which takes writes; the
// old master, reconnected, follows it. Nothing acknowledged is lost, and
// nothing is acknowledged by the old master after the new one took over.
func TestControllerFailoverFencesTheOldMaster(t *testing.T) {
	const lease = 600 * time.Millisecond
	ctrl := startControllers(t, lease)
	ns := startNamesrv(t, "127.0.1.1:0", "idc1", nil)

	var link controllerLink
	mopts := ctrlGroupOptions(t, 1, "broker-c", 0, ReplicationSync, ns.Addr(), ctrl)
	mopts.controllerDial = link.dial
	master, _ := runBroker(t, mopts)
	ropts := ctrlGroupOptions(t, 2, "broker-c", 1, ReplicationSync, ns.Addr(), ctrl)
	replica, _ := runBroker(t, ropts)

	c := newRawClient(t)
	createTopic(t, c, master.Addr(), "CtrlTopic", 4)
	waitInSync(t, master, 1)
	var acked []string
	testutil.Eventually(t, 15*time.Second, func() error {
		acked = append(acked, sendKeys(t, c, master.Addr(), "CtrlTopic", fmt.Sprintf("a%d-", len(acked)), 10)...)
		if len(acked) < 50 {
			return fmt.Errorf("%d sends acknowledged so far (waiting for the lease)", len(acked))
		}
		return nil
	})

	// The controller decides: a promotion sent to a broker directly is
	// refused, not fought over (a switchover goes through the controller:
	// TestControllerSwitchoverGoesThroughTheController).
	pr := protocol.ReplicaPromoteRequestHeader{BrokerName: "broker-c", LogEnd: -1}
	expectCode(t, invoke(t, c, replica.Addr(), protocol.ReplicaPromote, pr.Ext(), nil), protocol.IllegalOperation, "promote in controller mode")

	// Acknowledgements name the epoch they were given under.
	epochOf := func(resp *remoting.Command) int64 {
		t.Helper()
		var h protocol.SendMessageResponseHeader
		testutil.NoError(t, h.SetExt(resp.ExtFields), "send response header")
		return h.BrokerEpoch
	}
	first := sendRaw(t, c, master.Addr(), "CtrlTopic", 0, map[string]string{"KEYS": "epoch-1"}, []byte("x"))
	expectCode(t, first, protocol.Success, "send before the cut")
	acked = append(acked, "epoch-1")
	oldEpoch := epochOf(first)
	testutil.True(t, oldEpoch > 0, "the master's acknowledgement carries its epoch", oldEpoch)

	// Cut the master off the controller.
	cutAt := time.Now()
	link.sever(master)
	testutil.Eventually(t, 10*time.Second, func() error {
		resp := sendRaw(t, c, master.Addr(), "CtrlTopic", 0, map[string]string{"KEYS": "fenced"}, []byte("x"))
		if resp.Code == int32(protocol.Success) {
			acked = append(acked, "fenced")
			return fmt.Errorf("the cut-off master still acknowledges")
		}
		return nil
	})
	fencedAfter := time.Since(cutAt)
	var elected time.Duration
	testutil.Eventually(t, 15*time.Second, func() error {
		if !replica.IsMaster() {
			return fmt.Errorf("the replica is not master yet")
		}
		resp := sendRaw(t, c, replica.Addr(), "CtrlTopic", 1, map[string]string{"KEYS": "new-0"}, []byte("x"))
		if resp.Code != int32(protocol.Success) {
			return fmt.Errorf("the new master refuses: %s %s", protocol.ResponseCode(resp.Code), resp.Remark)
		}
		elected = time.Since(cutAt)
		acked = append(acked, "new-0")
		if e := epochOf(resp); e <= oldEpoch {
			t.Fatalf("the new master acknowledged under epoch %d, not above the old master's %d", e, oldEpoch)
		}
		return nil
	})
	t.Logf("master cut off: it stopped acknowledging after %s; the new master took a write %s after the cut (lease %s)",
		fencedAfter.Round(time.Millisecond), elected.Round(time.Millisecond), lease)
	// The old master never acknowledges again while cut off.
	resp := sendRaw(t, c, master.Addr(), "CtrlTopic", 0, nil, []byte("x"))
	testutil.True(t, resp.Code != int32(protocol.Success), "the fenced master refuses", resp.Remark)
	more := sendKeys(t, c, replica.Addr(), "CtrlTopic", "b", 30)
	acked = append(acked, more...)

	// Reconnected, the old master learns it was replaced and follows.
	link.cut.Store(false)
	testutil.Eventually(t, 15*time.Second, func() error {
		if master.IsMaster() {
			return fmt.Errorf("the old master has not stepped down")
		}
		return nil
	})
	waitCaughtUp(t, replica, master)
	keys := readKeys(t, c, replica.Addr(), "CtrlTopic", 4)
	for _, k := range acked {
		if keys[k] == 0 {
			t.Fatalf("acknowledged key %s missing on the new master", k)
		}
	}
	old := readKeys(t, c, master.Addr(), "CtrlTopic", 4)
	testutil.Equal(t, len(old), len(keys), "the old master holds the new master's log")
}

// TestElectedMasterReplacesAFrozenMasterInTheRoutes: a master freezes
// towards its name server (the connection stays open and nothing passes, as
// under SIGSTOP) and is cut off from the controller. The controller elects
// the replica, and the name server, which knows the controllers, lists the
// new master at id 0 as soon as it confirms the election — not after the old
// registration's expiry, a minute here.
func TestElectedMasterReplacesAFrozenMasterInTheRoutes(t *testing.T) {
	const lease = 600 * time.Millisecond
	ctrl := startControllers(t, lease)
	ns := startNamesrv(t, "127.0.1.1:0", "idc1", func(o *namesrv.Options) {
		o.BrokerExpiry = time.Minute
		o.ControllerAddrs = ctrl
	})
	px, err := testutil.NewProxy("127.0.1.1:0", ns.Addr())
	testutil.NoError(t, err, "proxy")
	t.Cleanup(func() { px.Close() })

	var link controllerLink
	mopts := ctrlGroupOptions(t, 1, "broker-f", 0, ReplicationSync, px.Addr(), ctrl)
	mopts.controllerDial = link.dial
	mopts.NamesrvTimeout = time.Minute // a frozen process closes nothing
	master, _ := runBroker(t, mopts)
	// Cleanups run last-in first-out: the proxy closes before the master
	// stops, or its unregistration would wait out NamesrvTimeout.
	t.Cleanup(func() { px.Close() })
	ropts := ctrlGroupOptions(t, 2, "broker-f", 1, ReplicationSync, ns.Addr(), ctrl)
	replica, _ := runBroker(t, ropts)

	c := newRawClient(t)
	createTopic(t, c, master.Addr(), "FrozenTopic", 4)
	waitInSync(t, master, 1)
	listedMaster := func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := c.Invoke(ctx, ns.Addr(), remoting.NewRequest(int32(protocol.GetRouteInfoByTopic), map[string]string{"topic": "FrozenTopic"}, nil))
		if err != nil || resp.Code != int32(protocol.Success) {
			return ""
		}
		r, err := protocol.DecodeTopicRouteData(resp.Body)
		if err != nil {
			return ""
		}
		for _, bd := range r.BrokerDatas {
			if bd.BrokerName == "broker-f" {
				return bd.BrokerAddrs[protocol.MasterID]
			}
		}
		return ""
	}
	testutil.Eventually(t, 15*time.Second, func() error {
		if got := listedMaster(); got != master.Addr() {
			return fmt.Errorf("the name server lists %q at id 0, want the master %s", got, master.Addr())
		}
		if resp := sendRaw(t, c, master.Addr(), "FrozenTopic", 0, nil, []byte("x")); resp.Code != int32(protocol.Success) {
			return fmt.Errorf("the master does not acknowledge yet: %s", resp.Remark)
		}
		return nil
	})

	frozenAt := time.Now()
	px.Blackhole(true)
	link.sever(master)
	testutil.Eventually(t, 20*time.Second, func() error {
		if got := listedMaster(); got != replica.Addr() {
			return fmt.Errorf("the name server lists %q at id 0, want the elected replica %s", got, replica.Addr())
		}
		return nil
	})
	t.Logf("frozen master: the name server listed the elected master %s after the freeze", time.Since(frozenAt).Round(time.Millisecond))
}

// TestControllerSwitchoverGoesThroughTheController: REPLICA_SWITCH (`zonemq
// admin broker switch`) sent to a controller-run master pauses its writes,
// lets the replica catch up, has the controller elect it, and steps down —
// in an async group, under load, with nothing acknowledged lost; and back
// again to the broker of id 0.
func TestControllerSwitchoverGoesThroughTheController(t *testing.T) {
	ctrl := startControllers(t, 600*time.Millisecond)
	ns := startNamesrv(t, "127.0.1.1:0", "idc1", func(o *namesrv.Options) { o.ControllerAddrs = ctrl })
	mopts := ctrlGroupOptions(t, 1, "broker-s", 0, ReplicationAsync, ns.Addr(), ctrl)
	b0, _ := runBroker(t, mopts)
	ropts := ctrlGroupOptions(t, 2, "broker-s", 1, ReplicationAsync, ns.Addr(), ctrl)
	b1, _ := runBroker(t, ropts)

	c := newRawClient(t)
	createTopic(t, c, b0.Addr(), "SwitchTopic", 4)
	waitInSync(t, b0, 1)
	// The controller elects only live members it knows in sync.
	waitControllerInSync(t, c, ctrl, "broker-s", 1)
	testutil.Eventually(t, 15*time.Second, func() error {
		if resp := sendRaw(t, c, b0.Addr(), "SwitchTopic", 0, nil, []byte("x")); resp.Code != int32(protocol.Success) {
			return fmt.Errorf("the master does not acknowledge yet: %s", resp.Remark)
		}
		return nil
	})

	// Writers to whichever broker is master, during both switches.
	var mu sync.Mutex
	var acked []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100000; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("w%d-%d", w, i)
				for _, b := range []*Server{b0, b1} {
					h := protocol.SendMessageRequestHeader{
						ProducerGroup: "raw_pg", Topic: "SwitchTopic", DefaultTopic: protocol.AutoCreateTopicKey, DefaultTopicQueueNums: 4,
						QueueID: int32(i % 4), BornTimestamp: time.Now().UnixMilli(), Properties: protocol.EncodeProperties(map[string]string{"KEYS": key}),
					}
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					resp, err := c.Invoke(ctx, b.Addr(), remoting.NewRequest(int32(protocol.SendMessage), h.Ext(), []byte(key)))
					cancel()
					if err == nil && resp.Code == int32(protocol.Success) {
						mu.Lock()
						acked = append(acked, key)
						mu.Unlock()
						break
					}
				}
			}
		}()
	}
	var stopOnce sync.Once
	stopWriters := func() { stopOnce.Do(func() { close(stop); wg.Wait() }) }
	t.Cleanup(stopWriters) // before the brokers and the client close
	switchTo := func(master *Server, to int64, next *Server) {
		t.Helper()
		sw := protocol.ReplicaSwitchRequestHeader{BrokerName: "broker-s", To: to}
		resp := invoke(t, c, master.Addr(), protocol.ReplicaSwitch, sw.Ext(), nil)
		expectCode(t, resp, protocol.Success, "switch through the controller")
		testutil.Equal(t, resp.ExtFields["newMaster"], next.Addr(), "the controller's new master")
		testutil.True(t, !master.IsMaster(), "the old master stepped down before answering")
		testutil.Eventually(t, 10*time.Second, func() error {
			if !next.IsMaster() {
				return fmt.Errorf("broker %d is not master yet", to)
			}
			return nil
		})
	}
	ackedSoFar := func(n int) {
		t.Helper()
		testutil.Eventually(t, 15*time.Second, func() error {
			mu.Lock()
			defer mu.Unlock()
			if len(acked) < n {
				return fmt.Errorf("%d writes acknowledged, waiting for %d", len(acked), n)
			}
			return nil
		})
	}
	ackedSoFar(20)
	switchTo(b0, 1, b1)
	// A broker that is not the master refuses, and names itself.
	sw := protocol.ReplicaSwitchRequestHeader{BrokerName: "broker-s", To: 1}
	expectCode(t, invoke(t, c, b0.Addr(), protocol.ReplicaSwitch, sw.Ext(), nil), protocol.ServiceNotAvailable, "switch sent to a replica")
	waitInSync(t, b1, 1)
	waitControllerInSync(t, c, ctrl, "broker-s", 0)
	mu.Lock()
	n := len(acked)
	mu.Unlock()
	ackedSoFar(n + 20)
	switchTo(b1, 0, b0)
	stopWriters()

	waitCaughtUp(t, b0, b1)
	keys := readKeys(t, c, b0.Addr(), "SwitchTopic", 4)
	mu.Lock()
	defer mu.Unlock()
	testutil.True(t, len(acked) > 0, "writes were acknowledged during the switches")
	for _, k := range acked {
		if keys[k] == 0 {
			t.Fatalf("acknowledged key %s missing after two switchovers (%d acknowledged)", k, len(acked))
		}
	}
}

// TestControllerModeWithACL: voters with an ACL grant a lease only to a
// broker that signs its reports with an admin account.
func TestControllerModeWithACL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plain_acl.yml")
	testutil.NoError(t, os.WriteFile(path, []byte(testACL), 0o600))
	ctrl := startControllersWith(t, 600*time.Millisecond, func(o *controller.Options) { o.ACLFile = path })
	ns := startNamesrv(t, "127.0.1.1:0", "idc1", nil)

	signed := ctrlGroupOptions(t, 1, "broker-signed", 0, ReplicationAsync, ns.Addr(), ctrl)
	signed.AccessKey, signed.SecretKey = "zonemqAdmin", "adminSecret1"
	a, _ := runBroker(t, signed)
	unsigned := ctrlGroupOptions(t, 2, "broker-unsigned", 0, ReplicationAsync, ns.Addr(), ctrl)
	b, _ := runBroker(t, unsigned)

	c := newRawClient(t)
	createTopic(t, c, a.Addr(), "AclCtrlTopic", 1)
	createTopic(t, c, b.Addr(), "AclCtrlTopic", 1)
	testutil.Eventually(t, 15*time.Second, func() error {
		if resp := sendRaw(t, c, a.Addr(), "AclCtrlTopic", 0, nil, []byte("x")); resp.Code != int32(protocol.Success) {
			return fmt.Errorf("the signed broker does not acknowledge yet: %s", resp.Remark)
		}
		return nil
	})
	resp := sendRaw(t, c, b.Addr(), "AclCtrlTopic", 0, nil, []byte("x"))
	testutil.True(t, resp.Code != int32(protocol.Success), "a broker whose reports the controller refuses has no lease", resp.Remark)
	// The refused reports never reached the replicated state: only the
	// signed group is known (both brokers have reported many times by now).
	cl := controller.NewClientWithOptions(ctrl, controller.ClientOptions{AccessKey: "zonemqAdmin", SecretKey: "adminSecret1"})
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var st *protocol.ControllerStatus
	testutil.Eventually(t, 10*time.Second, func() error {
		for _, addr := range ctrl {
			if got, err := cl.Status(ctx, addr); err == nil && got.IsLeader {
				st = got
				return nil
			}
		}
		return fmt.Errorf("no controller voter leads")
	})
	var groups []string
	for _, g := range st.Groups {
		groups = append(groups, g.BrokerName)
	}
	testutil.Equal(t, strings.Join(groups, ","), "broker-signed", "groups the controller knows")
}

// ctrlGroupOptions is groupOptions for a group the voters at ctrl run, with
// quick heartbeats.
func ctrlGroupOptions(t *testing.T, idc int, name string, id int64, mode string, ns string, ctrl []string) Options {
	opts := groupOptions(t, idc, name, id, mode, ns)
	opts.ControllerAddrs = ctrl
	opts.ControllerHeartbeatInterval = 150 * time.Millisecond
	return opts
}

// controllerLink is a broker's dialer to the controller that a test can cut
// (redirects name the voters' own addresses, so a proxy would not do).
type controllerLink struct{ cut atomic.Bool }

func (l *controllerLink) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if l.cut.Load() {
		return nil, errors.New("test: the link to the controller is cut")
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// sever cuts the link and closes s's open connections to the voters.
func (l *controllerLink) sever(s *Server) {
	l.cut.Store(true)
	for _, a := range s.repl.ctrlClient.Addrs() {
		s.repl.ctrlClient.CloseConn(a)
	}
}
