package controller

import (
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"slices"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/zonemq/zonemq/internal/testutil"
)

// applyCmd applies c to f as a committed log entry.
func applyCmd(t *testing.T, f *fsm, index uint64, c command) error {
	t.Helper()
	data, err := json.Marshal(&c)
	testutil.NoError(t, err)
	res := f.Apply(&raft.Log{Index: index, Data: data})
	if res == nil {
		return nil
	}
	return res.(error)
}

// memorySink is a raft.SnapshotSink into memory.
type memorySink struct{ bytes.Buffer }

func (s *memorySink) ID() string    { return "mem" }
func (s *memorySink) Cancel() error { return nil }
func (s *memorySink) Close() error  { return nil }

func TestControllerFSMCommands(t *testing.T) {
	f := newFSM()
	k := groupKey{Cluster: "zc", Name: "g1"}
	testutil.NoError(t, applyCmd(t, f, 1, command{Type: cmdReport, Key: k, ID: 1, Addr: "r1", LogEnd: 10, Epoch: 3}))
	g := f.group(k)
	testutil.Equal(t, g.MasterID, int64(-1), "a replica alone makes no master")
	testutil.NoError(t, applyCmd(t, f, 2, command{Type: cmdReport, Key: k, ID: 0, Addr: "m0", Epoch: 3,
		AdoptMaster: true, SetInSync: true, InSync: []int64{0, 1}}))
	g = f.group(k)
	testutil.Equal(t, g.MasterID, int64(0), "adopted")
	testutil.Equal(t, g.Epoch, int64(3), "adopted at the broker's epoch")
	testutil.Equal(t, g.LeasedEpoch, int64(3), "adopted master is leased")
	testutil.True(t, slices.Equal(g.InSync, []int64{0, 1}), "in-sync", g.InSync)

	// A second master claim, an in-sync set from a non-master and a
	// stale election are refused; the state stays.
	testutil.ErrorIs(t, applyCmd(t, f, 3, command{Type: cmdReport, Key: k, ID: 1, Addr: "r1", Epoch: 3, AdoptMaster: true}), errStale)
	testutil.ErrorIs(t, applyCmd(t, f, 4, command{Type: cmdReport, Key: k, ID: 1, Addr: "r1", Epoch: 3, SetInSync: true}), errStale)
	testutil.ErrorIs(t, applyCmd(t, f, 5, command{Type: cmdElect, Key: k, ID: 1, FromEpoch: 2}), errStale)
	testutil.Equal(t, f.group(k).MasterID, int64(0), "master unchanged")

	testutil.NoError(t, applyCmd(t, f, 6, command{Type: cmdElect, Key: k, ID: 1, FromEpoch: 3}))
	g = f.group(k)
	testutil.Equal(t, g.MasterID, int64(1), "elected")
	testutil.Equal(t, g.MasterAddr, "r1", "elected address")
	testutil.Equal(t, g.Epoch, int64(4), "epoch+1")
	testutil.Equal(t, g.LeasedEpoch, int64(3), "not leased until the old lease ends")
	testutil.True(t, slices.Equal(g.InSync, []int64{1}), "in-sync is the new master", g.InSync)
	// Replaying the same election (a retried commit) cannot bump twice.
	testutil.ErrorIs(t, applyCmd(t, f, 7, command{Type: cmdElect, Key: k, ID: 1, FromEpoch: 3}), errStale)
	testutil.ErrorIs(t, applyCmd(t, f, 8, command{Type: cmdLease, Key: k, ID: 0, Epoch: 4}), errStale)
	testutil.NoError(t, applyCmd(t, f, 9, command{Type: cmdLease, Key: k, ID: 1, Epoch: 4}))
	testutil.NoError(t, applyCmd(t, f, 10, command{Type: cmdAPIAddr, NodeID: "c1", Addr: "127.0.1.1:1"}))
	testutil.True(t, applyCmd(t, f, 11, command{Type: "bogus"}) != nil, "unknown command refused")
	if err := f.Apply(&raft.Log{Index: 12, Data: []byte("{")}); err == nil {
		t.Fatal("undecodable entry accepted")
	}

	// Snapshot and restore into a fresh FSM give the same state.
	snap, err := f.Snapshot()
	testutil.NoError(t, err)
	var sink memorySink
	testutil.NoError(t, snap.Persist(&sink))
	snap.Release()
	f2 := newFSM()
	testutil.NoError(t, f2.Restore(io.NopCloser(&sink)))
	if !reflect.DeepEqual(f2.allGroups(), f.allGroups()) {
		t.Fatalf("restored %+v, want %+v", f2.allGroups(), f.allGroups())
	}
	testutil.Equal(t, f2.apiAddr("c1"), "127.0.1.1:1", "restored API address")
	testutil.True(t, f2.Restore(io.NopCloser(bytes.NewReader([]byte("junk")))) != nil, "junk snapshot refused")
}

func TestControllerFSMEpochHistory(t *testing.T) {
	f := newFSM()
	k := groupKey{Cluster: "zc", Name: "g1"}
	testutil.NoError(t, applyCmd(t, f, 1, command{Type: cmdReport, Key: k, ID: 1, Addr: "r1", At: 100}))
	testutil.Equal(t, len(f.group(k).History), 0, "a replica alone makes no history")
	testutil.NoError(t, applyCmd(t, f, 2, command{Type: cmdReport, Key: k, ID: 0, Addr: "m0", Epoch: 2, AdoptMaster: true, At: 200}))
	testutil.NoError(t, applyCmd(t, f, 3, command{Type: cmdElect, Key: k, ID: 1, FromEpoch: 2, At: 300}))
	// A refused election leaves no trace.
	testutil.ErrorIs(t, applyCmd(t, f, 4, command{Type: cmdElect, Key: k, ID: 0, FromEpoch: 2, At: 400}), errStale)
	testutil.NoError(t, applyCmd(t, f, 5, command{Type: cmdElect, Key: k, ID: 0, FromEpoch: 3, At: 500}))
	want := []epochRecord{{2, 0, "m0", 200}, {3, 1, "r1", 300}, {4, 0, "m0", 500}}
	if got := f.group(k).History; !reflect.DeepEqual(got, want) {
		t.Fatalf("history %+v, want %+v", got, want)
	}

	// The history is bounded: the oldest entries go.
	for i := range maxHistory {
		testutil.NoError(t, applyCmd(t, f, uint64(6+i), command{Type: cmdElect, Key: k, ID: int64(1 - i%2), FromEpoch: int64(4 + i)}))
	}
	h := f.group(k).History
	testutil.Equal(t, len(h), maxHistory, "bounded")
	testutil.Equal(t, h[len(h)-1].Epoch, int64(4+maxHistory), "newest kept")

	// A snapshot written before the history existed restores with none.
	old := `{"groups":[{"key":{"cluster":"zc","name":"g1"},"masterId":0,"masterAddr":"m0","epoch":7,` +
		`"leasedEpoch":7,"inSync":[0],"members":{"0":{"addr":"m0","idc":"idc1","logEnd":0}}}],"apiAddrs":{}}`
	f2 := newFSM()
	testutil.NoError(t, f2.Restore(io.NopCloser(bytes.NewReader([]byte(old)))))
	g := f2.group(k)
	testutil.Equal(t, g.Epoch, int64(7), "old snapshot's epoch")
	testutil.Equal(t, len(g.History), 0, "old snapshot has no history")
	// Elections after it start the history.
	testutil.NoError(t, applyCmd(t, f2, 1, command{Type: cmdReport, Key: k, ID: 1, Addr: "r1"}))
	testutil.NoError(t, applyCmd(t, f2, 2, command{Type: cmdElect, Key: k, ID: 1, FromEpoch: 7, At: 9}))
	testutil.True(t, reflect.DeepEqual(f2.group(k).History, []epochRecord{{8, 1, "r1", 9}}), "history after an old snapshot", f2.group(k).History)
}

// The eligible set: members leaving while the set is below min-insync join
// it, members back in the set leave it, and it empties once the set holds
// min-insync copies again or min-insync is not known.
func TestEligibleAfter(t *testing.T) {
	for _, tc := range []struct {
		name               string
		old, now, eligible []int64
		minInSync          int
		want               []int64
	}{
		{"still enough copies", []int64{0, 1, 2}, []int64{0, 1}, nil, 2, nil},
		{"below min: the leaver is eligible", []int64{0, 1}, []int64{0}, nil, 2, []int64{1}},
		{"kept while still below", []int64{0}, []int64{0}, []int64{1}, 2, []int64{1}},
		{"another leaves below min", []int64{0, 2}, []int64{0}, []int64{1}, 3, []int64{1, 2}},
		{"back in the set", []int64{0}, []int64{0, 1}, []int64{1}, 3, nil},
		{"enough again", []int64{0}, []int64{0, 2}, []int64{1}, 2, nil},
		{"min not known", []int64{0, 1}, []int64{0}, nil, 0, nil},
	} {
		got := eligibleAfter(tc.old, tc.now, tc.eligible, tc.minInSync)
		testutil.True(t, slices.Equal(got, tc.want), tc.name, got, tc.want)
	}
}
