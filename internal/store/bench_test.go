package store

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/zonemq/zonemq/internal/protocol"
)

// benchStore opens a store with production-like files (64 MiB segments keep
// the benchmark's disk use moderate) and the given flush mode.
func benchStore(b *testing.B, mode FlushMode) *Store {
	b.Helper()
	o := NewOptions()
	o.Dir = b.TempDir()
	o.SegmentSize = 64 << 20
	o.Flush = mode
	o.StoreHost = netip.MustParseAddrPort("127.0.0.1:10911")
	s, err := Open(o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// benchMessage looks like what the Go client sends: 1 KiB body, TAGS, KEYS
// and a UNIQ_KEY.
func benchMessage(queueID int32, i int) *protocol.MessageExt {
	return &protocol.MessageExt{
		Topic:         "BenchTopic",
		QueueID:       queueID,
		Body:          []byte(strings.Repeat("b", 1024)),
		BornTimestamp: 1_700_000_000_000,
		BornHost:      netip.MustParseAddrPort("127.0.0.2:40000"),
		Properties: protocol.EncodeProperties(map[string]string{
			"TAGS": "TagA", "KEYS": fmt.Sprintf("order-%d", i), "UNIQ_KEY": fmt.Sprintf("7F0000010000%020X", i), "WAIT": "true",
		}),
	}
}

func BenchmarkCommitLogAppendAsync(b *testing.B) {
	s := benchStore(b, FlushAsync)
	m := benchMessage(0, 0)
	b.SetBytes(int64(len(m.Body)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m.QueueID = int32(i % 8)
		if _, err := s.PutMessage(context.Background(), m); err != nil {
			b.Fatal(err)
		}
	}
}

// Several writers contend for the append lock (encoding happens outside it).
func BenchmarkCommitLogAppendAsyncParallel(b *testing.B) {
	s := benchStore(b, FlushAsync)
	b.SetBytes(1024)
	b.ReportAllocs()
	b.SetParallelism(4)
	b.RunParallel(func(pb *testing.PB) {
		m := benchMessage(0, 0)
		i := 0
		for pb.Next() {
			m.QueueID = int32(i % 8)
			i++
			if _, err := s.PutMessage(context.Background(), m); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// Sync flush with GOMAXPROCS×parallelism concurrent writers: the fsyncs/op
// figure shows group commit (1 would mean one fsync per put).
func BenchmarkCommitLogAppendSync(b *testing.B) {
	for _, par := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("parallelism=%d", par), func(b *testing.B) {
			s := benchStore(b, FlushSync)
			before := s.fsyncCount()
			b.SetBytes(1024)
			b.ReportAllocs()
			b.SetParallelism(par)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				m := benchMessage(0, 0)
				i := 0
				for pb.Next() {
					m.QueueID = int32(i % 8)
					i++
					res, err := s.PutMessage(context.Background(), m)
					if err != nil || res.Status != PutOK {
						b.Errorf("put: %v %v", res.Status, err)
						return
					}
				}
			})
			b.ReportMetric(float64(s.fsyncCount()-before)/float64(b.N), "fsyncs/op")
		})
	}
}

// Pull-sized reads (32 records) from a queue of 1 KiB messages, unfiltered
// and with a tag filter matching one in four.
func BenchmarkConsumeQueueRead(b *testing.B) {
	s := benchStore(b, FlushAsync)
	const n = 20_000
	for i := 0; i < n; i++ {
		m := benchMessage(0, i)
		if i%4 != 0 {
			m.Properties = protocol.EncodeProperties(map[string]string{"TAGS": "TagB"})
		}
		if _, err := s.PutMessage(context.Background(), m); err != nil {
			b.Fatal(err)
		}
	}
	tagA := protocol.TagsHashCode("TagA")
	for _, bc := range []struct {
		name   string
		filter func(int64) bool
	}{{"all", nil}, {"tagFilter", func(c int64) bool { return c == tagA }}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			off := int64(0)
			msgs := 0
			for i := 0; i < b.N; i++ {
				res := s.GetMessages("BenchTopic", 0, off, 32, 0, bc.filter)
				if res.Status != Found {
					b.Fatalf("status %v at %d", res.Status, off)
				}
				msgs += len(res.Messages)
				off = res.NextBeginOffset
				if off >= n-32*4 {
					off = 0
				}
			}
			b.ReportMetric(float64(msgs)/float64(b.N), "msgs/op")
		})
	}
}

// Pull-sized reads (32 records) of a topic whose four queues were written in
// turn, as a producer spreading its sends writes them: the records of one
// queue lie between the other queues' records. The queues are read in turn,
// as their consumers' pulls come.
func BenchmarkGetMessagesInterleaved(b *testing.B) {
	s := benchStore(b, FlushAsync)
	const queues, perQueue = 4, 5_000
	for i := 0; i < queues*perQueue; i++ {
		if _, err := s.PutMessage(context.Background(), benchMessage(int32(i%queues), i)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.SetBytes(32 * 1024)
	b.ResetTimer()
	var next [queues]int64
	for i := 0; i < b.N; i++ {
		q := int32(i % queues)
		res := s.GetMessages("BenchTopic", q, next[q], 32, 0, nil)
		if res.Status != Found || len(res.Messages) != 32 {
			b.Fatalf("status %v, %d messages at %d", res.Status, len(res.Messages), next[q])
		}
		next[q] = res.NextBeginOffset
		if next[q] >= perQueue-32 {
			next[q] = 0
		}
	}
}
