package store

import "sync"

// recentKeys remembers the UNIQ_KEY hashes (keyHash of topic and key) of the
// newest records this store took — sent here, copied from a master or
// replayed by recovery — so that a send can ask cheaply whether its message
// may be stored already: a client that got no answer sends
// the same message again, and the broker answers such a repeat with the
// stored copy instead of storing a second one (ClaimRecent). The key index
// says it exactly but is scanned a segment at a time, too slow for every
// send.
//
// Two generations of open-addressed slots: inserts go to the current one;
// when it holds recentKeysPerGen hashes the older one is cleared and
// becomes current. So the newest recentKeysPerGen to 2*recentKeysPerGen
// records are remembered, in 8 MiB (allocated at the first insert). The
// generations are interleaved — slot i of both side by side — so that a
// check of both costs one cache miss, not two.
type recentKeys struct {
	mu    sync.Mutex
	slots []uint64 // slot i of generation g at 2*i+g; 0 marks an empty slot
	cur   int
	n     int // hashes in generation cur
}

const (
	recentKeySlots   = 1 << 19
	recentKeysPerGen = recentKeySlots / 2 // at most half full: short probes
)

// slot maps a hash to its start slot; 0 is stored as 1.
func recentSlot(h uint64) (uint64, int) {
	if h == 0 {
		h = 1
	}
	return h, int(h & (recentKeySlots - 1))
}

func (k *recentKeys) add(h uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.addLocked(h)
}

// claim adds h and reports whether it was there already, in one step: of
// two sends of one message at once, exactly one finds it new.
func (k *recentKeys) claim(h uint64) (seen bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.hasLocked(h) {
		return true
	}
	k.addLocked(h)
	return false
}

func (k *recentKeys) addLocked(h uint64) {
	h, i := recentSlot(h)
	if k.slots == nil {
		k.slots = make([]uint64, 2*recentKeySlots)
	}
	if k.n >= recentKeysPerGen {
		k.cur ^= 1
		for j := k.cur; j < len(k.slots); j += 2 {
			k.slots[j] = 0
		}
		k.n = 0
	}
	for ; ; i = (i + 1) & (recentKeySlots - 1) {
		switch k.slots[2*i+k.cur] {
		case h:
			return
		case 0:
			k.slots[2*i+k.cur] = h
			k.n++
			return
		}
	}
}

func (k *recentKeys) has(h uint64) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.hasLocked(h)
}

func (k *recentKeys) hasLocked(h uint64) bool {
	if k.slots == nil {
		return false
	}
	h, start := recentSlot(h)
	for g := range 2 {
		for i := start; ; i = (i + 1) & (recentKeySlots - 1) {
			v := k.slots[2*i+g]
			if v == h {
				return true
			}
			if v == 0 {
				break
			}
		}
	}
	return false
}

// ClaimRecent reports whether a record of topic with UNIQ_KEY uniq may be
// among the newest records this store took or is taking (see recentKeys),
// and notes uniq if not: false means it is not, and a concurrent or later
// call with the same key says true; true means look it up
// (QueryRecentByKey) — its first copy may still be on its way in. An empty
// uniq is never seen.
func (s *Store) ClaimRecent(topic, uniq string) (seen bool) {
	return uniq != "" && s.recent.claim(keyHash(topic, uniq))
}

// primeRecentKeys fills recent, at open, from the newest records' key-index
// entries, so that a restarted broker still knows the messages it stored
// just before (their KEYS words come along; a send whose UNIQ_KEY matches
// one is only looked up, not refused).
func (s *Store) primeRecentKeys() error {
	segs := s.cl.snapshot()
	var tails [][]uint64
	want := recentKeysPerGen
	for i := len(segs) - 1; i >= 0 && want > 0; i-- {
		t, err := segs[i].index.tail(want)
		if err != nil {
			return err
		}
		tails = append(tails, t)
		want -= len(t)
	}
	for i := len(tails) - 1; i >= 0; i-- {
		for _, h := range tails[i] {
			s.recent.add(h)
		}
	}
	return nil
}
