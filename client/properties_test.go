package client

import (
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
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

// The SDK's part of a send, from the message to the encoded frame: the
// outgoing send, its UNIQ_KEY, its properties and the request command.
// (The answer adds the decoded command, its ext string, the SendResult,
// and the asyncAttempt and call records: see docs/benchmarks.md.)
func TestSendEncodingAllocationBudget(t *testing.T) {
	const budget = 4
	s := &sender{group: "pg", maxSize: protocol.DefaultMaxMessageSize, compressThreshold: 4096}
	q := writeQueue{broker: &brokerInfo{name: "broker-a", addrs: map[int64]string{protocol.MasterID: "127.0.1.1:10911"}}, queueID: 2}
	msgs := []*Message{{Topic: "BenchTopic", Tags: "TagA", Keys: []string{"bench-1"}, Body: make([]byte, 1024)}}
	buf := make([]byte, 0, 4096)
	now := time.Now()
	allocs := testing.AllocsPerRun(200, func() {
		out, err := s.prepare(msgs)
		if err != nil {
			t.Fatal(err)
		}
		buf = remoting.AppendFrame(buf[:0], sendRequestAt(out, q, true, now))
	})
	if allocs > budget {
		t.Fatalf("preparing and encoding a send: %v allocations, budget %d", allocs, budget)
	}
}
