package broker

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
)

// BenchmarkTimerMillion holds one million timers due over the next hour,
// then measures, with all of them pending: the memory they take, the
// delivery accuracy of a burst of 20,000 more timers due over 5 s (4,000
// deliveries a second, 14 times the rate of a million an hour), and how
// long a restart takes to read the million back. Run it once:
//
//	go test -run '^$' -bench TimerMillion -benchtime 1x ./internal/broker
func BenchmarkTimerMillion(b *testing.B) {
	const (
		pending = 1_000_000
		burst   = 20_000
		window  = time.Hour
	)
	for b.Loop() {
		opts := NewOptions()
		opts.Listen, opts.IDC, opts.BrokerName, opts.DataDir = "127.0.1.1:0", "idc1", "broker-timer-bench", b.TempDir()
		opts.SegmentSize = 256 << 20
		opts.TimerMaxDelay = 2 * window
		s, err := New(opts)
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		go s.Run(ctx)
		const topic = "TimerBenchTopic"
		if _, err := s.ensureTopic(newTopicConfig(topic, 1, protocol.PermReadWrite)); err != nil {
			b.Fatal(err)
		}
		send := func(due int64) {
			m := &protocol.MessageExt{Topic: topic, BornTimestamp: time.Now().UnixMilli(), Body: []byte("timer"),
				Properties: protocol.EncodeProperties(map[string]string{protocol.PropertyTimerDeliverMS: strconv.FormatInt(due, 10)})}
			if _, err := s.extra.timers.schedule(ctx, m); err != nil {
				b.Fatal(err)
			}
		}

		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		first := start.Add(time.Minute).UnixMilli() // none is due during the measurement
		for i := range pending {
			send(first + int64(i)*window.Milliseconds()/pending)
		}
		scheduleTime := time.Since(start)
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(pending)/scheduleTime.Seconds(), "timers-scheduled/s")
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/pending, "heap-B/pending-timer")

		burstStart := time.Now().Add(time.Second).UnixMilli()
		for i := range burst {
			send(burstStart + int64(i)*5000/burst)
		}
		deadline := time.Now().Add(60 * time.Second)
		for s.store.MaxOffset(topic, 0) < burst && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		var late []time.Duration
		for off := int64(0); off < s.store.MaxOffset(topic, 0); {
			res := s.store.GetMessages(topic, 0, off, maxPullMessages, maxPullBytes, nil)
			if len(res.Messages) == 0 {
				break
			}
			for _, rec := range res.Messages {
				m, _, err := protocol.DecodeStoredMessage(rec, false, false)
				if err != nil {
					b.Fatal(err)
				}
				due, _ := strconv.ParseInt(propertyOr(m.Properties, protocol.PropertyTimerOutMS, "0"), 10, 64)
				if m.StoreTimestamp < due {
					b.Fatalf("a timer was delivered %d ms early", due-m.StoreTimestamp)
				}
				late = append(late, time.Duration(m.StoreTimestamp-due)*time.Millisecond)
			}
			off = res.NextBeginOffset
		}
		if len(late) != burst {
			b.Fatalf("%d of %d burst timers delivered", len(late), burst)
		}
		b.ReportMetric(float64(percentile(late, 0.5).Milliseconds()), "burst-p50-late-ms")
		b.ReportMetric(float64(percentile(late, 0.99).Milliseconds()), "burst-p99-late-ms")
		b.ReportMetric(float64(percentile(late, 1).Milliseconds()), "burst-max-late-ms")

		cancel()
		s.Shutdown()
		start = time.Now()
		s2, err := New(opts)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(time.Since(start).Seconds(), "restart-s")
		if n := s2.extra.timers.pendingCount(); n != pending {
			b.Fatalf("%d timers held after the restart, want %d", n, pending)
		}
		s2.Shutdown()
	}
}
