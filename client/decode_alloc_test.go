package client

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/testutil"
)

// decodeAllocsPerMessage is the budget of decodeMessages per message of a
// batch like the benchmark's (1 KiB body, TAGS, KEYS, UNIQ_KEY): the
// properties string, the properties map (two), the KEYS slice and the
// offset message id. decodeAllocsPerBatch more
// are shared by the batch: the MessageExt values and the slice of pointers
// to them, the topic and the two host strings; bodies alias the answer. Counts are deterministic (times are
// not): a change that adds one fails here and must say why in the budget.
const (
	decodeAllocsPerMessage = 5
	decodeAllocsPerBatch   = 5
)

func TestClientDecodeAllocationBudget(t *testing.T) {
	if testing.Short() || raceDetector {
		t.Skip("allocation counts (the race detector allocates on its own)")
	}
	body := make([]byte, 1024)
	batch := func(n int) []byte {
		var buf []byte
		for i := range n {
			buf = protocol.AppendStoredMessage(buf, &protocol.MessageExt{
				Topic: "BenchTopic", QueueID: 1, QueueOffset: int64(i), CommitLogOffset: int64(i) * 1200, Body: body,
				Properties: protocol.EncodeProperties(map[string]string{
					"TAGS": "TagA", "KEYS": fmt.Sprintf("order-%d", i), "UNIQ_KEY": fmt.Sprintf("7F0000010000%020X", i),
				}),
				BornHost: netip.MustParseAddrPort("127.0.1.1:40000"), StoreHost: netip.MustParseAddrPort("127.0.1.1:10911"),
			})
		}
		return buf
	}
	b := &brokerInfo{name: "broker-idc1", idc: "idc1", addrs: map[int64]string{0: "127.0.1.1:10911"}}
	for _, n := range []int{32, 128} {
		buf := batch(n)
		allocs := testing.AllocsPerRun(20, func() {
			msgs, err := decodeMessages(buf, b)
			if err != nil || len(msgs) != n {
				t.Fatalf("decoded %d of %d messages: %v", len(msgs), n, err)
			}
		})
		budget := float64(decodeAllocsPerMessage*n + decodeAllocsPerBatch)
		t.Logf("decodeMessages of %d: %.0f allocations (%.2f per message)", n, allocs, allocs/float64(n))
		testutil.True(t, allocs <= budget, fmt.Sprintf("%.0f allocations for a batch of %d, budget %.0f", allocs, n, budget))
	}
}
