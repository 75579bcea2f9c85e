package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/zonemq/zonemq/internal/namesrv"
	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/testutil"
)

// TestControllerFailoverWithRocketMQClient: the stock rocketmq-client-go
// keeps working through a controller failover. Group broker-k's master is
// cut off from the controller (fenced, then replaced by its in-sync
// replica); a second group, broker-l, takes the sends meanwhile. Every send
// the client saw succeed is consumed by its push consumer, which reads
// broker-k's queues wherever they are served.
func TestControllerFailoverWithRocketMQClient(t *testing.T) {
	ctrl := startControllers(t, 600*time.Millisecond)
	ns := startNamesrv(t, "127.0.1.1:0", "idc1", func(o *namesrv.Options) { o.ControllerAddrs = ctrl })
	var link controllerLink
	kopts := ctrlGroupOptions(t, 1, "broker-k", 0, ReplicationSync, ns.Addr(), ctrl)
	kopts.controllerDial = link.dial
	k0, _ := runBroker(t, kopts)
	k1, _ := runBroker(t, ctrlGroupOptions(t, 2, "broker-k", 1, ReplicationSync, ns.Addr(), ctrl))
	l := startBroker(t, testBrokerOptions(t, "127.0.2.1", "idc2", "broker-l", ns.Addr()))

	raw := newRawClient(t)
	const topic = "CtrlRmqTopic"
	createTopic(t, raw, k0.Addr(), topic, 4)
	createTopic(t, raw, l.Addr(), topic, 4)
	waitInSync(t, k0, 1)
	waitRoute(t, raw, ns.Addr(), topic, k0)
	waitRoute(t, raw, ns.Addr(), topic, l)
	testutil.Eventually(t, 15*time.Second, func() error {
		if resp := sendRaw(t, raw, k0.Addr(), topic, 0, nil, []byte("x")); resp.Code != int32(protocol.Success) {
			return fmt.Errorf("broker-k's master does not acknowledge yet: %s", resp.Remark)
		}
		return nil
	})

	got := newReceived()
	startPushConsumer(t, ns.Addr(), "ctrl_rmq_"+runToken, instanceName("C"+runToken), topic, "*", consumer.Clustering, got)
	p := startRocketMQProducer(t, ns.Addr(), "ctrl_rmq_pg", "P", producer.WithRetry(2))

	var acked []string
	failed := 0
	send := func(prefix string, n int) {
		for i := range n {
			key := fmt.Sprintf("%s-%d", prefix, i)
			r, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte(key)).WithKeys([]string{key}))
			if err != nil || r.Status != primitive.SendOK {
				failed++
				continue
			}
			acked = append(acked, key)
		}
	}
	send("before", 40)

	link.sever(k0)
	testutil.Eventually(t, 15*time.Second, func() error {
		if !k1.IsMaster() {
			send("during", 5)
			return fmt.Errorf("broker-k's replica is not master yet")
		}
		return nil
	})
	send("after", 40)
	testutil.Eventually(t, 60*time.Second, func() error {
		if m := missing(acked, got); len(m) > 0 {
			return fmt.Errorf("%d of %d acknowledged messages not consumed, e.g. %v", len(m), len(acked), m[:min(len(m), 5)])
		}
		return nil
	})
	// With two groups and retries, a fenced master costs the client nothing
	// it can see: the retry lands on the other group.
	testutil.Equal(t, failed, 0, "sends the stock client saw fail")
	t.Logf("rocketmq-client-go through a controller failover: %d sends acknowledged and consumed, %d failed", len(acked), failed)
}
