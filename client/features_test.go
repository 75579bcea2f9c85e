package client_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/client/admin"
	"github.com/zonemq/zonemq/internal/devcluster"
	"github.com/zonemq/zonemq/internal/testutil"
)

// TestClientProducerSendModes: async, oneway, batch and auto-created topics
// all land in the own IDC; invalid messages fail before any round trip.
func TestClientProducerSendModes(t *testing.T) {
	c := startCluster(t, 2)
	ctx := context.Background()
	p := newProducer(t, clientConfig(c, 2))
	rec := newRecorder()
	newConsumer(t, clientConfig(c, 2), "ModesGroup", "ModesTopic", rec.handler("idc2"))

	var keys []string
	// Auto-created on first send (the topic does not exist yet).
	k, res := sendN(t, p, "ModesTopic", "sync", 3)
	keys = append(keys, k...)
	testutil.Equal(t, res[0].IDC, "idc2", "auto-created topic's broker IDC")

	var wg sync.WaitGroup
	var asyncErr error
	var mu sync.Mutex
	for i := 0; i < 5; i++ {
		key := fmt.Sprintf("async-%d", i)
		keys = append(keys, key)
		wg.Add(1)
		err := p.SendAsync(ctx, func(r *client.SendResult, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err == nil && r.IDC != "idc2" {
				err = fmt.Errorf("stored in %s", r.IDC)
			}
			asyncErr = errors.Join(asyncErr, err)
		}, &client.Message{Topic: "ModesTopic", Keys: []string{key}, Body: []byte(key)})
		testutil.NoError(t, err)
	}
	wg.Wait()
	testutil.NoError(t, asyncErr, "async sends")

	for i := 0; i < 3; i++ {
		key := fmt.Sprintf("oneway-%d", i)
		keys = append(keys, key)
		testutil.NoError(t, p.SendOneway(ctx, &client.Message{Topic: "ModesTopic", Keys: []string{key}, Body: []byte(key)}))
	}

	var batch []*client.Message
	for i := 0; i < 4; i++ {
		key := fmt.Sprintf("batch-%d", i)
		keys = append(keys, key)
		batch = append(batch, &client.Message{Topic: "ModesTopic", Keys: []string{key}, Body: []byte(key), Properties: map[string]string{"n": fmt.Sprint(i)}})
	}
	br, err := p.SendSync(ctx, batch...)
	testutil.NoError(t, err, "batch")
	testutil.Equal(t, br.IDC, "idc2", "batch broker IDC")

	rec.waitAll(t, keys, 10*time.Second)
	for _, d := range rec.deliveries() {
		if d.msg.IDC != "idc2" {
			t.Fatalf("%s read from %s", d.key, d.msg.IDC)
		}
		if d.key == "batch-2" && d.msg.Properties["n"] != "2" {
			t.Fatalf("batch item lost its property: %v", d.msg.Properties)
		}
	}

	for _, bad := range []*client.Message{
		{Topic: "", Body: []byte("x")},
		{Topic: "ModesTopic"},
		{Topic: "TBW102", Body: []byte("x")},
		{Topic: "bad topic", Body: []byte("x")},
		{Topic: "ModesTopic", Body: []byte("x"), Properties: map[string]string{"KEYS": "x"}},
	} {
		if _, err := p.SendSync(ctx, bad); !errors.Is(err, client.ErrInvalidMessage) {
			t.Fatalf("SendSync(%+v) = %v, want ErrInvalidMessage", bad, err)
		}
	}
	if _, err := p.SendSync(ctx, &client.Message{Topic: "A", Body: []byte("x")}, &client.Message{Topic: "B", Body: []byte("x")}); !errors.Is(err, client.ErrInvalidMessage) {
		t.Fatalf("a batch over two topics: %v", err)
	}
}

// TestClientZoneMode: with ZoneMode the name server returns only the own
// IDC's brokers; when the own IDC has none, the full route, and the
// producer fails over inside the send call all the same.
func TestClientZoneMode(t *testing.T) {
	c := startCluster(t, 2)
	const topic = "ZoneTopic"
	createTopic(t, c, topic, 2)
	cc := clientConfig(c, 1)
	cc.ZoneMode = true
	p := newProducer(t, cc)
	adm, err := admin.New(admin.Config{ClientConfig: cc})
	testutil.NoError(t, err)
	testutil.NoError(t, adm.Start(context.Background()))
	defer adm.Shutdown(context.Background())
	r, err := adm.TopicRoute(context.Background(), topic)
	testutil.NoError(t, err)
	if len(r.Brokers) != 1 || r.Brokers[0].IDC != "idc1" {
		t.Fatalf("zone-mode route %+v, want idc1's broker only", r.Brokers)
	}
	_, res := sendN(t, p, topic, "zone", 5)
	for _, r := range res {
		testutil.Equal(t, r.IDC, "idc1", "zone-mode send")
	}
	c.StopBroker(1)
	_, res = sendN(t, p, topic, "zone-failover", 5)
	for _, r := range res {
		testutil.Equal(t, r.IDC, "idc2", "zone-mode send with idc1's broker down")
	}
}

// TestClientBroadcasting: every consumer of a broadcasting group gets every
// message, whichever IDC stored it.
func TestClientBroadcasting(t *testing.T) {
	c := startCluster(t, 2)
	const topic = "BcastTopic"
	createTopic(t, c, topic, 2)
	recs := []*recorder{newRecorder(), newRecorder()}
	bcast := func(cfg *client.ConsumerConfig) { cfg.MessageModel = client.Broadcasting }
	for i, r := range recs {
		pc := newConsumer(t, clientConfig(c, i+1), "BcastGroup", topic, r.handler(devcluster.IDCName(i+1)), bcast)
		testutil.Eventually(t, 5*time.Second, func() error {
			if n := len(pc.Queues()); n != 4 {
				return fmt.Errorf("broadcasting consumer holds %d queues, want all 4", n)
			}
			return nil
		})
	}
	k1, _ := sendN(t, newProducer(t, clientConfig(c, 1)), topic, "b1", 5)
	k2, _ := sendN(t, newProducer(t, clientConfig(c, 2)), topic, "b2", 5)
	for _, r := range recs {
		r.waitAll(t, append(k1, k2...), 10*time.Second)
	}
}

// TestClientPullConsumer: FetchQueues lists the own IDC's queues first;
// Pull reads what was sent; offsets commit and read back.
func TestClientPullConsumer(t *testing.T) {
	c := startCluster(t, 2)
	const topic = "PullTopic"
	createTopic(t, c, topic, 2)
	ctx := context.Background()
	p := newProducer(t, clientConfig(c, 2))
	keys, results := sendN(t, p, topic, "pull", 6)

	pc, err := client.NewPullConsumer(client.PullConsumerConfig{ClientConfig: clientConfig(c, 2), Group: "PullGroup"})
	testutil.NoError(t, err)
	testutil.NoError(t, pc.Start(ctx))
	defer pc.Shutdown(ctx)
	qs, err := pc.FetchQueues(ctx, topic)
	testutil.NoError(t, err)
	testutil.Equal(t, len(qs), 4, "queues")
	testutil.Equal(t, qs[0].BrokerName, devcluster.BrokerName(2), "first queue's broker")

	got := map[string]bool{}
	for _, q := range qs {
		off := int64(0)
		for {
			res, err := pc.Pull(ctx, q, off, 32)
			testutil.NoError(t, err, "pull "+q.String())
			for _, m := range res.Messages {
				got[m.Keys[0]] = true
				testutil.Equal(t, m.IDC, "idc2", "pulled message's IDC")
			}
			if res.Status != client.PullFound {
				break
			}
			off = res.NextBeginOffset
		}
		if max, err := pc.MaxOffset(ctx, q); err != nil || max != off {
			t.Fatalf("MaxOffset(%v) = %d, %v; pulled up to %d", q, max, err, off)
		}
		if _, err := pc.QueryOffset(ctx, q); !errors.Is(err, client.ErrNoOffset) {
			t.Fatalf("QueryOffset before any commit: %v", err)
		}
		testutil.NoError(t, pc.CommitOffset(ctx, q, off))
		back, err := pc.QueryOffset(ctx, q)
		testutil.NoError(t, err)
		testutil.Equal(t, back, off, "committed offset")
	}
	for _, k := range keys {
		if !got[k] {
			t.Fatalf("%s not pulled", k)
		}
	}
	_ = results
}

// TestClientAdmin: topics, cluster, routes, group offsets with owners, live
// clients and the name servers' KV config.
func TestClientAdmin(t *testing.T) {
	c := startCluster(t, 2)
	ctx := context.Background()
	a, err := admin.New(admin.Config{ClientConfig: clientConfig(c, 1)})
	testutil.NoError(t, err)
	testutil.NoError(t, a.Start(ctx))
	defer a.Shutdown(ctx)

	brokers, err := a.Cluster(ctx)
	testutil.NoError(t, err)
	testutil.Equal(t, len(brokers), 2, "brokers")
	for i, b := range brokers {
		n := i + 1
		if b.IDC != devcluster.IDCName(n) || b.Name != devcluster.BrokerName(n) || b.Addr != c.BrokerAddr(n) || !b.Alive {
			t.Fatalf("broker %d: %+v", n, b)
		}
	}

	const topic = "AdminTopic"
	testutil.NoError(t, a.CreateTopic(ctx, admin.TopicSpec{Topic: topic, Queues: 3}))
	testutil.Eventually(t, 5*time.Second, func() error {
		r, err := a.TopicRoute(ctx, topic)
		if err != nil {
			return err
		}
		if len(r.Brokers) != 2 || r.Brokers[0].IDC != "idc1" || r.Brokers[1].IDC != "idc2" || r.Brokers[0].WriteQueues != 3 {
			return fmt.Errorf("route %+v", r)
		}
		return nil
	})
	topics, err := a.TopicList(ctx)
	testutil.NoError(t, err)
	if i := sort.SearchStrings(topics, topic); i == len(topics) || topics[i] != topic {
		t.Fatalf("TopicList %v lacks %s", topics, topic)
	}

	rec := newRecorder()
	cons := newConsumer(t, clientConfig(c, 1), "AdminGroup", topic, rec.handler("idc1"))
	p := newProducer(t, clientConfig(c, 1))
	keys, _ := sendN(t, p, topic, "adm", 6)
	rec.waitAll(t, keys, 10*time.Second)
	testutil.Eventually(t, 5*time.Second, func() error {
		offs, err := a.GroupOffsets(ctx, "AdminGroup", topic)
		if err != nil {
			return err
		}
		if len(offs) != 6 {
			return fmt.Errorf("%d queues", len(offs))
		}
		for _, o := range offs {
			if o.Err != nil {
				return o.Err
			}
			if o.Lag != 0 || o.Committed != o.Max {
				return fmt.Errorf("%v: committed %d max %d lag %d", o.Queue, o.Committed, o.Max, o.Lag)
			}
			if o.IDC == "idc1" && o.Owner != cons.ClientID() {
				return fmt.Errorf("%v owned by %q, want %q", o.Queue, o.Owner, cons.ClientID())
			}
		}
		return nil
	})

	testutil.Eventually(t, 5*time.Second, func() error {
		clients, err := a.Clients(ctx, "idc1")
		if err != nil {
			return err
		}
		seen := map[string]string{}
		for _, cl := range clients {
			seen[cl.ClientID] = cl.Role
		}
		if seen[cons.ClientID()] != "consumer" || seen[p.ClientID()] != "producer" {
			return fmt.Errorf("clients %v", seen)
		}
		return nil
	})

	testutil.NoError(t, a.PutKV(ctx, "ORDER_TOPIC_CONFIG", topic, "broker-idc1:3"))
	v, err := a.GetKV(ctx, "ORDER_TOPIC_CONFIG", topic)
	testutil.NoError(t, err)
	testutil.Equal(t, v, "broker-idc1:3", "KV value")
	kv, err := a.KVList(ctx, "ORDER_TOPIC_CONFIG")
	testutil.NoError(t, err)
	testutil.Equal(t, kv[topic], "broker-idc1:3", "KV list")
	testutil.NoError(t, a.DeleteKV(ctx, "ORDER_TOPIC_CONFIG", topic))
	if _, err := a.GetKV(ctx, "ORDER_TOPIC_CONFIG", topic); !errors.Is(err, &client.ResponseError{Code: client.CodeQueryNotFound}) {
		t.Fatalf("GetKV after delete: %v", err)
	}

	testutil.NoError(t, a.DeleteTopic(ctx, topic))
	testutil.Eventually(t, 5*time.Second, func() error {
		if _, err := a.TopicRoute(ctx, topic); !errors.Is(err, &client.ResponseError{Code: client.CodeTopicNotExist}) {
			return fmt.Errorf("route after delete: %v", err)
		}
		return nil
	})
}

// TestClientAutoCreateStaysLocal: a topic auto-created by idc1's producer
// lives on idc1's broker only; idc2's producer then creates it on idc2's
// broker through the auto-create template rather than sending across IDCs.
func TestClientAutoCreateStaysLocal(t *testing.T) {
	c := startCluster(t, 2)
	const topic = "AutoLocalTopic"
	_, res := sendN(t, newProducer(t, clientConfig(c, 1)), topic, "a1", 3)
	testutil.Equal(t, res[0].IDC, "idc1", "first producer's IDC")
	_, res = sendN(t, newProducer(t, clientConfig(c, 2)), topic, "a2", 10)
	for _, r := range res {
		testutil.Equal(t, r.IDC, "idc2", "second producer's messages")
	}
}
