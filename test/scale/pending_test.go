package scale

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// BenchmarkTimersPending is the curve "timer messages pending" of issue
// 25: one broker process holding N timer messages due in two days
// (TIMER_DELAY_SEC), then restarted after kill -9 and after a clean stop.
// For each N
//
//	fill-msg/s     how fast they were sent (64 in flight)
//	broker-MiB     the broker's resident memory holding them
//	kill9-send-s, stop-send-s   from the new process's start until a plain send succeeds
//
// ZONEMQ_SCALE_TIMERS overrides the counts (comma-separated).
func BenchmarkTimersPending(b *testing.B) {
	for _, n := range envInts("ZONEMQ_SCALE_TIMERS", []int{1, 1000, 100000, 1000000}) {
		b.Run(fmt.Sprintf("timers=%d", n), func(b *testing.B) {
			for range b.N {
				pendingPoint(b, "timers-pending", n, func(h *protocol.SendMessageRequestHeader) {
					h.Properties = protocol.EncodeProperties(map[string]string{protocol.PropertyTimerDelaySec: strconv.Itoa(2 * 86400)})
				})
			}
		})
	}
	plot(b, "timers-pending", "timer messages pending")
}

// BenchmarkTransactionsHalfOpen is the curve "transactions half-open" of
// issue 25: one broker process holding N half messages whose producer
// never ends them (nor answers a check: it is gone), then restarted after
// kill -9 and after a clean stop. The same figures as
// BenchmarkTimersPending. ZONEMQ_SCALE_HALF overrides the counts.
func BenchmarkTransactionsHalfOpen(b *testing.B) {
	for _, n := range envInts("ZONEMQ_SCALE_HALF", []int{1, 1000, 100000, 1000000}) {
		b.Run(fmt.Sprintf("half=%d", n), func(b *testing.B) {
			for range b.N {
				pendingPoint(b, "transactions-half-open", n, func(h *protocol.SendMessageRequestHeader) {
					h.SysFlag = protocol.SysFlagTransactionPrep
					h.Properties = protocol.EncodeProperties(map[string]string{protocol.PropertyTransactionPrepared: "true",
						protocol.PropertyProducerGroup: "scale_tx_pg"})
				})
			}
		})
	}
	plot(b, "transactions-half-open", "half-open transactions")
}

// pendingPoint sends n messages shaped by kind, measures, and restarts the
// broker twice.
func pendingPoint(b *testing.B, curve string, n int, kind func(*protocol.SendMessageRequestHeader)) {
	_, br := startBroker(b)
	c := remoting.NewClient(remoting.ClientOptions{})
	b.Cleanup(func() { c.Close() })
	const topic = "PendingTopic"
	createTopics(b, c, br.addr, []string{topic})
	body := make([]byte, 100)
	var next, failed atomic.Int64
	var wg sync.WaitGroup
	began := time.Now()
	for range 64 {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) || failed.Load() > 0 {
					return
				}
				h := protocol.SendMessageRequestHeader{ProducerGroup: "scale_tx_pg", Topic: topic, QueueID: int32(i % 8),
					BornTimestamp: time.Now().UnixMilli()}
				kind(&h)
				resp, err := invoke(c, br.addr, protocol.SendMessage, h.Ext(), body)
				if err != nil || resp.Code != int32(protocol.Success) {
					failed.Add(1)
					b.Logf("send: %v %v", err, resp)
					return
				}
			}
		})
	}
	wg.Wait()
	if failed.Load() > 0 {
		b.Fatal("a send failed")
	}
	report(b, curve, n, float64(n)/time.Since(began).Seconds(), "fill-msg/s")
	report(b, curve, n, br.rssMiB(), "broker-MiB")
	restart := func(unit string, halt func()) {
		halt()
		began := time.Now()
		br.start(b)
		waitFor(b, "a send after the restart", 10*time.Minute, func() error { return send(c, br.addr, topic) })
		report(b, curve, n, time.Since(began).Seconds(), unit+"-send-s")
	}
	restart("kill9", br.kill)
	restart("stop", func() { br.stop(b) })
}
