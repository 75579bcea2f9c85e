package client

import (
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
)

// The map-free encoding of a send's properties must give the very string
// the general one (a map, sorted by name) gives.
func TestEncodePropertiesMatchesTheMapEncoding(t *testing.T) {
	at := time.UnixMilli(1_800_000_000_000).Add(300 * time.Microsecond)
	msgs := []*Message{
		{},
		{Tags: "TagA"},
		{Keys: []string{"k1", "k2"}},
		{Tags: "t", Keys: []string{"order-1"}, DelayLevel: 3},
		{DeliverAt: at, Keys: []string{"k"}},
		{Properties: map[string]string{"color": "red", "ZZ": "1"}, Tags: "t"},
	}
	for i, m := range msgs {
		for _, uniq := range []string{"", "7F0000010001000000000000000000A1"} {
			got := m.encodeProperties(uniq)
			want := protocol.EncodeProperties(m.wireProperties(uniq))
			if got != want {
				t.Errorf("message %d, uniq %q: encodeProperties = %q, want %q", i, uniq, got, want)
			}
		}
	}
}

// A message without user properties costs one allocation: the string.
func TestEncodePropertiesAllocatesOnce(t *testing.T) {
	m := &Message{Tags: "TagA", Keys: []string{"bench-1"}}
	allocs := testing.AllocsPerRun(100, func() { m.encodeProperties("7F0000010001000000000000000000A1") })
	if allocs != 1 {
		t.Fatalf("encodeProperties: %v allocations, want 1", allocs)
	}
}
