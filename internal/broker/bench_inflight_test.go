package broker

import (
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/store"
)

// BenchmarkBrokerSendInflight64 keeps 64 SEND_MESSAGE requests of 1 KiB in
// flight on one connection with InvokeAsync (an asynchronous producer),
// flush async: the load of the issue 11 comparison. Client and broker share
// the process, so ns/op is both sides' cost per message.
func BenchmarkBrokerSendInflight64(b *testing.B) {
	benchSendInflight64(b, benchBroker(b, store.FlushAsync))
}

// BenchmarkBrokerSendInflight64Sync is BenchmarkBrokerSendInflight64 with
// --flush sync (the "fsync before ack" case of the comparison); fsyncs/op
// says how many messages one fsync acknowledged.
func BenchmarkBrokerSendInflight64Sync(b *testing.B) {
	var fsyncs atomic.Int64
	s := benchBrokerWith(b, store.FlushSync, func(o *Options) {
		o.commitLogSync = func(f *os.File) error {
			fsyncs.Add(1)
			return f.Sync()
		}
	})
	f0 := fsyncs.Load()
	benchSendInflight64(b, s)
	b.ReportMetric(float64(fsyncs.Load()-f0)/float64(b.N), "fsyncs/op")
}

// benchSendInflight64 is the body of the in-flight benchmarks, against s.
func benchSendInflight64(b *testing.B, s *Server) {
	const inflight = 64
	c := benchClient(b, s.Addr())
	conn, err := c.Conn(b.Context(), s.Addr())
	if err != nil {
		b.Fatal(err)
	}
	body := make([]byte, benchBodySize)
	window := make(chan struct{}, inflight)
	var wg sync.WaitGroup
	var failed atomic.Value
	b.SetBytes(benchBodySize)
	b.ReportAllocs()
	cpu0 := processCPU()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		window <- struct{}{}
		wg.Add(1)
		req := remoting.NewRequest(int32(protocol.SendMessage), benchSendExt(int32(i%benchQueues), int64(i)), body)
		conn.InvokeAsync(req, 10*time.Second, func(resp *remoting.Command, err error) {
			defer func() { <-window; wg.Done() }()
			if err != nil {
				failed.Store(err.Error())
			} else if resp.Code != int32(protocol.Success) {
				failed.Store(resp.Remark)
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
	if f := failed.Load(); f != nil {
		b.Fatalf("send failed: %v", f)
	}
}

// processCPU is the CPU time (user and system) this process has used: on a
// shared machine the CPU per message is steadier than the wall time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
