package broker

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/store"
)

// BenchmarkBrokerPullSQL92 is BenchmarkBrokerPull with a SQL92
// subscription that every message matches, so the difference is the cost
// of reading and evaluating each message's properties.
func BenchmarkBrokerPullSQL92(b *testing.B) {
	const stored = 4096
	s := benchBroker(b, store.FlushAsync)
	c := benchClient(b, s.Addr())
	body := make([]byte, benchBodySize)
	for q := int32(0); q < benchQueues; q++ {
		var batch []byte
		for i := 0; i < stored; i++ {
			props := map[string]string{protocol.PropertyTags: "TagA", "a": strconv.Itoa(i % 10), "b": "x"}
			batch = append(batch, encodeBatchItem(0, body, protocol.EncodeProperties(props))...)
			if (i+1)%256 == 0 {
				h := protocol.SendMessageRequestHeaderV2{SendMessageRequestHeader: protocol.SendMessageRequestHeader{
					ProducerGroup: "bench_pg", Topic: benchTopic, DefaultTopic: protocol.AutoCreateTopicKey,
					DefaultTopicQueueNums: 4, QueueID: q, BornTimestamp: time.Now().UnixMilli(), Batch: true,
				}}
				resp := benchInvoke(b, c, s.Addr(), protocol.SendBatchMessage, h.Ext(), batch)
				if resp.Code != int32(protocol.Success) {
					b.Fatalf("fill queue %d: %s (%s)", q, protocol.ResponseCode(resp.Code), resp.Remark)
				}
				batch = batch[:0]
			}
		}
	}
	var next atomic.Int64
	b.SetBytes(benchPullBatch * benchBodySize)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			n := next.Add(1)
			h := protocol.PullMessageRequestHeader{
				ConsumerGroup: "bench_cg", Topic: benchTopic, QueueID: int32(n % benchQueues),
				QueueOffset: (n / benchQueues * benchPullBatch) % (stored - benchPullBatch), MaxMsgNums: benchPullBatch,
				SysFlag: protocol.PullFlagSubscription, Subscription: "a >= 0 AND b = 'x'", ExpressionType: protocol.ExpressionTypeSQL92,
			}
			resp, err := c.Invoke(ctx, s.Addr(), remoting.NewRequest(int32(protocol.PullMessage), h.Ext(), nil))
			if err != nil {
				b.Fatal(err)
			}
			if resp.Code != int32(protocol.Success) || len(resp.Body) < benchPullBatch*benchBodySize {
				b.Fatalf("pull: %s (%s), %d bytes", protocol.ResponseCode(resp.Code), resp.Remark, len(resp.Body))
			}
		}
	})
}
