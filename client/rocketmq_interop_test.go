package client_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/internal/testutil"
)

// TestClientInteropRocketMQGo: the official rocketmq-client-go, pointed at
// the dev cluster's address server (/rocketmq/nsaddr), sends and consumes;
// what it sends, the zonemq SDK consumes, and what the SDK sends (plain,
// compressed, batched), it consumes.
func TestClientInteropRocketMQGo(t *testing.T) {
	rlog.SetLogLevel("error")
	t.Setenv("HOME", t.TempDir()) // it writes name-server snapshots under ~/logs
	c := startCluster(t, 2)
	const topic = "InteropTopic"
	createTopic(t, c, topic, 4)
	nsaddr := c.AddrsrvURL(1) + "/rocketmq/nsaddr"
	testutil.RemoveResolverSnapshot(t, nsaddr)
	ctx := context.Background()

	rp, err := producer.NewDefaultProducer(
		producer.WithNameServerDomain(nsaddr),
		producer.WithGroupName("interop_pg"),
		producer.WithRetry(2),
		producer.WithInstanceName(fmt.Sprintf("interop-%d", time.Now().UnixNano())),
	)
	testutil.NoError(t, err)
	testutil.NoError(t, rp.Start())
	defer rp.Shutdown()

	want := map[string][]byte{}
	for i := 0; i < 10; i++ {
		key := fmt.Sprintf("rmq-%d", i)
		body := []byte("from rocketmq-client-go " + key)
		m := primitive.NewMessage(topic, body)
		m.WithKeys([]string{key})
		m.WithTag("TagA")
		res, err := rp.SendSync(ctx, m)
		testutil.NoError(t, err, "rocketmq-client-go SendSync")
		if res.Status != primitive.SendOK {
			t.Fatalf("rocketmq-client-go send status %v", res.Status)
		}
		want[key] = body
	}

	zp := newProducer(t, clientConfig(c, 1))
	for i := 0; i < 5; i++ {
		key := fmt.Sprintf("zmq-%d", i)
		body := []byte("from the zonemq SDK " + key)
		if i == 0 {
			body = bytes.Repeat([]byte("compressible "), 1000) // ≥ 4 KiB: sent zlib-compressed
		}
		_, err := zp.SendSync(ctx, &client.Message{Topic: topic, Tags: "TagB", Keys: []string{key}, Body: body})
		testutil.NoError(t, err)
		want[key] = body
	}
	var batch []*client.Message
	for i := 0; i < 3; i++ {
		key := fmt.Sprintf("zmq-batch-%d", i)
		body := []byte("batched " + key)
		batch = append(batch, &client.Message{Topic: topic, Tags: "TagB", Keys: []string{key}, Body: body})
		want[key] = body
	}
	_, err = zp.SendSync(ctx, batch...)
	testutil.NoError(t, err, "batch")

	// rocketmq-client-go consumes everything.
	var mu sync.Mutex
	rgot := map[string][]byte{}
	rc, err := consumer.NewPushConsumer(
		consumer.WithNameServerDomain(nsaddr),
		consumer.WithGroupName("interop_rmq_cg"),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
		consumer.WithInstance(fmt.Sprintf("interop-c-%d", time.Now().UnixNano())),
	)
	testutil.NoError(t, err)
	testutil.NoError(t, rc.Subscribe(topic, consumer.MessageSelector{}, func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			rgot[m.GetKeys()] = m.Body
		}
		return consumer.ConsumeSuccess, nil
	}))
	testutil.NoError(t, rc.Start())
	defer rc.Shutdown()

	// The zonemq SDK consumes everything too.
	rec := newRecorder()
	newConsumer(t, clientConfig(c, 1), "interop_zmq_cg", topic, rec.handler("zonemq"))

	testutil.Eventually(t, 30*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		for k, body := range want {
			got, ok := rgot[k]
			if !ok {
				return fmt.Errorf("rocketmq-client-go has not consumed %s (%d of %d)", k, len(rgot), len(want))
			}
			if !bytes.Equal(got, body) {
				return fmt.Errorf("rocketmq-client-go got a different body for %s", k)
			}
		}
		return nil
	})
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	rec.waitAll(t, keys, 10*time.Second)
	for _, d := range rec.deliveries() {
		if !bytes.Equal(d.msg.Body, want[d.key]) {
			t.Fatalf("SDK got a different body for %s", d.key)
		}
		// rocketmq-client-go spreads its sends over every IDC's brokers.
		if d.key[:3] == "rmq" && (d.msg.Tags != "TagA" || d.msg.MsgID == "" || d.msg.IDC == "") {
			t.Fatalf("SDK read %s as tags %q id %q idc %q", d.key, d.msg.Tags, d.msg.MsgID, d.msg.IDC)
		}
	}
}
