package scale

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/internal/remoting"
)

// BenchmarkFanOut is the curve "consumer groups on one topic" of issue 25:
// one name server and one broker process, a topic of 8 queues holding
// 20 000 messages of 1 KiB, and G groups of one SDK push consumer each
// reading all of it from the first offset at once. For each G
//
//	deliveries/s   G × 20 000 over the time until every group has read every message
//	broker-%       the broker's CPU meanwhile (100 = one core)
//
// ZONEMQ_SCALE_GROUPS overrides the counts (comma-separated).
func BenchmarkFanOut(b *testing.B) {
	curve(b, "GROUPS", []int{1, 10, 50, 100}, "groups", "fan-out", "consumer groups on one topic", func(b *testing.B, g int) {
		fanOutPoint(b, g)
	})
}

const fanOutMessages = 20000

func fanOutPoint(b *testing.B, groups int) {
	ns, br := startBroker(b)
	c := remoting.NewClient(remoting.ClientOptions{})
	b.Cleanup(func() { c.Close() })
	const topic = "FanOutTopic"
	createTopics(b, c, br.addr, []string{topic})
	waitFor(b, "the topic routed", time.Minute, func() error { return routed(c, ns.addr, topic) })
	cfg := client.ClientConfig{NamesrvAddrs: []string{ns.addr}, IDC: "idc1", AllowUnknownIDC: true}
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)

	p, err := client.NewProducer(client.ProducerConfig{ClientConfig: cfg, Group: "scale_pg"})
	if err != nil {
		b.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 1024)
	var sent sync.WaitGroup
	var failed atomic.Int64
	inflight := make(chan struct{}, 64)
	for i := range fanOutMessages {
		inflight <- struct{}{}
		sent.Add(1)
		err := p.SendAsync(ctx, func(_ *client.SendResult, err error) {
			if err != nil {
				failed.Add(1)
			}
			<-inflight
			sent.Done()
		}, &client.Message{Topic: topic, Keys: []string{fmt.Sprint(i)}, Body: body})
		if err != nil {
			b.Fatal(err)
		}
	}
	sent.Wait()
	p.Shutdown(context.Background())
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d sends failed", n)
	}

	counts := make([]atomic.Int64, groups)
	var consumers []*client.PushConsumer
	b.Cleanup(func() {
		for _, pc := range consumers {
			pc.Shutdown(context.Background())
		}
	})
	cpu := br.cpu()
	began := time.Now()
	for g := range groups {
		pc, err := client.NewPushConsumer(client.ConsumerConfig{ClientConfig: cfg, Group: fmt.Sprintf("scale_fan_%03d", g),
			ConsumeFromWhere: client.ConsumeFromFirstOffset, ConsumeBatchSize: 32})
		if err != nil {
			b.Fatal(err)
		}
		consumers = append(consumers, pc)
		err = pc.Subscribe(topic, "*", func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
			counts[g].Add(int64(len(msgs)))
			return client.ConsumeSuccess
		})
		if err != nil {
			b.Fatal(err)
		}
		if err := pc.Start(ctx); err != nil {
			b.Fatal(err)
		}
	}
	waitFor(b, "every group read every message", 10*time.Minute, func() error {
		for g := range counts {
			if n := counts[g].Load(); n < fanOutMessages {
				return fmt.Errorf("group %d read %d of %d", g, n, fanOutMessages)
			}
		}
		return nil
	})
	took := time.Since(began)
	report(b, "fan-out", groups, float64(groups*fanOutMessages)/took.Seconds(), "deliveries/s")
	report(b, "fan-out", groups, 100*float64(br.cpu()-cpu)/float64(took), "broker-%")
}
