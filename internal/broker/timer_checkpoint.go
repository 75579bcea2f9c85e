package broker

import (
	"encoding/binary"
	"math/bits"
)

// deliveredSet is the set of timer-queue offsets already delivered: every
// offset below base, and bit i of words for offset base+i. base moves up by
// whole words as the oldest timers are delivered, so the set costs one bit
// per timer between the oldest undelivered timer and the newest delivered
// one (125 KiB for a million).
type deliveredSet struct {
	base  int64
	words []uint64
}

func (d *deliveredSet) contains(off int64) bool {
	if off < d.base {
		return true
	}
	i := off - d.base
	if i/64 >= int64(len(d.words)) {
		return false
	}
	return d.words[i/64]&(1<<(i%64)) != 0
}

func (d *deliveredSet) mark(off int64) {
	if off < d.base {
		return
	}
	i := off - d.base
	for i/64 >= int64(len(d.words)) {
		d.words = append(d.words, 0)
	}
	d.words[i/64] |= 1 << (i % 64)
	n := 0
	for n < len(d.words) && d.words[n] == ^uint64(0) {
		n++
	}
	if n > 0 {
		d.words = append(d.words[:0], d.words[n:]...)
		d.base += int64(n) * 64
	}
}

// delivered counts the offsets marked at or above base.
func (d *deliveredSet) delivered() int {
	n := 0
	for _, w := range d.words {
		n += bits.OnesCount64(w)
	}
	return n
}

// timerCheckpoint is the persisted form of a deliveredSet
// (config/timerCheckpoint.json): Base and the bitmap, little-endian words.
type timerCheckpoint struct {
	Base      int64  `json:"base"`
	Delivered []byte `json:"delivered"`
}

func newTimerCheckpoint(d *deliveredSet) timerCheckpoint {
	b := make([]byte, 8*len(d.words))
	for i, w := range d.words {
		binary.LittleEndian.PutUint64(b[8*i:], w)
	}
	return timerCheckpoint{Base: d.base, Delivered: b}
}

// set rebuilds the deliveredSet; a trailing partial word is ignored (it is
// never written).
func (c timerCheckpoint) set() deliveredSet {
	d := deliveredSet{base: c.Base, words: make([]uint64, len(c.Delivered)/8)}
	for i := range d.words {
		d.words[i] = binary.LittleEndian.Uint64(c.Delivered[8*i:])
	}
	return d
}
