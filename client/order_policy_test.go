package client_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/client/admin"
	"github.com/zonemq/zonemq/internal/testutil"
)

// TestClientOrderPolicy: under OrderStrict a key keeps its queue through a
// broker failure (sends fail meanwhile, then go to the same queue again);
// under OrderAvailable (the default) the key moves to a live broker.
func TestClientOrderPolicy(t *testing.T) {
	c := startCluster(t, 2)
	ctx := context.Background()
	createTopic(t, c, "StrictOrders", 2)
	createTopic(t, c, "LooseOrders", 2)
	cc := clientConfig(c, 1)
	adm, err := admin.New(admin.Config{ClientConfig: cc})
	testutil.NoError(t, err)
	testutil.NoError(t, adm.Start(ctx))
	t.Cleanup(func() { adm.Shutdown(context.Background()) })
	testutil.NoError(t, adm.SetOrderPolicy(ctx, "StrictOrders", client.OrderStrict), "SetOrderPolicy")
	var ce *client.ConfigError
	testutil.True(t, errors.As(adm.SetOrderPolicy(ctx, "StrictOrders", "sometimes"), &ce), "an unknown policy is refused")

	p := newProducer(t, cc)
	send := func(topic, key string, timeout time.Duration) (*client.SendResult, error) {
		sctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return p.SendOrderly(sctx, &client.Message{Topic: topic, Keys: []string{key}, Body: []byte(key)}, client.HashSelector{}, "order-42")
	}
	before := map[string]*client.SendResult{}
	for _, topic := range []string{"StrictOrders", "LooseOrders"} {
		r, err := send(topic, "before", 5*time.Second)
		testutil.NoError(t, err, "ordered send to "+topic)
		testutil.Equal(t, r.IDC, "idc1", "ordered traffic stays in the own IDC")
		before[topic] = r
	}

	c.StopBroker(1)
	_, err = send("StrictOrders", "during", 2*time.Second)
	testutil.True(t, errors.Is(err, client.ErrOrderedQueueUnavailable), fmt.Sprintf("strict send with the queue's broker down: %v", err))
	r, err := send("LooseOrders", "during", 10*time.Second)
	testutil.NoError(t, err, "available send with idc1's broker down")
	testutil.Equal(t, r.IDC, "idc2", "available: the key moved to a live broker")

	testutil.NoError(t, c.StartBroker(1), "restart idc1's broker")
	testutil.Eventually(t, 30*time.Second, func() error {
		r, err := send("StrictOrders", "after", 2*time.Second)
		if err != nil {
			return err
		}
		if r.Queue != before["StrictOrders"].Queue {
			t.Fatalf("strict: the key moved from %v to %v", before["StrictOrders"].Queue, r.Queue)
		}
		return nil
	})
}
