package store

import (
	"hash/fnv"
	"io"
	"slices"
	"testing"
)

// keyHash values are on disk in the key index: the hand-written FNV-1a must
// give exactly what hash/fnv gives.
func TestKeyHashMatchesFNV1a(t *testing.T) {
	for _, c := range [][2]string{{"", ""}, {"T", "k"}, {"TopicTest", "order-42"}, {"%RETRY%g", "7F0000010000ABCDEF"}, {"t\x01", "\xff\x00"}} {
		h := fnv.New64a()
		io.WriteString(h, c[0])
		h.Write([]byte{1})
		io.WriteString(h, c[1])
		if got, want := keyHash(c[0], c[1]), h.Sum64(); got != want {
			t.Errorf("keyHash(%q, %q) = %x, hash/fnv says %x", c[0], c[1], got, want)
		}
	}
}

func TestMessageKeysSplitsAndDeduplicates(t *testing.T) {
	props := "KEYS\x01a  b a c\x02UNIQ_KEY\x01b\x02"
	got, uniq := messageKeys(props)
	if want := []string{"a", "b", "c"}; !slices.Equal(got, want) || uniq != "b" {
		t.Fatalf("messageKeys = %q, %q, want %q, \"b\"", got, uniq, want)
	}
	if allocs := testing.AllocsPerRun(100, func() { keyHash("TopicTest", "order-42") }); allocs != 0 {
		t.Fatalf("keyHash allocates %.0f times", allocs)
	}
}
