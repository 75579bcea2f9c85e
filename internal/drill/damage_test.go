package drill

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/testutil"
)

// The corrupt fault damages a replica's newest segment where its plan says
// — a bit flipped or the file cut short, in its last damageSpan bytes —
// and leaves a master's data alone.
func TestChaosDamageLandsInTheNewestSegment(t *testing.T) {
	dir := t.TempDir()
	testutil.NoError(t, os.MkdirAll(filepath.Join(dir, "commitlog"), 0o755))
	testutil.NoError(t, os.MkdirAll(filepath.Join(dir, "config"), 0o755))
	old := filepath.Join(dir, "commitlog", "00000000000000000000")
	newest := filepath.Join(dir, "commitlog", "00000000000001048576")
	data := make([]byte, 200<<10)
	testutil.NoError(t, os.WriteFile(old, data, 0o644))
	testutil.NoError(t, os.WriteFile(newest, data, 0o644))

	what, err := damageLog(dir, ChaosEvent{Kind: FaultCorrupt, Damage: "flip", DamageAt: 0.5})
	testutil.NoError(t, err)
	got, _ := os.ReadFile(newest)
	flipped := -1
	for i, b := range got {
		if b != 0 {
			testutil.Equal(t, flipped, -1, "one byte changed")
			flipped = i
		}
	}
	testutil.True(t, flipped >= len(data)-damageSpan, "the flip lands in the newest bytes", flipped, what)
	unchanged, _ := os.ReadFile(old)
	testutil.Equal(t, string(unchanged), string(data), "older segments untouched")

	_, err = damageLog(dir, ChaosEvent{Kind: FaultCorrupt, Damage: "truncate", DamageAt: 0})
	testutil.NoError(t, err)
	st, _ := os.Stat(newest)
	testutil.Equal(t, st.Size(), int64(len(data)-damageSpan), "cut to the start of the span")

	testutil.NoError(t, os.WriteFile(filepath.Join(dir, "config", "replication.json"), []byte(`{"master": true}`), 0o644))
	what, err = damageLog(dir, ChaosEvent{Kind: FaultCorrupt, Damage: "truncate", DamageAt: 0})
	testutil.NoError(t, err)
	testutil.True(t, strings.Contains(what, "not damaged"), what)
	st, _ = os.Stat(newest)
	testutil.Equal(t, st.Size(), int64(len(data)-damageSpan), "a master's log is left alone")
}

// A consume-queue damage lands in the newest file of the queue the plan
// picks.
func TestChaosDamageOfAConsumeQueue(t *testing.T) {
	dir := t.TempDir()
	data := make([]byte, 1000)
	var files []string
	for _, q := range []string{"0", "1"} {
		qdir := filepath.Join(dir, "consumequeue", "T", q)
		testutil.NoError(t, os.MkdirAll(qdir, 0o755))
		for _, name := range []string{"00000000000000000000", "00000000000006000000"} {
			p := filepath.Join(qdir, name)
			testutil.NoError(t, os.WriteFile(p, data, 0o644))
			files = append(files, p)
		}
	}
	what, err := damageLog(dir, ChaosEvent{Kind: FaultCorrupt, Damage: "truncate", DamageAt: 0.5, DamageFile: "consumequeue", DamageQueue: 0.9})
	testutil.NoError(t, err)
	for _, p := range files {
		st, _ := os.Stat(p)
		want := int64(len(data))
		if p == files[3] { // queue 1's newest file
			want = 499
		}
		testutil.Equal(t, st.Size(), want, p, what)
	}
}

// A corrupt fault on a name server damages its voter's Raft log anywhere
// in the file, as its plan says; a name server without a voter is left
// alone.
func TestChaosDamageOfARaftLog(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "raft.db")
	data := make([]byte, 64<<10)
	testutil.NoError(t, os.WriteFile(path, data, 0o644))
	what, err := damageRaft(dir, ChaosEvent{Kind: FaultCorrupt, Target: "idc1/namesrv", Damage: "flip", DamageAt: 0.25})
	testutil.NoError(t, err)
	got, _ := os.ReadFile(path)
	changed := -1
	for i, b := range got {
		if b != 0 {
			changed = i
		}
	}
	testutil.Equal(t, changed, (len(data)-1)/4, "the flipped byte", what)
	_, err = damageRaft(dir, ChaosEvent{Kind: FaultCorrupt, Target: "idc1/namesrv", Damage: "truncate", DamageAt: 0.5})
	testutil.NoError(t, err)
	st, _ := os.Stat(path)
	testutil.Equal(t, st.Size(), int64((len(data)-1)/2), "cut at half")
	what, err = damageRaft("", ChaosEvent{Kind: FaultCorrupt, Target: "idc1/namesrv"})
	testutil.NoError(t, err)
	testutil.True(t, strings.Contains(what, "not damaged"), what)
}

// Corrupt faults on voters' Raft logs never come within raftSettle of each
// other: the voter damaged first must have caught up before a second one
// loses its state.
func TestChaosRaftDamageIsNeverCloseTogether(t *testing.T) {
	targets := func(kind string) []string { return []string{"idc1/namesrv", "idc2/namesrv", "idc3/namesrv"} }
	plan := planChaos(7, 30*time.Minute, []string{FaultCorrupt}, targets)
	var last time.Duration = -time.Hour
	n := 0
	for _, e := range plan.Events {
		at := e.At.Duration()
		testutil.True(t, at >= last+raftSettle, "Raft damage at", at, "after the last one ended at", last)
		last = at + e.Hold.Duration()
		n++
	}
	testutil.True(t, n > 10, "the plan has Raft damage", n)
}

// Corrupt faults on copies of one broker group never come within
// corruptSettle of each other (one copy's data lost at a time); copies of
// different groups may be damaged together.
func TestChaosCorruptionOfOneGroupIsNeverCloseTogether(t *testing.T) {
	targets := func(kind string) []string {
		return []string{"idc1/replica-of-broker-idc2", "idc3/replica-of-broker-idc2", "idc2/replica-of-broker-idc1", "idc3/replica-of-broker-idc1"}
	}
	plan := planChaos(11, 30*time.Minute, []string{FaultCorrupt}, targets)
	last := map[string]time.Duration{}
	overlapAcross := false
	var prevEnd time.Duration = -time.Hour
	for _, e := range plan.Events {
		at, lock := e.At.Duration(), copiesLock(e.Target)
		if end, ok := last[lock]; ok {
			testutil.True(t, at >= end+corruptSettle, e.Target, "damaged at", at, "its group's last damage ended at", end)
		}
		if at < prevEnd {
			overlapAcross = true
		}
		last[lock] = at + e.Hold.Duration()
		prevEnd = max(prevEnd, at+e.Hold.Duration())
	}
	testutil.True(t, len(plan.Events) > 20, "damage planned", len(plan.Events))
	testutil.True(t, overlapAcross, "copies of different groups are damaged together sometimes")
	testutil.Equal(t, copiesLock("idc3/broker"), "copies-of-broker-idc3", "the home broker's lock")
}
