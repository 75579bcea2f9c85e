package broker

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/store"
)

// Benchmarks of the broker's hot path as a client sees it: a real broker on
// loopback, raw remoting requests over one multiplexed connection (as one
// producer or consumer process has), so the figures cover framing, header
// decoding, the handler, the store and the response. No name server: the
// broker serves without one.

const (
	benchTopic     = "BenchTopic"
	benchQueues    = 8
	benchBodySize  = 1024
	benchPullBatch = 32
)

// benchBroker starts a broker on 127.0.1.1:0 with production-like files
// (64 MiB segments keep the disk use moderate) and stops it after the
// benchmark.
func benchBroker(b *testing.B, flush store.FlushMode) *Server {
	b.Helper()
	return benchBrokerWith(b, flush, nil)
}

// benchBrokerWith is benchBroker with options adjusted before New (settings
// such as Replication decide how requests are handled when the broker is
// built).
func benchBrokerWith(b *testing.B, flush store.FlushMode, mutate func(*Options)) *Server {
	b.Helper()
	opts := NewOptions()
	opts.Listen = "127.0.1.1:0"
	opts.IDC = "idc1"
	opts.BrokerName = "bench-broker"
	opts.DataDir = b.TempDir()
	opts.SegmentSize = 64 << 20
	opts.Flush = flush
	opts.Logger = testLogger()
	if mutate != nil {
		mutate(&opts)
	}
	s, err := New(opts)
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(context.Background()) }()
	b.Cleanup(func() {
		s.Shutdown()
		select {
		case err := <-done:
			if err != nil {
				b.Errorf("broker Run: %v", err)
			}
		case <-time.After(15 * time.Second):
			b.Errorf("broker did not stop within 15 s")
		}
	})
	return s
}

// benchClient returns a remoting client with its connection to addr open,
// and a topic of benchQueues queues created.
func benchClient(b *testing.B, addr string) *remoting.Client {
	b.Helper()
	c := remoting.NewClient(remoting.ClientOptions{})
	b.Cleanup(func() { c.Close() })
	h := protocol.CreateTopicRequestHeader{Topic: benchTopic, ReadQueueNums: benchQueues, WriteQueueNums: benchQueues, Perm: 6}
	resp := benchInvoke(b, c, addr, protocol.UpdateAndCreateTopic, h.Ext(), nil)
	if resp.Code != int32(protocol.Success) {
		b.Fatalf("create topic: %s (%s)", protocol.ResponseCode(resp.Code), resp.Remark)
	}
	return c
}

func benchInvoke(b *testing.B, c *remoting.Client, addr string, code protocol.RequestCode, ext map[string]string, body []byte) *remoting.Command {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Invoke(ctx, addr, remoting.NewRequest(int32(code), ext, body))
	if err != nil {
		b.Fatalf("%s: %v", code, err)
	}
	return resp
}

// benchSendExt is the header of a SEND_MESSAGE as the Go client fills it:
// TAGS, KEYS, UNIQ_KEY and WAIT properties, a fixed queue.
func benchSendExt(queueID int32, seq int64) map[string]string {
	h := protocol.SendMessageRequestHeader{
		ProducerGroup: "bench_pg", Topic: benchTopic, DefaultTopic: protocol.AutoCreateTopicKey, DefaultTopicQueueNums: 4,
		QueueID: queueID, BornTimestamp: time.Now().UnixMilli(),
		Properties: protocol.EncodeProperties(map[string]string{
			protocol.PropertyTags: "TagA", protocol.PropertyKeys: fmt.Sprintf("order-%d", seq),
			protocol.PropertyUniqClientMessageID: fmt.Sprintf("7F0000010000%020X", seq), "WAIT": "true",
		}),
	}
	return h.Ext()
}

// BenchmarkBrokerSendSync measures SEND_MESSAGE round trips with 1 KiB
// bodies from 4×GOMAXPROCS callers sharing one connection (a producer
// process with several sending goroutines), with asynchronous flush
// (acknowledged from the page cache) and synchronous flush (acknowledged
// after fsync; sends in flight together share one).
func BenchmarkBrokerSendSync(b *testing.B) {
	for _, mode := range []store.FlushMode{store.FlushAsync, store.FlushSync} {
		b.Run("flush="+mode.String(), func(b *testing.B) {
			s := benchBroker(b, mode)
			c := benchClient(b, s.Addr())
			body := make([]byte, benchBodySize)
			for i := range body {
				body[i] = byte('a' + i%26)
			}
			var seq atomic.Int64
			b.SetBytes(benchBodySize)
			b.ReportAllocs()
			b.SetParallelism(4)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				for pb.Next() {
					n := seq.Add(1)
					req := remoting.NewRequest(int32(protocol.SendMessage), benchSendExt(int32(n%benchQueues), n), body)
					resp, err := c.Invoke(ctx, s.Addr(), req)
					if err != nil {
						b.Fatal(err)
					}
					if resp.Code != int32(protocol.Success) {
						b.Fatalf("send: %s (%s)", protocol.ResponseCode(resp.Code), resp.Remark)
					}
				}
			})
		})
	}
}

// BenchmarkBrokerPull measures PULL_MESSAGE round trips of 32 stored 1 KiB
// messages (found in the page cache) from parallel callers sharing one
// connection: consume-queue lookup, commit-log reads, tag filtering and the
// response body.
func BenchmarkBrokerPull(b *testing.B) {
	const stored = 4096 // per queue, read round and round
	s := benchBroker(b, store.FlushAsync)
	c := benchClient(b, s.Addr())
	benchFillQueues(b, c, s.Addr(), stored, func(int) map[string]string {
		return map[string]string{protocol.PropertyTags: "TagA"}
	})
	benchPullLoop(b, c, s.Addr(), stored, "TagA", protocol.ExpressionTypeTag)
}

// benchFillQueues stores stored 1 KiB messages in each bench queue, in
// batches to keep the set-up short; props gives message i's properties.
func benchFillQueues(b *testing.B, c *remoting.Client, addr string, stored int, props func(i int) map[string]string) {
	b.Helper()
	body := make([]byte, benchBodySize)
	for q := int32(0); q < benchQueues; q++ {
		var batch []byte
		for i := 0; i < stored; i++ {
			batch = append(batch, encodeBatchItem(0, body, protocol.EncodeProperties(props(i)))...)
			if (i+1)%256 == 0 {
				h := protocol.SendMessageRequestHeaderV2{SendMessageRequestHeader: protocol.SendMessageRequestHeader{
					ProducerGroup: "bench_pg", Topic: benchTopic, DefaultTopic: protocol.AutoCreateTopicKey,
					DefaultTopicQueueNums: 4, QueueID: q, BornTimestamp: time.Now().UnixMilli(), Batch: true,
				}}
				resp := benchInvoke(b, c, addr, protocol.SendBatchMessage, h.Ext(), batch)
				if resp.Code != int32(protocol.Success) {
					b.Fatalf("fill queue %d: %s (%s)", q, protocol.ResponseCode(resp.Code), resp.Remark)
				}
				batch = batch[:0]
			}
		}
	}
}

// benchPullLoop measures pulls of benchPullBatch messages from parallel
// callers, round and round the stored messages, with the subscription sub.
func benchPullLoop(b *testing.B, c *remoting.Client, addr string, stored int, sub, exprType string) {
	b.Helper()
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
				QueueOffset: (n / benchQueues * benchPullBatch) % int64(stored-benchPullBatch), MaxMsgNums: benchPullBatch,
				SysFlag: protocol.PullFlagSubscription, Subscription: sub, ExpressionType: exprType,
			}
			resp, err := c.Invoke(ctx, addr, remoting.NewRequest(int32(protocol.PullMessage), h.Ext(), nil))
			if err != nil {
				b.Fatal(err)
			}
			if resp.Code != int32(protocol.Success) || len(resp.Body) < benchPullBatch*benchBodySize {
				b.Fatalf("pull: %s (%s), %d bytes", protocol.ResponseCode(resp.Code), resp.Remark, len(resp.Body))
			}
		}
	})
}
