package scale

import (
	"fmt"
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
	curve(b, "GIB", []int{1, 5, 20}, "GiB", "store-size", "GiB of commit log", func(b *testing.B, gib int) {
		storePoint(b, gib)
	})
}

func storePoint(b *testing.B, gib int) {
	_, br := startBroker(b)
	c := remoting.NewClient(remoting.ClientOptions{MaxFrameSize: 64 << 20})
	b.Cleanup(func() { c.Close() })
	const topic, size = "StoreTopic", 256 << 10
	createTopics(b, c, br.addr, []string{topic})
	body := make([]byte, size)
	total := int64(gib) << 30 / size
	began := time.Now()
	err := each(int(total), func(i int) error {
		h := protocol.SendMessageRequestHeader{ProducerGroup: "scale_pg", Topic: topic, QueueID: int32(i % 8),
			BornTimestamp: time.Now().UnixMilli()}
		return sendOK(c, br.addr, h, body)
	})
	if err != nil {
		b.Fatalf("filling the store: %v", err)
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
