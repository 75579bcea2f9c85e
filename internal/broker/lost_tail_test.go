package broker

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/namesrv"
	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/testutil"
)

// waitControllerInSync waits until the controller's leader counts broker id
// of group name alive and in sync.
func waitControllerInSync(t *testing.T, c *remoting.Client, ctrl []string, name string, id int64) {
	t.Helper()
	testutil.Eventually(t, 15*time.Second, func() error {
		_, g, err := controllerGroup(t, c, ctrl, name)
		if err != nil {
			return err
		}
		if slices.Contains(g.InSync, id) {
			for _, m := range g.Members {
				if m.ID == id && m.Alive {
					return nil
				}
			}
		}
		return fmt.Errorf("the controller's view lacks broker %d in sync: %+v", id, *g)
	})
}

// losePowerAfter makes dir's store look as a power loss leaves it: every
// byte of the commit log from offset from on is zero again (never synced),
// and the run did not stop cleanly. from and the log's end must lie in one
// segment of segSize bytes.
func losePowerAfter(t *testing.T, dir string, from, end, segSize int64) {
	t.Helper()
	base := from - from%segSize
	testutil.True(t, end-base <= segSize, "the lost range lies in one segment", from, end)
	f, err := os.OpenFile(filepath.Join(dir, "commitlog", fmt.Sprintf("%020d", base)), os.O_RDWR, 0)
	testutil.NoError(t, err)
	defer f.Close()
	_, err = f.WriteAt(make([]byte, end-from), from-base)
	testutil.NoError(t, err)
	testutil.NoError(t, os.WriteFile(filepath.Join(dir, "abort"), nil, 0o644))
}

// A master whose log lost records it held when its epoch began — a power
// loss undid the unsynced tail it had fetched as a replica before it was
// elected — must not lead: the chaos campaign saw one keep the role with an
// epoch starting past its log end, its replicas refusing to follow it for
// ever. It starts as a replica, the controller gives the group to the copy
// with the whole log, and it copies back what it lost; every acknowledged
// message is kept.
func TestMasterThatLostRecordsAfterItsElectionHandsTheGroupOn(t *testing.T) {
	ctrl := startControllers(t, 600*time.Millisecond)
	ns := startNamesrv(t, "127.0.1.1:0", "idc1", func(o *namesrv.Options) { o.ControllerAddrs = ctrl })
	b0, _ := runBroker(t, ctrlGroupOptions(t, 1, "broker-p", 0, ReplicationSync, ns.Addr(), ctrl))
	opts1 := ctrlGroupOptions(t, 2, "broker-p", 1, ReplicationSync, ns.Addr(), ctrl)
	b1, stop1 := runBroker(t, opts1)

	c := newRawClient(t)
	createTopic(t, c, b0.Addr(), "PowerTopic", 4)
	waitInSync(t, b0, 1)
	waitControllerInSync(t, c, ctrl, "broker-p", 1)
	var acked []string
	testutil.Eventually(t, 15*time.Second, func() error {
		acked = append(acked, sendKeys(t, c, b0.Addr(), "PowerTopic", fmt.Sprintf("a%d-", len(acked)), 10)...)
		// Enough, and room left in the segment for the tail to come.
		if end := b0.store.CommitLogMaxOffset(); len(acked) < 50 || end%opts1.SegmentSize > opts1.SegmentSize-8<<10 {
			return fmt.Errorf("%d acknowledged, log end %d", len(acked), end)
		}
		return nil
	})
	waitCaughtUp(t, b0, b1)
	from := b1.store.CommitLogMaxOffset()
	tail := sendKeys(t, c, b0.Addr(), "PowerTopic", "tail-", 10)
	testutil.Equal(t, len(tail), 10, "the tail acknowledged")
	acked = append(acked, tail...)
	waitCaughtUp(t, b0, b1)
	end := b1.store.CommitLogMaxOffset()

	// The group goes to broker 1; its epoch begins at end.
	sw := protocol.ReplicaSwitchRequestHeader{BrokerName: "broker-p", To: 1}
	expectCode(t, invoke(t, c, b0.Addr(), protocol.ReplicaSwitch, sw.Ext(), nil), protocol.Success, "switch to broker 1")
	testutil.Eventually(t, 10*time.Second, func() error {
		if !b1.IsMaster() {
			return fmt.Errorf("broker 1 is not master yet")
		}
		return nil
	})
	waitInSync(t, b1, 1)
	waitControllerInSync(t, c, ctrl, "broker-p", 0)
	epochs := b1.repl.epochs()
	testutil.Equal(t, epochs[len(epochs)-1].StartOffset, end, "broker 1's epoch begins at its log end")

	// Power loss: the tail it fetched as a replica was never synced.
	stop1()
	losePowerAfter(t, opts1.DataDir, from, end, opts1.SegmentSize)
	opts1.Listen = b1.Addr()
	b1, _ = runBroker(t, opts1)
	testutil.Equal(t, b1.store.CommitLogMaxOffset(), from, "the unsynced tail is gone")
	testutil.True(t, !b1.IsMaster(), "a master that lost records since its epoch began starts as a replica")
	testutil.True(t, b1.store.LostDurableRecords(), "the store saw records it had reported durable missing")
	b1.repl.mu.Lock()
	mark := b1.repl.state.MustCatchUp
	b1.repl.mu.Unlock()
	testutil.True(t, mark != "", "the mark that it must catch up before leading")

	// The controller elects broker 0, which has everything; broker 1
	// follows it and copies the tail back.
	testutil.Eventually(t, 20*time.Second, func() error {
		if !b0.IsMaster() {
			return fmt.Errorf("broker 0 is not master again")
		}
		if resp := sendRaw(t, c, b0.Addr(), "PowerTopic", 0, map[string]string{"KEYS": "after"}, []byte("x")); resp.Code != int32(protocol.Success) {
			return fmt.Errorf("broker 0 refuses: %s %s", protocol.ResponseCode(resp.Code), resp.Remark)
		}
		return nil
	})
	acked = append(acked, "after")
	waitCaughtUp(t, b0, b1)
	testutil.Eventually(t, 10*time.Second, func() error {
		if why := leadRefusal(b1); why != "" {
			return fmt.Errorf("broker 1, caught up, still refuses: %s", why)
		}
		return nil
	})
	for _, s := range []*Server{b0, b1} {
		keys := readKeys(t, c, s.Addr(), "PowerTopic", 4)
		for _, k := range acked {
			if keys[k] != 1 {
				t.Fatalf("acknowledged key %s is on %s %d times", k, s.Addr(), keys[k])
			}
		}
	}
}
