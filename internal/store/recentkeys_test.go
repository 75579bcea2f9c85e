package store

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/zonemq/zonemq/internal/testutil"
)

// A store remembers the UNIQ_KEYs of the records it took — sent, copied
// from a master, or stored before a restart — so a send can ask whether its
// message may be stored already (ClaimRecent), and of two sends of one
// message at once exactly one finds it new.
func TestStoreRemembersRecentUniqKeys(t *testing.T) {
	o, _ := testOptions(t)
	s := openStore(t, o)
	uniq := func(i int) string { return fmt.Sprintf("U%08d", i) }
	for i := range 20 {
		mustPut(t, s, newMsg("T", 0, "x", map[string]string{"KEYS": "k", "UNIQ_KEY": uniq(i)}))
	}
	for i := range 20 {
		if !s.ClaimRecent("T", uniq(i)) {
			t.Fatalf("the store forgot %s", uniq(i))
		}
	}
	if s.ClaimRecent("T", uniq(99)) || s.ClaimRecent("Other", uniq(0)) || s.ClaimRecent("T", "") {
		t.Fatal("the store remembers a key it never took (or another topic's)")
	}
	if !s.ClaimRecent("T", uniq(99)) || s.ClaimRecent("T", "") {
		t.Fatal("a claimed key is not seen by the next claim (or an empty one is)")
	}
	var seen atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if s.ClaimRecent("T", "twins") {
				seen.Add(1)
			}
		})
	}
	wg.Wait()
	testutil.Equal(t, seen.Load(), int32(7), "claims of one key at once that found it taken")

	ro, _ := testOptions(t)
	replica := openStore(t, ro)
	copyLog(t, s, replica, 1000)
	if !replica.ClaimRecent("T", uniq(7)) {
		t.Fatal("a replica forgot a key it copied")
	}

	testutil.NoError(t, s.Close(), "Close")
	again := openStore(t, o)
	if !again.ClaimRecent("T", uniq(19)) || !again.ClaimRecent("T", uniq(0)) {
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

// BenchmarkRecentKeysClaim is the per-send cost of the repeat check with
// both generations full: one new hash claimed per op.
func BenchmarkRecentKeysClaim(b *testing.B) {
	var k recentKeys
	h := func(i int) uint64 { return uint64(i+1) * 0x9E3779B97F4A7C15 }
	for i := range 2 * recentKeysPerGen {
		k.add(h(i))
	}
	b.ResetTimer()
	for i := range b.N {
		k.claim(h(2*recentKeysPerGen + i))
	}
}
