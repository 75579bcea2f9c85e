package broker

import (
	"time"

	"errors"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/zonemq/zonemq/internal/protocol"

	"github.com/zonemq/zonemq/internal/store"
	"github.com/zonemq/zonemq/internal/testutil"
)

// damageLastSegment marks dir's store as stopped uncleanly and flips a
// byte of the first record of its newest commit-log segment (valid records
// follow it), as a crash that garbled a write would leave it.
func damageLastSegment(t *testing.T, dir string) {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "commitlog", "*"))
	testutil.NoError(t, err)
	sort.Strings(names)
	testutil.True(t, len(names) > 0, "segments in", dir)
	f, err := os.OpenFile(names[len(names)-1], os.O_RDWR, 0)
	testutil.NoError(t, err)
	defer f.Close()
	var b [1]byte
	_, err = f.ReadAt(b[:], 150)
	testutil.NoError(t, err)
	b[0] ^= 0x04
	_, err = f.WriteAt(b[:], 150)
	testutil.NoError(t, err)
	testutil.NoError(t, os.WriteFile(filepath.Join(dir, "abort"), nil, 0o644))
}

// A replica whose commit log is damaged moves its data aside and copies the
// group's log again: it starts, catches up and serves every message, and
// the damaged files are kept in quarantine/. A master with the same damage
// refuses to start.
func TestReplicaWithDamagedLogReseedsFromTheMaster(t *testing.T) {
	ns := startNamesrv(t, "127.0.1.1:0", "idc1", nil)
	master, stopMaster := runBroker(t, groupOptions(t, 1, "broker-g", 0, ReplicationSync, ns.Addr()))
	ropts := groupOptions(t, 2, "broker-g", 1, ReplicationSync, ns.Addr())
	replica, stopReplica := runBroker(t, ropts)
	c := newRawClient(t)
	createTopic(t, c, master.Addr(), "ReseedTopic", 4)
	waitInSync(t, master, 1)
	acked := sendKeys(t, c, master.Addr(), "ReseedTopic", "k", 300)
	testutil.Equal(t, len(acked), 300, "acknowledged")
	waitCaughtUp(t, master, replica)
	stopReplica()
	damageLastSegment(t, ropts.DataDir)

	ropts.Listen = replica.Addr()
	replica, _ = runBroker(t, ropts)
	q, err := filepath.Glob(filepath.Join(ropts.DataDir, quarantineDir, "*", "commitlog"))
	testutil.NoError(t, err)
	testutil.Equal(t, len(q), 1, "the damaged log kept in quarantine")
	waitCaughtUp(t, master, replica)
	waitKeys(t, c, replica.Addr(), "ReseedTopic", 4, 300)

	// Caught up with the master, it holds what the group acknowledged and
	// may lead again.
	testutil.True(t, replica.reseeded, "the broker knows it reseeded")
	testutil.Eventually(t, 10*time.Second, func() error {
		if why := leadRefusal(replica); why != "" {
			return errors.New(why)
		}
		return nil
	})

	// The master, damaged the same way, refuses: its log may hold what
	// no other copy has.
	mopts := master.opts
	stopMaster()
	damageLastSegment(t, mopts.DataDir)
	_, err = New(mopts)
	testutil.True(t, errors.Is(err, store.ErrCorrupt), "a damaged master refuses to start", err)
}

// leadRefusal is why s would refuse the master role now ("" if it would not).
func leadRefusal(s *Server) string {
	s.repl.mu.Lock()
	defer s.repl.mu.Unlock()
	return s.repl.leadRefusalLocked()
}

// TestReseededReplicaStillRefusesToLeadAfterARestart: a replica that moved
// its damaged log aside and restarted before it copied the group's log
// again still refuses the master role: the mark is on its disk. (The
// seed-61 campaign: a reseeded replica lost power, started without the
// in-memory mark, and a controller leader that had not seen its log shrink
// elected it with an empty log; the group's log began again at 0.) Once it
// has caught up with the master, it may lead.
func TestReseededReplicaStillRefusesToLeadAfterARestart(t *testing.T) {
	ns := startNamesrv(t, "127.0.1.1:0", "idc1", nil)
	mopts := groupOptions(t, 1, "broker-gr", 0, ReplicationSync, ns.Addr())
	master, stopMaster := runBroker(t, mopts)
	ropts := groupOptions(t, 2, "broker-gr", 1, ReplicationSync, ns.Addr())
	replica, stopReplica := runBroker(t, ropts)
	c := newRawClient(t)
	createTopic(t, c, master.Addr(), "ReseedRestart", 4)
	waitInSync(t, master, 1)
	acked := sendKeys(t, c, master.Addr(), "ReseedRestart", "k", 200)
	testutil.Equal(t, len(acked), 200, "acknowledged")
	waitCaughtUp(t, master, replica)
	stopReplica()
	stopMaster() // nothing to copy from until the replica has restarted twice
	damageLastSegment(t, ropts.DataDir)

	ropts.Listen = replica.Addr()
	replica, stopReplica = runBroker(t, ropts)
	testutil.True(t, replica.reseeded, "the broker reseeded")
	testutil.Equal(t, replica.store.CommitLogMaxOffset(), int64(0), "the reseeded log")
	testutil.Eventually(t, 10*time.Second, func() error { // running, not only started
		replica.mu.Lock()
		defer replica.mu.Unlock()
		if !replica.running {
			return errors.New("not running yet")
		}
		return nil
	})
	stopReplica()

	replica, _ = runBroker(t, ropts)
	testutil.True(t, !replica.reseeded, "the second start found nothing damaged")
	testutil.True(t, leadRefusal(replica) != "", "a restarted reseeded broker says it will not lead")
	replica.repl.applyControllerAnswer(protocol.ControllerHeartbeatResponseHeader{MasterID: ropts.BrokerID,
		MasterAddr: replica.Addr(), Epoch: replica.repl.lastEpoch() + 1, LeaseMillis: 5000}, time.Now())
	testutil.True(t, !replica.IsMaster(), "a restarted reseeded broker named master refuses")

	mopts.Listen = master.Addr()
	master, _ = runBroker(t, mopts)
	waitCaughtUp(t, master, replica)
	waitKeys(t, c, replica.Addr(), "ReseedRestart", 4, 200)
	testutil.Eventually(t, 10*time.Second, func() error {
		if why := leadRefusal(replica); why != "" {
			return errors.New(why)
		}
		return nil
	})
}
