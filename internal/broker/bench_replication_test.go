package broker

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/store"
)

// BenchmarkReplicationSend measures SEND_MESSAGE round trips of 1 KiB
// bodies with 32×GOMAXPROCS callers in flight on one connection, against a
// master alone (none), a master with a replica in another IDC that follows
// (async), and one that acknowledges only once the replica holds the
// message (sync). Both brokers flush asynchronously, so the difference is
// the replication itself; the replica is fed in batches of whatever was
// appended since its last fetch.
func BenchmarkReplicationSend(b *testing.B) {
	for _, mode := range []string{"none", ReplicationAsync, ReplicationSync} {
		b.Run("replication="+mode, func(b *testing.B) {
			master := benchBrokerWith(b, store.FlushAsync, func(o *Options) {
				if mode != "none" {
					o.Replication = mode
				}
			})
			if mode != "none" {
				ropts := NewOptions()
				ropts.Listen = "127.0.2.1:0"
				ropts.IDC = "idc2"
				ropts.BrokerName = master.opts.BrokerName
				ropts.BrokerID = 1
				ropts.MasterAddr = master.Addr()
				ropts.DataDir = b.TempDir()
				ropts.SegmentSize = master.opts.SegmentSize
				ropts.Logger = testLogger()
				replica, err := New(ropts)
				if err != nil {
					b.Fatal(err)
				}
				done := make(chan error, 1)
				go func() { done <- replica.Run(context.Background()) }()
				b.Cleanup(func() { replica.Shutdown(); <-done })
				deadline := time.Now().Add(10 * time.Second)
				for master.InSyncReplicas() < 1 {
					if time.Now().After(deadline) {
						b.Fatal("the replica did not join the in-sync set")
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
			c := benchClient(b, master.Addr())
			body := make([]byte, benchBodySize)
			var seq atomic.Int64
			var latMu sync.Mutex
			var lats []time.Duration
			// The replica's lag behind the master's log end, sampled.
			var maxLag atomic.Int64
			stopLag := make(chan struct{})
			lagDone := make(chan struct{})
			go func() {
				defer close(lagDone)
				t := time.NewTicker(5 * time.Millisecond)
				defer t.Stop()
				for {
					select {
					case <-stopLag:
						return
					case <-t.C:
					}
					end := master.store.CommitLogMaxOffset()
					for _, st := range master.repl.replicaStates() {
						if lag := end - st.Acked; lag > maxLag.Load() {
							maxLag.Store(lag)
						}
					}
				}
			}()
			b.SetBytes(benchBodySize)
			b.SetParallelism(32)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				var mine []time.Duration
				for pb.Next() {
					n := seq.Add(1)
					req := remoting.NewRequest(int32(protocol.SendMessage), benchSendExt(int32(n%benchQueues), n), body)
					began := time.Now()
					resp, err := c.Invoke(ctx, master.Addr(), req)
					if err != nil {
						b.Fatal(err)
					}
					mine = append(mine, time.Since(began))
					if resp.Code != int32(protocol.Success) {
						b.Fatalf("send: %s (%s)", protocol.ResponseCode(resp.Code), resp.Remark)
					}
				}
				latMu.Lock()
				lats = append(lats, mine...)
				latMu.Unlock()
			})
			b.StopTimer()
			close(stopLag)
			<-lagDone
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msg/s")
			slices.Sort(lats)
			if len(lats) > 0 {
				b.ReportMetric(float64(lats[len(lats)*99/100].Microseconds())/1000, "p99-ms")
			}
			if mode != "none" {
				b.ReportMetric(float64(maxLag.Load())/1024, "max-lag-KiB")
			}
		})
	}
}
