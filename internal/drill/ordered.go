package drill

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/client/admin"
	"github.com/zonemq/zonemq/internal/ledger"
	"github.com/zonemq/zonemq/internal/protocol"
)

// The ordered-topic check (issue 15): one producer sends numbered messages
// for a few order keys with SendOrderly under the `strict` order policy,
// and one orderly consumer reads them; the ledger checker then proves each
// key's messages were consumed in the order they were acknowledged,
// across the failovers and fail-backs the controller scenarios cause.
const (
	orderedTopic    = "ZonemqDrillOrdered"
	orderedGroup    = "zonemq_drill_ordered_cg"
	orderedProducer = "zonemq_drill_ordered_pg"
	// orderedKeys order keys, orderedQueues queues per broker group.
	orderedKeys   = 12
	orderedQueues = 2
)

// orderedWork is the ordered producer and consumer; both run in the drill
// process, in idc1 but knowing every IDC's address server (so the check
// survives the loss of any IDC).
type orderedWork struct {
	producer *client.Producer
	consumer *client.PushConsumer

	mu    sync.Mutex
	acks  []ledger.Ack
	recvs []ledger.Consumption
	// failed are the keys of sends that failed (they may be stored).
	failed []string
	seq    atomic.Int64

	stop context.CancelFunc
	wg   sync.WaitGroup
}

func orderedClientConfig(c *cluster, logger *slog.Logger) client.ClientConfig {
	home := c.idcs[0]
	cfg := client.ClientConfig{IDC: home.name, LocalIP: home.ip, Dial: home.dial, Logger: logger.With("client", "ordered")}
	for _, i := range c.idcs {
		cfg.AddrsrvURLs = append(cfg.AddrsrvURLs, i.addrsrvURL())
	}
	return cfg
}

// startOrdered creates the ordered topic on every group with a fixed queue
// list (ORDER_TOPIC_CONFIG, so a key's queue never moves) and the strict
// policy, then starts the consumer and the producer.
func startOrdered(ctx context.Context, c *cluster, interval time.Duration, logger *slog.Logger) (*orderedWork, error) {
	cfg := orderedClientConfig(c, logger)
	acfg := cfg
	acfg.ClusterSecretFile = c.secretFile // ORDER_TOPIC_CONFIG is a KV write: a member request
	var conf []string
	for _, i := range c.idcs {
		conf = append(conf, fmt.Sprintf("broker-%s:%d", i.name, orderedQueues))
	}
	err := withAdmin(ctx, acfg, "creating the ordered topic", func(adm *admin.Client) error {
		err := adm.CreateTopic(ctx, admin.TopicSpec{Topic: orderedTopic, Queues: orderedQueues, Order: true})
		if err == nil {
			err = adm.PutKV(ctx, protocol.OrderTopicConfigNamespace, orderedTopic, strings.Join(conf, ";"))
		}
		if err == nil {
			err = adm.SetOrderPolicy(ctx, orderedTopic, client.OrderStrict)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	w := &orderedWork{}
	w.consumer, err = client.NewPushConsumer(client.ConsumerConfig{ClientConfig: cfg, Group: orderedGroup,
		Orderly: true, ConsumeFromWhere: client.ConsumeFromFirstOffset})
	if err != nil {
		return nil, err
	}
	if err := w.consumer.Subscribe(orderedTopic, "*", w.handle); err != nil {
		return nil, err
	}
	if err := w.consumer.Start(ctx); err != nil {
		return nil, fmt.Errorf("drill: starting the ordered consumer: %w", err)
	}
	if w.producer, err = startProducer(ctx, cfg, orderedProducer, "ordered"); err != nil {
		w.consumer.Shutdown(context.Background())
		return nil, err
	}
	sendCtx, cancel := context.WithCancel(context.Background())
	w.stop = cancel
	w.wg.Add(1)
	go w.sendLoop(sendCtx, interval)
	return w, nil
}

// handle records every delivery; a message's key is "<order key>/<n>".
func (w *orderedWork) handle(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range msgs {
		if len(m.Keys) == 0 {
			continue
		}
		w.recvs = append(w.recvs, ledger.Consumption{Key: m.Keys[0], Consumer: "ordered", Group: m.BrokerName,
			Queue: m.QueueID, Offset: m.QueueOffset, At: now, Seq: w.seq.Add(1)})
	}
	return client.ConsumeSuccess
}

// sendLoop sends the keys' messages round robin, one send at a time, so
// each key's acknowledgement order is its send order.
func (w *orderedWork) sendLoop(ctx context.Context, interval time.Duration) {
	defer w.wg.Done()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var next [orderedKeys]int
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		k := n % orderedKeys
		next[k]++
		orderKey := fmt.Sprintf("order-%d", k)
		key := fmt.Sprintf("%s/%d", orderKey, next[k])
		start := time.Now()
		res, err := w.producer.SendOrderly(context.Background(), &client.Message{Topic: orderedTopic, Keys: []string{key},
			Body: []byte(key)}, client.HashSelector{}, orderKey)
		end := time.Now()
		w.mu.Lock()
		if err != nil || res.Status != client.SendOK {
			w.failed = append(w.failed, key)
		} else {
			w.acks = append(w.acks, ackOf(key, orderKey, res, start, end))
		}
		w.mu.Unlock()
	}
}

// ackOf is the ledger entry of an acknowledged send.
func ackOf(key, orderKey string, res *client.SendResult, start, end time.Time) ledger.Ack {
	return ledger.Ack{Key: key, OrderKey: orderKey, Group: res.BrokerName, Addr: res.BrokerAddr,
		Queue: res.Queue.QueueID, Offset: res.QueueOffset, Epoch: sendEpoch(res), SentAt: start, AckedAt: end}
}

// snapshot copies the records.
func (w *orderedWork) snapshot() ([]ledger.Ack, []ledger.Consumption, []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]ledger.Ack(nil), w.acks...), append([]ledger.Consumption(nil), w.recvs...), append([]string(nil), w.failed...)
}

// unconsumed counts acknowledged messages not delivered yet.
func (w *orderedWork) unconsumed() int {
	acks, recvs, _ := w.snapshot()
	return undelivered(acks, recvs)
}

// undelivered counts the acknowledged keys no delivery has.
func undelivered(acks []ledger.Ack, recvs []ledger.Consumption) int {
	got := make(map[string]bool, len(recvs))
	for _, r := range recvs {
		got[r.Key] = true
	}
	n := 0
	for _, a := range acks {
		if !got[a.Key] {
			n++
		}
	}
	return n
}

func (w *orderedWork) stopSending() {
	if w.stop != nil {
		w.stop()
	}
	w.wg.Wait()
}

func (w *orderedWork) close(ctx context.Context) {
	w.stopSending()
	w.producer.Shutdown(ctx)
	w.consumer.Shutdown(ctx)
}

// withAdmin runs do with an admin client of cfg until it succeeds, for up
// to 30 s (the cluster may still be settling): how each workload creates
// its topic.
func withAdmin(ctx context.Context, cfg client.ClientConfig, what string, do func(*admin.Client) error) error {
	adm, err := admin.New(admin.Config{ClientConfig: cfg})
	if err != nil {
		return err
	}
	if err := adm.Start(ctx); err != nil {
		return err
	}
	defer adm.Shutdown(context.Background())
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := do(adm)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("drill: %s: %w", what, err)
		}
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}

// startProducer starts a producer of group; what names it in an error.
func startProducer(ctx context.Context, cfg client.ClientConfig, group, what string) (*client.Producer, error) {
	p, err := client.NewProducer(client.ProducerConfig{ClientConfig: cfg, Group: group})
	if err == nil {
		err = p.Start(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("drill: starting the %s producer: %w", what, err)
	}
	return p, nil
}
