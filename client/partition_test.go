package client_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/internal/devcluster"
	"github.com/zonemq/zonemq/internal/testutil"
)

// ownership samples which consumer holds which queue, to prove no queue is
// held by two consumers at once for longer than a hand-over.
type ownership struct {
	consumers map[string]*client.PushConsumer
	stop      chan struct{}
	done      chan struct{}

	mu      sync.Mutex
	samples int
	// overlapSince is when each currently doubly-held queue became so;
	// maxOverlap is the longest such episode seen.
	overlapSince map[client.MessageQueue]time.Time
	maxOverlap   time.Duration
	overlaps     int
}

func watchOwnership(consumers map[string]*client.PushConsumer) *ownership {
	o := &ownership{consumers: consumers, stop: make(chan struct{}), done: make(chan struct{}), overlapSince: map[client.MessageQueue]time.Time{}}
	go func() {
		defer close(o.done)
		for {
			o.sample()
			select {
			case <-o.stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	return o
}

func (o *ownership) sample() {
	holders := map[client.MessageQueue]int{}
	for _, pc := range o.consumers {
		for _, q := range pc.Queues() {
			holders[q]++
		}
	}
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.samples++
	for q, n := range holders {
		if n > 1 {
			if _, ok := o.overlapSince[q]; !ok {
				o.overlapSince[q] = now
				o.overlaps++
			}
		}
	}
	for q, since := range o.overlapSince {
		if holders[q] <= 1 {
			delete(o.overlapSince, q)
		}
		o.maxOverlap = max(o.maxOverlap, now.Sub(since))
	}
}

func (o *ownership) halt() (samples, overlaps int, longest time.Duration) {
	select {
	case <-o.stop:
	default:
		close(o.stop)
	}
	<-o.done
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.samples, o.overlaps, o.maxOverlap
}

// TestClientPartitionConsumerCutFromBroker: the link between idc1's consumer
// and idc1's broker is cut (a proxy between them closes every connection and
// refuses new ones). idc1's broker then sees no idc1 consumer, so idc2's
// consumer drains it; no queue is held by both consumers beyond a hand-over;
// when the link heals, the queues go back.
func TestClientPartitionConsumerCutFromBroker(t *testing.T) {
	c := startCluster(t, 2)
	const topic = "PartTopic"
	createTopic(t, c, topic, 4)
	proxy, err := testutil.NewProxy(c.Host(1)+":0", c.BrokerAddr(1))
	testutil.NoError(t, err)
	t.Cleanup(func() { proxy.Close() })

	rec := newRecorder()
	dc := newDialCounter(c.Host(1))
	dc.redirect(c.BrokerAddr(1), proxy.Addr())
	cc1 := clientConfig(c, 1)
	cc1.Dial = dc.dial
	c1 := newConsumer(t, cc1, "PartGroup", topic, rec.handler("idc1"))
	c2 := newConsumer(t, clientConfig(c, 2), "PartGroup", topic, rec.handler("idc2"))
	p1 := newProducer(t, clientConfig(c, 1))
	testutil.Eventually(t, 10*time.Second, func() error {
		if len(queuesOf(c1, topic, devcluster.BrokerName(1))) != 4 || len(queuesOf(c2, topic, devcluster.BrokerName(2))) != 4 {
			return fmt.Errorf("idc1: %v idc2: %v", sortedQueues(c1.Queues()), sortedQueues(c2.Queues()))
		}
		return nil
	})
	own := watchOwnership(map[string]*client.PushConsumer{"idc1": c1, "idc2": c2})
	defer own.halt()
	load := startLoad(p1, topic, "Part", 5*time.Millisecond)
	defer load.halt()
	testutil.Eventually(t, 5*time.Second, func() error {
		for _, d := range rec.deliveries() {
			if d.consumer == "idc1" {
				return nil
			}
		}
		return fmt.Errorf("idc1 consumer has read nothing yet")
	})

	t0 := time.Now()
	proxy.Cut()
	testutil.Eventually(t, 10*time.Second, func() error {
		if n := len(queuesOf(c2, topic, devcluster.BrokerName(1))); n != 4 {
			return fmt.Errorf("idc2 consumer holds %d of idc1's queues", n)
		}
		if n := len(queuesOf(c1, topic, devcluster.BrokerName(1))); n != 0 {
			return fmt.Errorf("idc1 consumer still holds %d of idc1's queues", n)
		}
		return nil
	})
	t.Logf("partition takeover (cut → idc2 holds all idc1 queues, idc1 none): %v", time.Since(t0))
	// What idc1's producer keeps sending to idc1's broker is drained by idc2.
	testutil.Eventually(t, 10*time.Second, func() error {
		for _, d := range rec.deliveries() {
			if d.consumer == "idc2" && d.msg.IDC == "idc1" && d.at.After(t0) {
				return nil
			}
		}
		return fmt.Errorf("idc2 has consumed nothing from idc1's broker")
	})

	t1 := time.Now()
	proxy.Restore()
	testutil.Eventually(t, 10*time.Second, func() error {
		if len(queuesOf(c1, topic, devcluster.BrokerName(1))) != 4 || len(queuesOf(c2, topic, devcluster.BrokerName(1))) != 0 {
			return fmt.Errorf("idc1: %v idc2: %v", sortedQueues(c1.Queues()), sortedQueues(c2.Queues()))
		}
		return nil
	})
	t.Logf("partition healed → idc1 holds its queues again: %v", time.Since(t1))
	load.halt()
	keys, _, errs := load.snapshot()
	testutil.Equal(t, errs, 0, "send errors")
	rec.waitAll(t, keys, 10*time.Second)
	samples, overlaps, longest := own.halt()
	t.Logf("ownership: %d samples, %d double-holding episodes, longest %v; %d messages, %d duplicates", samples, overlaps, longest, len(keys), rec.duplicates())
	// A hand-over is two independent decisions (the old owner drops, the new
	// one takes); they may cross by a round trip, never by more.
	if longest > 500*time.Millisecond {
		t.Fatalf("a queue was held by two consumers for %v", longest)
	}
}

// TestClientOrderlyPerQueueOrder: orderly consumers of two IDCs see every
// order's steps in the order they were sent (SendOrderly with a hash
// selector keeps an order on one queue).
func TestClientOrderlyPerQueueOrder(t *testing.T) {
	c := startCluster(t, 2)
	const topic = "OrderTopic"
	createTopic(t, c, topic, 4)
	type step struct{ order, n int }
	var mu sync.Mutex
	seen := map[int][]int{}
	handler := func(ctx context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			var s step
			fmt.Sscanf(string(m.Body), "order-%d-step-%d", &s.order, &s.n)
			seen[s.order] = append(seen[s.order], s.n)
		}
		return client.ConsumeSuccess
	}
	orderly := func(cfg *client.ConsumerConfig) { cfg.Orderly = true; cfg.ConsumeBatchSize = 3 }
	newConsumer(t, clientConfig(c, 1), "OrderGroup", topic, handler, orderly)
	newConsumer(t, clientConfig(c, 2), "OrderGroup", topic, handler, orderly)
	producers := []*client.Producer{newProducer(t, clientConfig(c, 1)), newProducer(t, clientConfig(c, 2))}
	const orders, steps = 12, 15
	queueOf := map[int]client.MessageQueue{}
	for s := 1; s <= steps; s++ {
		for o := 0; o < orders; o++ {
			p := producers[o%2] // half the orders from each IDC
			res, err := p.SendOrderly(context.Background(), &client.Message{Topic: topic, Body: []byte(fmt.Sprintf("order-%d-step-%d", o, s))}, client.HashSelector{}, o)
			testutil.NoError(t, err)
			if q, ok := queueOf[o]; ok && q != res.Queue {
				t.Fatalf("order %d moved from %v to %v", o, q, res.Queue)
			}
			queueOf[o] = res.Queue
			if res.IDC != devcluster.IDCName(o%2+1) {
				t.Fatalf("order %d from idc%d stored in %s", o, o%2+1, res.IDC)
			}
		}
	}
	testutil.Eventually(t, 15*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		for o := 0; o < orders; o++ {
			if len(seen[o]) < steps {
				return fmt.Errorf("order %d: %d of %d steps consumed", o, len(seen[o]), steps)
			}
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	for o := 0; o < orders; o++ {
		for i, n := range seen[o] {
			if n != i+1 {
				t.Fatalf("order %d consumed out of order: %v", o, seen[o])
			}
		}
	}
}

// TestClientRetryRedelivery: a handler that asks for a retry gets the
// message again (from the group's retry queue), with ReconsumeTimes raised,
// delivered to the handler of the original topic.
func TestClientRetryRedelivery(t *testing.T) {
	c := startCluster(t, 2)
	const topic = "RetryTopic"
	createTopic(t, c, topic, 2)
	var mu sync.Mutex
	var attempts []*client.MessageExt
	handler := func(ctx context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		mu.Lock()
		defer mu.Unlock()
		attempts = append(attempts, msgs...)
		if msgs[0].ReconsumeTimes < 2 {
			return client.ConsumeRetryLater
		}
		return client.ConsumeSuccess
	}
	newConsumer(t, clientConfig(c, 1), "RetryGroup", topic, handler, func(cfg *client.ConsumerConfig) { cfg.RetryDelayLevel = 1 })
	p := newProducer(t, clientConfig(c, 1))
	res, err := p.SendSync(context.Background(), &client.Message{Topic: topic, Tags: "TagA", Keys: []string{"retry-1"}, Body: []byte("please retry")})
	testutil.NoError(t, err)
	testutil.Eventually(t, 20*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(attempts) < 3 {
			return fmt.Errorf("%d deliveries so far", len(attempts))
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	for i, m := range attempts[:3] {
		if m.MsgID != res.MsgID || m.Topic != topic || m.Tags != "TagA" || string(m.Body) != "please retry" || m.ReconsumeTimes != i {
			t.Fatalf("delivery %d: id %s topic %s tags %s body %q reconsume %d", i, m.MsgID, m.Topic, m.Tags, m.Body, m.ReconsumeTimes)
		}
	}
	if d := attempts[1].StoreTimestamp.Sub(attempts[0].StoreTimestamp); d < 500*time.Millisecond {
		t.Logf("note: redelivery stored %v after the first store (delay level 1 = 1 s)", d)
	}
}
