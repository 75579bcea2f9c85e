package scale

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// BenchmarkStoreSize is the curve "store size" of issue 25: one name server
// and one broker process, its commit log filled to S GiB (messages of
// 256 KiB over a topic of 8 queues, 64 sends in flight), then restarted
// after kill -9 and after a clean stop. For each S
//
//	fill-MiB/s                  how fast it was filled
//	kill9-listen-s, stop-listen-s   from the new process's start until it accepts connections
//	kill9-send-s, stop-send-s       until a send succeeds
//	kill9-pull-s, stop-pull-s       until a pull of the oldest message succeeds
//
// ZONEMQ_SCALE_GIB overrides the sizes (comma-separated). The default stops
// at 20 GiB to fit ordinary disks; 50 GiB needs ~55 GiB free.
func BenchmarkStoreSize(b *testing.B) {
	for _, gib := range envInts("ZONEMQ_SCALE_GIB", []int{1, 5, 20}) {
		b.Run(fmt.Sprintf("GiB=%d", gib), func(b *testing.B) {
			for range b.N {
				storePoint(b, gib)
			}
		})
	}
	plot(b, "store-size", "GiB of commit log")
}

func storePoint(b *testing.B, gib int) {
	_, br := startBroker(b)
	c := remoting.NewClient(remoting.ClientOptions{MaxFrameSize: 64 << 20})
	b.Cleanup(func() { c.Close() })
	const topic, size = "StoreTopic", 256 << 10
	createTopics(b, c, br.addr, []string{topic})
	body := make([]byte, size)
	total := int64(gib) << 30 / size
	var next, failed atomic.Int64
	var wg sync.WaitGroup
	began := time.Now()
	for range 64 {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= total || failed.Load() > 0 {
					return
				}
				h := protocol.SendMessageRequestHeader{ProducerGroup: "scale_pg", Topic: topic, QueueID: int32(i % 8),
					BornTimestamp: time.Now().UnixMilli()}
				resp, err := invoke(c, br.addr, protocol.SendMessage, h.Ext(), body)
				if err != nil || resp.Code != int32(protocol.Success) {
					failed.Add(1)
					return
				}
			}
		})
	}
	wg.Wait()
	if failed.Load() > 0 {
		b.Fatal("a send failed while filling the store")
	}
	report(b, "store-size", gib, float64(total*size)/(1<<20)/time.Since(began).Seconds(), "fill-MiB/s")

	restart := func(unit string, halt func()) {
		halt()
		began := time.Now()
		br.start(b) // returns once it accepts connections
		report(b, "store-size", gib, time.Since(began).Seconds(), unit+"-listen-s")
		waitFor(b, "a send after the restart", 10*time.Minute, func() error { return send(c, br.addr, topic) })
		report(b, "store-size", gib, time.Since(began).Seconds(), unit+"-send-s")
		waitFor(b, "a pull of the oldest message", 10*time.Minute, func() error { return pullOldest(c, br.addr, topic) })
		report(b, "store-size", gib, time.Since(began).Seconds(), unit+"-pull-s")
	}
	restart("kill9", br.kill)
	restart("stop", func() { br.stop(b) })
}

// pullOldest pulls one message from offset 0 of queue 1 (sends after a
// restart go to queue 0).
func pullOldest(c *remoting.Client, addr, topic string) error {
	h := protocol.PullMessageRequestHeader{ConsumerGroup: "scale_cg", Topic: topic, QueueID: 1, QueueOffset: 0, MaxMsgNums: 1,
		SysFlag: protocol.PullFlagSubscription, Subscription: "*", ExpressionType: protocol.ExpressionTypeTag}
	resp, err := invoke(c, addr, protocol.PullMessage, h.Ext(), nil)
	if err != nil {
		return err
	}
	if resp.Code != int32(protocol.Success) || len(resp.Body) == 0 {
		return fmt.Errorf("pull: %d %s", resp.Code, resp.Remark)
	}
	return nil
}
