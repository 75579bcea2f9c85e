package e2e

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"

	"github.com/zonemq/zonemq/internal/testutil"
)

// The official rocketmq-client-go, in this test process, against zonemq
// server processes: a stock client needs nothing zonemq-specific.

func init() { rlog.SetLogLevel("error") }

// runToken keeps this run's groups and instance names apart from earlier
// runs' (the broker keeps offsets per group; the Go client keys its
// process-wide client table by instance name).
var runToken = strconv.FormatInt(time.Now().UnixNano()%1e9, 36)

// keySet records the message keys a consumer received. Safe for
// concurrent use.
type keySet struct {
	mu   sync.Mutex
	keys map[string]int
}

func newKeySet() *keySet { return &keySet{keys: map[string]int{}} }

func (s *keySet) add(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys[key]++
}

// missing lists the wanted keys not received, at most five.
func (s *keySet) missing(want []string) (n int, some []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range want {
		if s.keys[k] == 0 {
			n++
			if len(some) < 5 {
				some = append(some, k)
			}
		}
	}
	return n, some
}

// rmqSendAll sends n keyed messages with a rocketmq-client-go producer:
// the first half one by one (SendSync), the rest in batches of 25. It
// returns the keys and the brokers that stored them.
func rmqSendAll(t *testing.T, p interface {
	SendSync(context.Context, ...*primitive.Message) (*primitive.SendResult, error)
}, topic, prefix string, n int) (keys []string, brokers map[string]int) {
	t.Helper()
	ctx := context.Background()
	brokers = map[string]int{}
	msg := func(i int) *primitive.Message {
		key := fmt.Sprintf("%s-%d", prefix, i)
		keys = append(keys, key)
		return primitive.NewMessage(topic, []byte("body of "+key)).WithKeys([]string{key}).WithTag("TagA")
	}
	check := func(r *primitive.SendResult, err error, what string) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if r.Status != primitive.SendOK {
			t.Fatalf("%s: status %d", what, r.Status)
		}
		brokers[r.MessageQueue.BrokerName]++
	}
	i := 1
	for ; i <= n/2; i++ {
		r, err := p.SendSync(ctx, msg(i))
		check(r, err, "SendSync "+keys[len(keys)-1])
	}
	for i <= n {
		var batch []*primitive.Message
		for ; i <= n && len(batch) < 25; i++ {
			batch = append(batch, msg(i))
		}
		r, err := p.SendSync(ctx, batch...)
		check(r, err, fmt.Sprintf("batch SendSync ending %s", keys[len(keys)-1]))
	}
	return keys, brokers
}

// rmqConsume starts a rocketmq-client-go push consumer of topic from the
// first offset, recording into got; it is shut down at the end of the test.
func rmqConsume(t *testing.T, topic, group string, got *keySet, opts ...consumer.Option) {
	t.Helper()
	opts = append([]consumer.Option{
		consumer.WithGroupName(group),
		consumer.WithInstance("e2e-consumer-" + runToken + "-" + group),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	}, opts...)
	c, err := consumer.NewPushConsumer(opts...)
	if err != nil {
		t.Fatalf("NewPushConsumer: %v", err)
	}
	err = c.Subscribe(topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"},
		func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			for _, m := range msgs {
				got.add(m.GetKeys())
			}
			return consumer.ConsumeSuccess, nil
		})
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	if err := c.Start(); err != nil {
		t.Fatalf("push consumer Start: %v", err)
	}
	t.Cleanup(func() { c.Shutdown() })
}

// waitAllReceived waits until got holds every key of want.
func waitAllReceived(t *testing.T, got *keySet, want []string, deadline time.Duration) {
	t.Helper()
	eventually(t, deadline, func() error {
		if n, some := got.missing(want); n > 0 {
			return fmt.Errorf("%d of %d messages not received yet, e.g. %v", n, len(want), some)
		}
		return nil
	})
}

func TestE2ERocketMQClientProduceConsume(t *testing.T) {
	testHome(t)
	ns := startNamesrv(t, 1)
	startBroker(t, 1, "broker-e2e", t.TempDir(), []string{"--namesrv", ns.addr})
	const topic = "E2ERmqTopic"
	createTopic(t, topic, 1, "--namesrv", ns.addr)

	p, err := producer.NewDefaultProducer(
		producer.WithGroupName("e2e_pg_"+runToken),
		producer.WithInstanceName("e2e-producer-"+runToken+"-1"),
		producer.WithNsResolver(primitive.NewPassthroughResolver([]string{ns.addr})),
		producer.WithRetry(2),
	)
	if err != nil {
		t.Fatalf("NewDefaultProducer: %v", err)
	}
	if err := p.Start(); err != nil {
		t.Fatalf("producer Start: %v", err)
	}
	t.Cleanup(func() { p.Shutdown() })
	keys, _ := rmqSendAll(t, p, topic, "rmq", 500)

	got := newKeySet()
	rmqConsume(t, topic, "e2e_cg_"+runToken, got,
		consumer.WithNsResolver(primitive.NewPassthroughResolver([]string{ns.addr})))
	waitAllReceived(t, got, keys, 60*time.Second)
}

func TestE2ERocketMQClientViaAddrsrv(t *testing.T) {
	testHome(t)
	ns := map[int]string{}
	for n := 1; n <= 2; n++ {
		ns[n] = startNamesrv(t, n).addr
	}
	addrsrvs := map[int]*server{}
	for n := 1; n <= 2; n++ {
		addrsrvs[n] = startAddrsrv(t, n, ns)
	}
	for n := 1; n <= 2; n++ {
		startBroker(t, n, "broker-"+idcName(n), t.TempDir(), []string{"--addrsrv", addrsrvs[n].url()})
	}
	const topic = "E2ERmqViaAddrsrv"
	createTopic(t, topic, 2, "--addrsrv", addrsrvs[1].url(), "--idc", "idc1")

	domain := addrsrvs[1].url() + "/rocketmq/nsaddr"
	testutil.RemoveResolverSnapshot(t, domain)

	p, err := producer.NewDefaultProducer(
		producer.WithGroupName("e2e_pg_addrsrv_"+runToken),
		producer.WithInstanceName("e2e-producer-"+runToken+"-2"),
		producer.WithNameServerDomain(domain),
		producer.WithRetry(2),
	)
	if err != nil {
		t.Fatalf("NewDefaultProducer: %v", err)
	}
	if err := p.Start(); err != nil {
		t.Fatalf("producer Start: %v", err)
	}
	t.Cleanup(func() { p.Shutdown() })
	keys, brokers := rmqSendAll(t, p, topic, "via", 200)
	// A stock client sees every IDC's brokers (docs/architecture.md §2,
	// compatibility) and spreads its sends over their queues.
	for n := 1; n <= 2; n++ {
		if brokers["broker-"+idcName(n)] == 0 {
			t.Errorf("no message stored on broker-%s; stored: %v", idcName(n), brokers)
		}
	}

	got := newKeySet()
	rmqConsume(t, topic, "e2e_cg_addrsrv_"+runToken, got, consumer.WithNameServerDomain(domain))
	waitAllReceived(t, got, keys, 60*time.Second)
}
