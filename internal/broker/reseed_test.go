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

	// A controller that names the reseeded broker master (its disk said
	// replica, but it may have been elected before the damage) is refused:
	// it does not lead in this run.
	testutil.True(t, replica.reseeded, "the broker knows it reseeded")
	replica.repl.applyControllerAnswer(protocol.ControllerHeartbeatResponseHeader{MasterID: ropts.BrokerID,
		MasterAddr: replica.Addr(), Epoch: replica.repl.lastEpoch() + 1, LeaseMillis: 5000}, time.Now())
	testutil.True(t, !replica.IsMaster(), "a reseeded broker refuses to lead")

	// The master, damaged the same way, refuses: its log may hold what
	// no other copy has.
	mopts := master.opts
	stopMaster()
	damageLastSegment(t, mopts.DataDir)
	_, err = New(mopts)
	testutil.True(t, errors.Is(err, store.ErrCorrupt), "a damaged master refuses to start", err)
}
