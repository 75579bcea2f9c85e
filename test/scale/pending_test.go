package scale

import (
	"strconv"
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
	curve(b, "TIMERS", []int{1, 1000, 100000, 1000000}, "timers", "timers-pending", "timer messages pending", func(b *testing.B, n int) {
		pendingPoint(b, "timers-pending", n, func(h *protocol.SendMessageRequestHeader) {
			h.Properties = protocol.EncodeProperties(map[string]string{protocol.PropertyTimerDelaySec: strconv.Itoa(2 * 86400)})
		})
	})
}

// BenchmarkTransactionsHalfOpen is the curve "transactions half-open" of
// issue 25: one broker process holding N half messages whose producer
// never ends them (nor answers a check: it is gone), then restarted after
// kill -9 and after a clean stop. The same figures as
// BenchmarkTimersPending. ZONEMQ_SCALE_HALF overrides the counts.
func BenchmarkTransactionsHalfOpen(b *testing.B) {
	curve(b, "HALF", []int{1, 1000, 100000, 1000000}, "half", "transactions-half-open", "half-open transactions", func(b *testing.B, n int) {
		pendingPoint(b, "transactions-half-open", n, func(h *protocol.SendMessageRequestHeader) {
			h.SysFlag = protocol.SysFlagTransactionPrep
			h.Properties = protocol.EncodeProperties(map[string]string{protocol.PropertyTransactionPrepared: "true",
				protocol.PropertyProducerGroup: "scale_tx_pg"})
		})
	})
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
	began := time.Now()
	err := each(n, func(i int) error {
		h := protocol.SendMessageRequestHeader{ProducerGroup: "scale_tx_pg", Topic: topic, QueueID: int32(i % 8),
			BornTimestamp: time.Now().UnixMilli()}
		kind(&h)
		return sendOK(c, br.addr, h, body)
	})
	if err != nil {
		b.Fatal(err)
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
