package client_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/internal/devcluster"
)

// exampleCluster starts a two-IDC cluster in this process (IDC n on
// 127.0.n.1) for the examples; a real application is given address-server
// URLs instead.
func exampleCluster() (*devcluster.Cluster, func()) {
	dir, err := os.MkdirTemp("", "zonemq-example-")
	if err != nil {
		log.Fatal(err)
	}
	c, err := devcluster.Start(context.Background(), devcluster.Options{IDCs: 2, DataDir: dir})
	if err != nil {
		log.Fatal(err)
	}
	return c, func() { c.Close(); os.RemoveAll(dir) }
}

// A producer in idc1 sends one message; it is stored on idc1's broker.
func ExampleProducer_SendSync() {
	cluster, stop := exampleCluster()
	defer stop()
	ctx := context.Background()

	p, err := client.NewProducer(client.ProducerConfig{
		ClientConfig: client.ClientConfig{
			AddrsrvURLs: cluster.AddrsrvURLs(1), // own IDC's address server first
			IDC:         "idc1",
		},
		Group: "example_producer",
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer p.Shutdown(ctx)

	res, err := p.SendSync(ctx, &client.Message{Topic: "ExampleTopic", Tags: "TagA", Keys: []string{"order-1"}, Body: []byte("hello")})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Status, "on", res.BrokerName, "in", res.IDC)
	// Output: SEND_OK on broker-idc1 in idc1
}

// A push consumer in idc2 reads a topic from the first offset; the handler
// runs on the consumer's goroutines.
func ExamplePushConsumer() {
	cluster, stop := exampleCluster()
	defer stop()
	ctx := context.Background()
	cc := client.ClientConfig{AddrsrvURLs: cluster.AddrsrvURLs(2), IDC: "idc2"}

	p, err := client.NewProducer(client.ProducerConfig{ClientConfig: cc})
	if err != nil {
		log.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer p.Shutdown(ctx)
	if _, err := p.SendSync(ctx, &client.Message{Topic: "ExampleEvents", Body: []byte("hello from idc2")}); err != nil {
		log.Fatal(err)
	}

	got := make(chan *client.MessageExt, 1)
	c, err := client.NewPushConsumer(client.ConsumerConfig{
		ClientConfig:     cc,
		Group:            "example_group",
		ConsumeFromWhere: client.ConsumeFromFirstOffset,
	})
	if err != nil {
		log.Fatal(err)
	}
	err = c.Subscribe("ExampleEvents", "*", func(ctx context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		for _, m := range msgs {
			select {
			case got <- m:
			default:
			}
		}
		return client.ConsumeSuccess
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer c.Shutdown(ctx)

	select {
	case m := <-got:
		fmt.Printf("%s from %s in %s\n", m.Body, m.BrokerName, m.IDC)
	case <-time.After(10 * time.Second):
		fmt.Println("nothing consumed")
	}
	// Output: hello from idc2 from broker-idc2 in idc2
}

// SendOrderly keeps the messages of one order key on one queue of the own
// IDC, so an orderly consumer sees them in send order.
func ExampleProducer_SendOrderly() {
	cluster, stop := exampleCluster()
	defer stop()
	ctx := context.Background()
	p, err := client.NewProducer(client.ProducerConfig{ClientConfig: client.ClientConfig{AddrsrvURLs: cluster.AddrsrvURLs(1), IDC: "idc1"}})
	if err != nil {
		log.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer p.Shutdown(ctx)
	var queue client.MessageQueue
	for step := 1; step <= 3; step++ {
		msg := &client.Message{Topic: "ExampleOrders", Body: []byte(fmt.Sprintf("order-42 step %d", step))}
		res, err := p.SendOrderly(ctx, msg, client.HashSelector{}, 42)
		if err != nil {
			log.Fatal(err)
		}
		if step > 1 && res.Queue != queue {
			fmt.Println("order moved")
		}
		queue = res.Queue
	}
	fmt.Println("all steps on one queue of", queue.BrokerName)
	// Output: all steps on one queue of broker-idc1
}
