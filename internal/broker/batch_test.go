package broker

import (
	"bytes"
	"testing"
)

// FuzzBrokerDecodeBatch feeds arbitrary SEND_BATCH_MESSAGE bodies to the
// decoder: it must never panic, and whatever it accepts must re-encode to
// the same bytes.
func FuzzBrokerDecodeBatch(f *testing.F) {
	f.Add(encodeBatchItem(0, []byte("hello"), "TAGS\x01a\x02"))
	f.Add(append(encodeBatchItem(1, nil, ""), encodeBatchItem(2, []byte("x"), "KEYS\x01k\x02")...))
	f.Add([]byte{0, 0, 0, 22, 0, 0, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, body []byte) {
		items, err := decodeBatch(body)
		if err != nil {
			return
		}
		var re []byte
		for _, it := range items {
			re = append(re, encodeBatchItem(it.flag, it.body, it.properties)...)
		}
		// MAGICCODE and BODYCRC are not kept: compare with them zeroed.
		want := append([]byte(nil), body...)
		for off := 0; off < len(want); {
			total := int(uint32(want[off])<<24 | uint32(want[off+1])<<16 | uint32(want[off+2])<<8 | uint32(want[off+3]))
			copy(want[off+4:off+12], make([]byte, 8))
			off += total
		}
		if !bytes.Equal(re, want) {
			t.Fatalf("re-encoded %x, want %x", re, want)
		}
	})
}
