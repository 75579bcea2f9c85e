package broker

import (
	"strconv"
	"testing"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/store"
)

// BenchmarkBrokerPullSQL92 is BenchmarkBrokerPull with a SQL92
// subscription that every message matches, so the difference is the cost
// of reading and evaluating each message's properties.
func BenchmarkBrokerPullSQL92(b *testing.B) {
	const stored = 4096
	s := benchBroker(b, store.FlushAsync)
	c := benchClient(b, s.Addr())
	benchFillQueues(b, c, s.Addr(), stored, func(i int) map[string]string {
		return map[string]string{protocol.PropertyTags: "TagA", "a": strconv.Itoa(i % 10), "b": "x"}
	})
	benchPullLoop(b, c, s.Addr(), stored, "a >= 0 AND b = 'x'", protocol.ExpressionTypeSQL92)
}
