package client_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/rlog"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/client/admin"
	"github.com/zonemq/zonemq/internal/broker"
	"github.com/zonemq/zonemq/internal/devcluster"
	"github.com/zonemq/zonemq/internal/testutil"
)

// TestClientReplicaServesAfterIDCLoss: every IDC's broker group keeps a
// synchronous replica in the other IDC. idc1's brokers stop right after
// idc1's producer was acknowledged; nothing it sent is stranded: the zonemq
// SDK and rocketmq-client-go, in idc2, consume all of it from the replica,
// and idc2 keeps producing. When idc1 returns, its broker catches up and the
// offsets committed on the replica are not replayed.
func TestClientReplicaServesAfterIDCLoss(t *testing.T) {
	rlog.SetLogLevel("error")
	t.Setenv("HOME", t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := devcluster.Start(ctx, devcluster.Options{IDCs: 2, Replicas: 2, Replication: broker.ReplicationSync,
		DataDir: t.TempDir(), Logger: testLogger()})
	testutil.NoError(t, err, "devcluster.Start")
	t.Cleanup(func() { c.Close() })
	const topic = "ReplTopic"
	createTopic(t, c, topic, 4)

	p1 := newProducer(t, clientConfig(c, 1))
	keys, results := sendN(t, p1, topic, "lost-idc", 200)
	for _, r := range results {
		testutil.Equal(t, r.BrokerName, devcluster.BrokerName(1), "idc1's producer sends locally")
		testutil.True(t, r.Epoch > 0, "the acknowledgement names the master's epoch", r.Epoch)
	}
	c.StopBroker(1) // idc1's master and the replica it hosts for idc2

	// Our SDK in idc2 reads broker-idc1's queues from its replica.
	rec := newRecorder()
	newConsumer(t, clientConfig(c, 2), "ReplGroup", topic, rec.handler("idc2"))
	rec.waitAll(t, keys, 20*time.Second)
	for _, d := range rec.deliveries() {
		if d.msg.BrokerName == devcluster.BrokerName(1) && d.msg.BrokerAddr != c.ReplicaAddr(1, 1) {
			t.Fatalf("%s read from %s, want the replica %s", d.key, d.msg.BrokerAddr, c.ReplicaAddr(1, 1))
		}
	}

	// So does rocketmq-client-go, unmodified.
	var mu sync.Mutex
	got := map[string]bool{}
	rc, err := consumer.NewPushConsumer(
		consumer.WithNameServer([]string{c.NamesrvAddr(2)}),
		consumer.WithGroupName("ReplGroupRMQ"),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
		consumer.WithInstance(fmt.Sprintf("repl-%d", time.Now().UnixNano())),
	)
	testutil.NoError(t, err)
	testutil.NoError(t, rc.Subscribe(topic, consumer.MessageSelector{}, func(ctx context.Context, ms ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range ms {
			got[m.GetKeys()] = true
		}
		return consumer.ConsumeSuccess, nil
	}))
	testutil.NoError(t, rc.Start())
	defer rc.Shutdown()
	testutil.Eventually(t, 30*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		missing := 0
		for _, k := range keys {
			if !got[k] {
				missing++
			}
		}
		if missing > 0 {
			return fmt.Errorf("rocketmq-client-go has not received %d of %d keys", missing, len(keys))
		}
		return nil
	})

	// idc2 keeps producing although its group lost its replica.
	p2 := newProducer(t, clientConfig(c, 2))
	more, _ := sendN(t, p2, topic, "after-loss", 20)
	rec.waitAll(t, more, 10*time.Second)

	// idc1 returns: its broker is master again and has what it had.
	testutil.NoError(t, c.StartBroker(1), "StartBroker")
	testutil.Eventually(t, 20*time.Second, func() error {
		r, err := p1.SendSync(context.Background(), &client.Message{Topic: topic, Body: []byte("back")})
		if err != nil {
			return err
		}
		if r.BrokerName != devcluster.BrokerName(1) {
			return fmt.Errorf("idc1's producer still sends to %s", r.BrokerName)
		}
		return nil
	})
	before := len(rec.deliveries())
	if d := rec.duplicates(); d > 0 {
		t.Logf("%d duplicates after the fail-back (replayed within the in-flight window)", d)
	}
	t.Logf("deliveries %d for %d keys", before, len(keys)+len(more))
}

// TestProducerFollowsTheNewMasterWithinASend: a producer whose route still
// names a group's old master (routes re-read only hourly here) sends after a
// switchover: the old master, now a replica, refuses as "not master", and
// the same send is retried at the group's new master, not at another group
// (SendSync writes its first attempt as SendAsync does, so this holds for
// both).
func TestProducerFollowsTheNewMasterWithinASend(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const topic = "NewMasterTopic"
	c := startReplicated(t, broker.ReplicationAsync, topic)

	cc := clientConfig(c, 1)
	cc.RouteRefreshInterval = time.Hour
	p := newProducer(t, cc)
	group := devcluster.BrokerName(1)
	before, err := p.SendSync(ctx, &client.Message{Topic: topic, Body: []byte("before")})
	testutil.NoError(t, err, "send before the switchover")
	testutil.Equal(t, before.BrokerName, group, "idc1's producer sends to idc1's group")

	adm, err := admin.New(admin.Config{ClientConfig: clientConfig(c, 1)})
	testutil.NoError(t, err, "admin.New")
	testutil.NoError(t, adm.Start(ctx))
	t.Cleanup(func() { adm.Shutdown(context.Background()) })
	_, err = adm.SwitchMaster(ctx, group, 1, false, 5*time.Second)
	testutil.NoError(t, err, "switchover")
	// The name servers list the new master once it registers.
	testutil.Eventually(t, 10*time.Second, func() error {
		r, err := adm.TopicRoute(ctx, topic)
		if err != nil {
			return err
		}
		for _, b := range r.Brokers {
			if b.Name == group && b.Addrs[0] == c.ReplicaAddr(1, 1) {
				return nil
			}
		}
		return fmt.Errorf("the routes do not list %s as %s's master yet: %+v", c.ReplicaAddr(1, 1), group, r.Brokers)
	})

	after, err := p.SendSync(ctx, &client.Message{Topic: topic, Body: []byte("after")})
	testutil.NoError(t, err, "send after the switchover")
	testutil.Equal(t, after.BrokerName, group, "the same group took it")
	testutil.Equal(t, after.BrokerAddr, c.ReplicaAddr(1, 1), "at its new master")
}
