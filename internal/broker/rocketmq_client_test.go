package broker

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/testutil"
)

// The official rocketmq-client-go against a real zonemq name server and
// broker: producers (sync, async, oneway, batch), push consumers
// (clustering with two members, broadcasting, tag filtering) and the pull
// consumer.

func init() { rlog.SetLogLevel("error") }

// runToken keeps this run's client ids apart from earlier runs' (the Go
// client keeps broadcasting offsets under $HOME by client id).
var runToken = strconv.FormatInt(time.Now().UnixNano()%1e9, 36)

// received records what one consumer got, keyed by message key.
type received struct {
	mu   sync.Mutex
	keys map[string]int
	tags map[string]string
}

func newReceived() *received { return &received{keys: map[string]int{}, tags: map[string]string{}} }

func (r *received) add(msgs ...*primitive.MessageExt) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range msgs {
		r.keys[m.GetKeys()]++
		r.tags[m.GetKeys()] = m.GetTags()
	}
}

func (r *received) distinct() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.keys)
}

func (r *received) has(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.keys[key] > 0
}

// missing lists the wanted keys not received (at most 5, for messages).
func missing(want []string, rs ...*received) []string {
	var out []string
	for _, k := range want {
		got := false
		for _, r := range rs {
			got = got || r.has(k)
		}
		if !got {
			out = append(out, k)
			if len(out) == 5 {
				break
			}
		}
	}
	return out
}

// startPushConsumer starts a concurrent push consumer that records into r.
func startPushConsumer(t *testing.T, nsAddr, group, instance, topic, expr string, model consumer.MessageModel, r *received) {
	t.Helper()
	c, err := consumer.NewPushConsumer(
		consumer.WithGroupName(group),
		consumer.WithInstance(instance),
		consumer.WithNsResolver(primitive.NewPassthroughResolver([]string{nsAddr})),
		consumer.WithConsumerModel(model),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	)
	testutil.NoError(t, err, "NewPushConsumer")
	err = c.Subscribe(topic, consumer.MessageSelector{Type: consumer.TAG, Expression: expr},
		func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			r.add(msgs...)
			return consumer.ConsumeSuccess, nil
		})
	testutil.NoError(t, err, "Subscribe")
	testutil.NoError(t, c.Start(), "push consumer Start")
	// Broadcasting offsets go to ~/.rocketmq_client_go: a temporary home
	// for this package's tests (TestMain).
	t.Cleanup(func() { c.Shutdown() })
}

// startRocketMQProducer starts a rocketmq-client-go producer of group on
// the name server at nsAddr (instance name prefix+runToken, unique in the
// process), shut down at cleanup.
func startRocketMQProducer(t *testing.T, nsAddr, group, prefix string, opts ...producer.Option) rocketmq.Producer {
	t.Helper()
	all := append([]producer.Option{
		producer.WithGroupName(group),
		producer.WithInstanceName(instanceName(prefix + runToken)),
		producer.WithNsResolver(primitive.NewPassthroughResolver([]string{nsAddr})),
	}, opts...)
	p, err := producer.NewDefaultProducer(all...)
	testutil.NoError(t, err, "NewDefaultProducer")
	testutil.NoError(t, p.Start(), "producer Start")
	t.Cleanup(func() { p.Shutdown() })
	return p
}

func TestBrokerRocketMQClientEndToEnd(t *testing.T) {
	ns := startNamesrv(t, "127.0.1.1:0", "idc1", nil)
	s := startBroker(t, testBrokerOptions(t, "127.0.1.1", "idc1", "broker-a", ns.Addr()))
	raw := newRawClient(t)
	const topic = "E2ETopic"
	createTopic(t, raw, s.Addr(), topic, 4)
	waitRoute(t, raw, ns.Addr(), topic, s)

	clusterGroup := "e2e_cluster_" + runToken
	broadcastGroup := "e2e_broadcast_" + runToken
	tagGroup := "e2e_tag_" + runToken
	memberA, memberB := newReceived(), newReceived()
	bcastC, bcastD := newReceived(), newReceived()
	tagged := newReceived()
	startPushConsumer(t, ns.Addr(), clusterGroup, instanceName("A"+runToken), topic, "*", consumer.Clustering, memberA)
	startPushConsumer(t, ns.Addr(), clusterGroup, instanceName("B"+runToken), topic, "*", consumer.Clustering, memberB)
	startPushConsumer(t, ns.Addr(), broadcastGroup, instanceName("C"+runToken), topic, "*", consumer.BroadCasting, bcastC)
	startPushConsumer(t, ns.Addr(), broadcastGroup, instanceName("D"+runToken), topic, "*", consumer.BroadCasting, bcastD)
	startPushConsumer(t, ns.Addr(), tagGroup, instanceName("T"+runToken), topic, "TagA", consumer.Clustering, tagged)
	testutil.Eventually(t, 20*time.Second, func() error {
		if n := len(s.ConsumerIDs(clusterGroup)); n != 2 {
			return fmt.Errorf("%d members of %s connected", n, clusterGroup)
		}
		if _, ok := s.topics.get(protocol.RetryTopic(clusterGroup)); !ok {
			return fmt.Errorf("retry topic of %s not created", clusterGroup)
		}
		return nil
	})

	p := startRocketMQProducer(t, ns.Addr(), "e2e_pg", "P", producer.WithRetry(2))

	ctx := context.Background()
	var (
		keys   []string
		tagA   []string
		mu     sync.Mutex
		async  sync.WaitGroup
		errs   []error
		offIDs = map[string]bool{}
	)
	newMsg := func(i int) *primitive.Message {
		key := fmt.Sprintf("k-%d", i)
		tag := "TagB"
		if i%2 == 0 {
			tag = "TagA"
			tagA = append(tagA, key)
		}
		keys = append(keys, key)
		return primitive.NewMessage(topic, []byte("body-"+key)).WithKeys([]string{key}).WithTag(tag)
	}
	record := func(r *primitive.SendResult, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err == nil && r.Status != primitive.SendOK {
			err = fmt.Errorf("send status %d", r.Status)
		}
		if err != nil {
			errs = append(errs, err)
			return
		}
		offIDs[r.OffsetMsgID] = true
	}
	i := 0
	// Phase 1: sync sends until both clustering members hold a share, so
	// that the share assertion does not depend on rebalance timing.
	for ; i < 200; i++ {
		record(p.SendSync(ctx, newMsg(i)))
	}
	testutil.Eventually(t, 60*time.Second, func() error {
		if memberA.distinct() == 0 || memberB.distinct() == 0 {
			return fmt.Errorf("members got %d and %d messages", memberA.distinct(), memberB.distinct())
		}
		return nil
	})
	// Phase 2: every send flavour.
	for ; i < 500; i++ {
		record(p.SendSync(ctx, newMsg(i)))
	}
	for ; i < 1000; i++ {
		async.Add(1)
		err := p.SendAsync(ctx, func(_ context.Context, r *primitive.SendResult, err error) {
			defer async.Done()
			record(r, err)
		}, newMsg(i))
		if err != nil {
			async.Done()
			record(nil, err)
		}
	}
	async.Wait()
	for ; i < 1500; i++ {
		testutil.NoError(t, p.SendOneWay(ctx, newMsg(i)), "SendOneWay")
	}
	for ; i < 2000; i += 10 {
		batch := make([]*primitive.Message, 10)
		for j := range batch {
			batch[j] = newMsg(i + j)
		}
		r, err := p.SendSync(ctx, batch...)
		record(r, err)
	}
	testutil.Equal(t, len(errs), 0, fmt.Sprintf("send errors: %v", errs))

	testutil.Eventually(t, 90*time.Second, func() error {
		if m := missing(keys, memberA, memberB); len(m) > 0 {
			return fmt.Errorf("clustering group misses %v (A %d, B %d)", m, memberA.distinct(), memberB.distinct())
		}
		if m := missing(keys, bcastC); len(m) > 0 {
			return fmt.Errorf("broadcast member C misses %v (%d)", m, bcastC.distinct())
		}
		if m := missing(keys, bcastD); len(m) > 0 {
			return fmt.Errorf("broadcast member D misses %v (%d)", m, bcastD.distinct())
		}
		if m := missing(tagA, tagged); len(m) > 0 {
			return fmt.Errorf("tag consumer misses %v (%d)", m, tagged.distinct())
		}
		return nil
	})
	tagged.mu.Lock()
	for k, tag := range tagged.tags {
		if tag != "TagA" {
			t.Errorf("the TagA consumer got %s with tag %s", k, tag)
		}
	}
	tagged.mu.Unlock()
	t.Logf("clustering shares: A %d, B %d of %d", memberA.distinct(), memberB.distinct(), len(keys))
}

func TestBrokerRocketMQPullConsumer(t *testing.T) {
	ns := startNamesrv(t, "127.0.1.1:0", "idc1", nil)
	s := startBroker(t, testBrokerOptions(t, "127.0.1.1", "idc1", "broker-p", ns.Addr()))
	raw := newRawClient(t)
	const topic = "PullTopic"
	createTopic(t, raw, s.Addr(), topic, 2)
	waitRoute(t, raw, ns.Addr(), topic, s)

	const n = 60
	want := map[string]bool{}
	for i := range n {
		key := fmt.Sprintf("p-%d", i)
		want[key] = true
		expectCode(t, sendRaw(t, raw, s.Addr(), topic, int32(i%2), map[string]string{protocol.PropertyKeys: key}, []byte(key)),
			protocol.Success, "send")
	}

	pc, err := consumer.NewPullConsumer(
		consumer.WithGroupName("pull_cg_"+runToken),
		consumer.WithInstance(instanceName("pull"+runToken)),
		consumer.WithNsResolver(primitive.NewPassthroughResolver([]string{ns.Addr()})),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	)
	testutil.NoError(t, err, "NewPullConsumer")
	testutil.NoError(t, pc.Subscribe(topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"}), "Subscribe")
	testutil.NoError(t, pc.Start(), "pull consumer Start")
	t.Cleanup(func() { pc.Shutdown() })

	got := map[string]bool{}
	testutil.Eventually(t, 60*time.Second, func() error {
		cr, err := pc.Poll(context.Background(), time.Second)
		if err == nil {
			for _, m := range cr.GetMsgList() {
				got[string(m.Body)] = true
			}
			pc.ACK(context.Background(), cr, consumer.ConsumeSuccess)
		}
		if len(got) < len(want) {
			return fmt.Errorf("pull consumer has %d of %d messages", len(got), len(want))
		}
		return nil
	})
	for k := range want {
		testutil.True(t, got[k], "pull consumer got "+k)
	}
}
