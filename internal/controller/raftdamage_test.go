package controller

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/zonemq/zonemq/internal/testutil"
)

// A voter whose Raft state was damaged while it was down — an entry whose
// bytes changed, or the file cut short — moves it aside, starts empty
// under its own id, and gets the group state back from the leader; the
// cluster keeps its decisions all along.
func TestVoterWithDamagedRaftStateStartsEmptyAndCatchesUp(t *testing.T) {
	for _, damage := range []string{"entry", "truncate"} {
		t.Run(damage, func(t *testing.T) {
			c := startClusterWith(t, 3, func(o *Options) { o.MasterLeaseTimeout = time.Minute })
			leader := c.leader()
			c.establishGroup(leader, []int64{1, 2})
			want := groupStatus(c.status(leader.srv.Addr()))
			var victim *testVoter
			for _, v := range c.voters {
				if v != leader {
					victim = v
					break
				}
			}
			testutil.Eventually(t, testDeadline, func() error { // the victim holds the group before it is damaged
				if groupStatus(c.status(victim.srv.Addr())) == nil {
					return errors.New("the follower has not applied the group yet")
				}
				return nil
			})
			victim.stop()
			damageRaftDB(t, filepath.Join(victim.opts.DataDir, "raft.db"), damage)

			opts := victim.opts
			opts.Bootstrap = false
			back := c.startVoter(opts)
			quarantined, _ := filepath.Glob(filepath.Join(opts.DataDir, "quarantine", "*", "raft.db"))
			testutil.Equal(t, len(quarantined), 1, "the damaged log moved into quarantine/")
			testutil.Eventually(t, testDeadline, func() error {
				got := groupStatus(c.status(back.srv.Addr()))
				if got == nil || got.MasterID != want.MasterID || got.Epoch != want.Epoch || !slices.Equal(got.InSync, want.InSync) {
					return fmt.Errorf("the restarted voter's view %+v, the leader's %+v", got, want)
				}
				return nil
			})
		})
	}
}

// damageRaftDB changes a stopped voter's Raft log: "entry" rewrites the
// newest entry's data behind the checksum's back, "truncate" cuts the
// file after its first three pages (bbolt's two meta pages and one more).
func damageRaftDB(t *testing.T, path, how string) {
	t.Helper()
	if how == "truncate" {
		testutil.NoError(t, os.Truncate(path, 3*4096))
		return
	}
	b, err := raftboltdb.New(raftboltdb.Options{Path: path})
	testutil.NoError(t, err)
	defer b.Close()
	last, err := b.LastIndex()
	testutil.NoError(t, err)
	var l raft.Log
	testutil.NoError(t, b.GetLog(last, &l))
	l.Data = append(slices.Clone(l.Data), 'x')
	testutil.NoError(t, b.StoreLog(&l)) // the inner store: the seal stays the old one
}

// The checked store seals what it writes and refuses what changed since;
// values written before seals existed are read as they are.
func TestCheckedRaftStore(t *testing.T) {
	b, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(t.TempDir(), "raft.db")})
	testutil.NoError(t, err)
	defer b.Close()
	c := checkedStore{b}
	testutil.NoError(t, c.StoreLogs([]*raft.Log{{Index: 1, Term: 1, Data: []byte("a")}, {Index: 2, Term: 1, Data: []byte("b")}}))
	var l raft.Log
	testutil.NoError(t, c.GetLog(2, &l))
	testutil.Equal(t, string(l.Data), "b", "entry read back")
	testutil.True(t, l.Extensions == nil, "the seal is not handed to Raft", l.Extensions)
	testutil.NoError(t, c.SetUint64([]byte("CurrentTerm"), 7))
	term, err := c.GetUint64([]byte("CurrentTerm"))
	testutil.NoError(t, err)
	testutil.Equal(t, term, uint64(7), "term read back")
	testutil.NoError(t, verifyRaftState(c), "a sound store verifies")

	testutil.NoError(t, b.StoreLog(&raft.Log{Index: 3, Term: 2, Data: []byte("legacy")})) // no seal
	testutil.NoError(t, b.SetUint64([]byte("LastVoteTerm"), 2))
	testutil.NoError(t, c.GetLog(3, &l), "an entry from before the seals")
	v, err := c.GetUint64([]byte("LastVoteTerm"))
	testutil.NoError(t, err)
	testutil.Equal(t, v, uint64(2), "a value from before the seals")

	testutil.NoError(t, b.GetLog(2, &l))
	l.Term = 9 // changed behind the seal
	testutil.NoError(t, b.StoreLog(&l))
	testutil.True(t, errors.Is(c.GetLog(2, &l), errRaftDamaged), "a changed entry is refused")
	testutil.True(t, errors.Is(verifyRaftState(c), errRaftDamaged), "and the store does not verify")
	raw, err := b.Get([]byte("CurrentTerm"))
	testutil.NoError(t, err)
	raw[0] ^= 1
	testutil.NoError(t, b.Set([]byte("CurrentTerm"), raw))
	_, err = c.GetUint64([]byte("CurrentTerm"))
	testutil.True(t, errors.Is(err, errRaftDamaged), "a changed value is refused", err)
}

// The guard of a voter that started empty refuses votes until every
// election that may have been under way is over and it holds the log up to
// the commit index the leader first named.
func TestVoteGuardAbstainsUntilCaughtUp(t *testing.T) {
	g := &voteGuard{until: time.Now().Add(time.Hour), logger: slog.New(slog.DiscardHandler)}
	var last uint64
	g.applied = func() uint64 { return last }
	g.target.Store(10)
	last = 10
	testutil.True(t, g.abstaining(), "within the elections' window")
	g.until = time.Now().Add(-time.Second)
	g.target.Store(0)
	testutil.True(t, g.abstaining(), "before a leader named its commit index")
	g.target.Store(10)
	last = 9
	testutil.True(t, g.abstaining(), "before it holds the log up to it")
	last = 10
	testutil.True(t, !g.abstaining(), "caught up")
	last = 0
	testutil.True(t, !g.abstaining(), "and for good")
}

// Through the guard, a vote or pre-vote request to a voter that may not
// vote yet is refused at the transport, and everything else reaches Raft.
func TestVoteGuardRefusesVotesAtTheTransport(t *testing.T) {
	inner, err := raft.NewTCPTransport("127.0.1.1:0", nil, 2, 5*time.Second, io.Discard)
	testutil.NoError(t, err)
	defer inner.Close()
	g := newVoteGuard(inner, time.Hour, slog.New(slog.DiscardHandler))
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { g.run(stop); close(done) }()
	defer func() { close(stop); <-done }()
	peer, err := raft.NewTCPTransport("127.0.2.1:0", nil, 2, 5*time.Second, io.Discard)
	testutil.NoError(t, err)
	defer peer.Close()

	hdr := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("c2"), Addr: []byte(peer.LocalAddr())}
	var vote raft.RequestVoteResponse
	testutil.NoError(t, peer.RequestVote("c1", inner.LocalAddr(), &raft.RequestVoteRequest{RPCHeader: hdr, Term: 5, LastLogIndex: 1, LastLogTerm: 1}, &vote))
	testutil.True(t, !vote.Granted && vote.Term == 5, "vote refused, in the candidate's term", vote)
	var pre raft.RequestPreVoteResponse
	testutil.NoError(t, peer.RequestPreVote("c1", inner.LocalAddr(), &raft.RequestPreVoteRequest{RPCHeader: hdr, Term: 6}, &pre))
	testutil.True(t, !pre.Granted, "pre-vote refused", pre)

	// An AppendEntries passes to Raft (here: the test) and names the
	// leader's commit index.
	answered := make(chan error, 1)
	go func() {
		var resp raft.AppendEntriesResponse
		answered <- peer.AppendEntries("c1", inner.LocalAddr(), &raft.AppendEntriesRequest{RPCHeader: hdr, Term: 6, LeaderCommitIndex: 42,
			Entries: []*raft.Log{{Index: 1, Term: 6}}}, &resp)
	}()
	select {
	case rpc := <-g.Consumer():
		_, ok := rpc.Command.(*raft.AppendEntriesRequest)
		testutil.True(t, ok, "the AppendEntries reached Raft", rpc.Command)
		rpc.Respond(&raft.AppendEntriesResponse{RPCHeader: hdr, Term: 6, Success: true}, nil)
	case <-time.After(testDeadline):
		t.Fatal("the AppendEntries did not pass the guard")
	}
	testutil.NoError(t, <-answered)
	testutil.Equal(t, g.target.Load(), uint64(42), "the leader's commit index noted")
}
