package store

import (
	"fmt"
	"testing"

	"github.com/zonemq/zonemq/internal/testutil"
)

// A store remembers the UNIQ_KEYs of the records it took — sent, copied
// from a master, or stored before a restart — so a send can ask whether its
// message may be stored already (MaybeStored).
func TestStoreRemembersRecentUniqKeys(t *testing.T) {
	o, _ := testOptions(t)
	s := openStore(t, o)
	uniq := func(i int) string { return fmt.Sprintf("U%08d", i) }
	for i := range 20 {
		mustPut(t, s, newMsg("T", 0, "x", map[string]string{"KEYS": "k", "UNIQ_KEY": uniq(i)}))
	}
	for i := range 20 {
		if !s.MaybeStored("T", uniq(i)) {
			t.Fatalf("the store forgot %s", uniq(i))
		}
	}
	if s.MaybeStored("T", uniq(99)) || s.MaybeStored("Other", uniq(0)) || s.MaybeStored("T", "") {
		t.Fatal("the store remembers a key it never took (or another topic's)")
	}

	ro, _ := testOptions(t)
	replica := openStore(t, ro)
	copyLog(t, s, replica, 1000)
	if !replica.MaybeStored("T", uniq(7)) {
		t.Fatal("a replica forgot a key it copied")
	}

	testutil.NoError(t, s.Close(), "Close")
	again := openStore(t, o)
	if !again.MaybeStored("T", uniq(19)) || !again.MaybeStored("T", uniq(0)) {
		t.Fatal("a reopened store forgot the keys stored before")
	}
}

// The window: the newest recentKeysPerGen hashes always, none older than
// 2*recentKeysPerGen.
func TestRecentKeysWindow(t *testing.T) {
	var k recentKeys
	h := func(i int) uint64 { return uint64(i+1) * 0x9E3779B97F4A7C15 }
	for i := range 2 * recentKeysPerGen {
		k.add(h(i))
	}
	for i := range 2 * recentKeysPerGen {
		if !k.has(h(i)) {
			t.Fatalf("hash %d of %d forgotten", i, 2*recentKeysPerGen)
		}
	}
	k.add(h(2 * recentKeysPerGen))
	if k.has(h(0)) || k.has(h(recentKeysPerGen-1)) {
		t.Fatal("the oldest generation was not dropped")
	}
	if !k.has(h(recentKeysPerGen)) || !k.has(h(2*recentKeysPerGen)) {
		t.Fatal("the newest hashes were dropped")
	}
}
