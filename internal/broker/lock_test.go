package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/testutil"
)

// lockRaw sends LOCK_BATCH_MQ and returns the queue ids locked.
func lockRaw(t *testing.T, c *remoting.Client, addr, group, clientID string, mqs []protocol.MessageQueue) string {
	t.Helper()
	body, _ := json.Marshal(lockBatchBody{ConsumerGroup: group, ClientID: clientID, MQSet: mqs})
	resp := invoke(t, c, addr, protocol.LockBatchMQ, nil, body)
	expectCode(t, resp, protocol.Success, "LOCK_BATCH_MQ")
	var got lockBatchResponseBody
	testutil.NoError(t, json.Unmarshal(resp.Body, &got), "lock answer")
	ids := ""
	for _, q := range got.LockOKMQSet {
		ids += strconv.Itoa(q.QueueID)
	}
	return ids
}

// unlockRaw sends UNLOCK_BATCH_MQ.
func unlockRaw(t *testing.T, c *remoting.Client, addr, group, clientID string, mqs []protocol.MessageQueue) {
	t.Helper()
	body, _ := json.Marshal(lockBatchBody{ConsumerGroup: group, ClientID: clientID, MQSet: mqs})
	expectCode(t, invoke(t, c, addr, protocol.UnlockBatchMQ, nil, body), protocol.Success, "UNLOCK_BATCH_MQ")
}

func TestBrokerLockBatchRaw(t *testing.T) {
	opts := testBrokerOptions(t, "127.0.1.1", "idc1", "broker-lock")
	opts.LockLease = 2 * time.Second
	s := startBroker(t, opts)
	const topic, group = "LockTopic", "lock_cg"
	qs := testQueues(topic, 4)
	for i := range qs {
		qs[i].BrokerName = "broker-lock"
	}
	clients := map[string]*remoting.Client{}
	for _, id := range []string{"A", "B", "C"} {
		c := newRawClient(t)
		clients[id] = c
		hb := heartbeatBody(id, group, protocol.MessageModelCluster, map[string]string{topic: "*"})
		expectCode(t, invoke(t, c, s.Addr(), protocol.HeartBeat, nil, hb), protocol.Success, "heartbeat "+id)
	}
	a, b, c := clients["A"], clients["B"], clients["C"]
	addr := s.Addr()

	testutil.Equal(t, lockRaw(t, a, addr, group, "A", qs[0:2]), "01", "A locks 0 and 1")
	testutil.Equal(t, lockRaw(t, b, addr, group, "B", qs[1:3]), "2", "B gets 2 only")
	unlockRaw(t, b, addr, group, "B", qs[1:2])
	testutil.Equal(t, s.QueueLockOwners(group)[qs[1]], "A", "an unlock by a non-owner is ignored")
	unlockRaw(t, a, addr, group, "A", qs[1:2])
	testutil.Equal(t, lockRaw(t, b, addr, group, "B", qs[1:2]), "1", "B locks the queue A released")
	testutil.Equal(t, lockRaw(t, b, addr, group, "B", qs[1:3]), "12", "B renews")

	// A's connection closes: its lock is free at once, lease or not.
	testutil.Equal(t, lockRaw(t, c, addr, group, "C", qs[0:1]), "", "C is refused A's queue")
	a.Close()
	testutil.Eventually(t, 10*time.Second, func() error {
		if got := lockRaw(t, c, addr, group, "C", qs[0:1]); got != "0" {
			return fmt.Errorf("C still cannot lock queue 0 after A left")
		}
		return nil
	})

	// The lease: C holds queue 3; B is refused until C stops renewing.
	testutil.Equal(t, lockRaw(t, c, addr, group, "C", qs[3:4]), "3", "C locks 3")
	testutil.Equal(t, lockRaw(t, b, addr, group, "B", qs[3:4]), "", "B is refused 3")
	testutil.Eventually(t, 10*time.Second, func() error {
		if got := lockRaw(t, b, addr, group, "B", qs[3:4]); got != "3" {
			return fmt.Errorf("B cannot lock queue 3 yet")
		}
		return nil
	})
	owners := s.QueueLockOwners(group)
	testutil.Equal(t, owners[qs[3]], "B", "B owns 3 after C's lease ran out")

	// Bad bodies.
	expectCode(t, invoke(t, b, addr, protocol.LockBatchMQ, nil, []byte("{")), protocol.InvalidParameter, "bad JSON")
	body, _ := json.Marshal(lockBatchBody{ConsumerGroup: group, MQSet: qs})
	expectCode(t, invoke(t, b, addr, protocol.LockBatchMQ, nil, body), protocol.InvalidParameter, "no clientId")
}

// orderlyLog records what each orderly consumer consumed, per queue.
type orderlyLog struct {
	mu         sync.Mutex
	seqs       map[string]map[int][]int // consumer → queue → sequence numbers in consumption order
	violations []string
}

func (l *orderlyLog) add(consumerName string, queue, seq int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seqs[consumerName] == nil {
		l.seqs[consumerName] = map[int][]int{}
	}
	l.seqs[consumerName][queue] = append(l.seqs[consumerName][queue], seq)
}

func (l *orderlyLog) violate(format string, a ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.violations = append(l.violations, fmt.Sprintf(format, a...))
}

// consumed returns the distinct sequence numbers consumed by anyone.
func (l *orderlyLog) consumed() map[int]bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[int]bool{}
	for _, qs := range l.seqs {
		for _, seqs := range qs {
			for _, s := range seqs {
				out[s] = true
			}
		}
	}
	return out
}

// TestBrokerLockOrderlyRocketMQClient runs two orderly push consumers of one
// group: a queue is consumed only by the client the broker's lock table
// names as its owner, each client consumes each queue in order, and when one
// consumer leaves the other takes over its queues.
func TestBrokerLockOrderlyRocketMQClient(t *testing.T) {
	if raceDetector {
		t.Skip("rocketmq-client-go's orderly consumer races with itself (processQueue.takeMessages); run without -race")
	}
	// rocketmq-client-go does not unlock a queue it loses in a rebalance, so
	// the new owner gets it when the lease runs out (and the new owner's
	// next 20 s rebalance asks again): keep the lease short.
	ns := startNamesrv(t, "127.0.1.1:0", "idc1", nil)
	const brokerName = "broker-orderly"
	opts := testBrokerOptions(t, "127.0.1.1", "idc1", brokerName, ns.Addr())
	opts.LockLease = 4 * time.Second
	s := startBroker(t, opts)
	raw := newRawClient(t)
	const topic, queues = "OrderTopic", 4
	group := "order_cg_" + runToken
	createTopic(t, raw, s.Addr(), topic, queues)
	createTopic(t, raw, s.Addr(), protocol.RetryTopic(group), 1)
	waitRoute(t, raw, ns.Addr(), topic, s)
	waitRoute(t, raw, ns.Addr(), protocol.RetryTopic(group), s)

	log := &orderlyLog{seqs: map[string]map[int][]int{}}
	var checkOwner atomic.Bool
	checkOwner.Store(true)
	start := func(name string) interface{ Shutdown() error } {
		inst := instanceName(name + runToken)
		c, err := consumer.NewPushConsumer(
			consumer.WithGroupName(group),
			consumer.WithInstance(inst),
			consumer.WithNsResolver(primitive.NewPassthroughResolver([]string{ns.Addr()})),
			consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
			consumer.WithConsumerOrder(true),
			consumer.WithRebalanceLockInterval(500*time.Millisecond),
		)
		testutil.NoError(t, err, "NewPushConsumer "+name)
		err = c.Subscribe(topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"},
			func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
				for _, m := range msgs {
					seq, _ := strconv.Atoi(string(m.Body))
					q := m.Queue.QueueId
					if checkOwner.Load() {
						mq := protocol.MessageQueue{Topic: topic, BrokerName: brokerName, QueueID: q}
						if owner := s.QueueLockOwners(group)[mq]; !strings.HasSuffix(owner, "@"+inst) {
							log.violate("%s consumed queue %d (message %d) while the broker names %q its owner", name, q, seq, owner)
						}
					}
					log.add(name, q, seq)
				}
				return consumer.ConsumeSuccess, nil
			})
		testutil.NoError(t, err, "Subscribe "+name)
		testutil.NoError(t, c.Start(), "Start "+name)
		return c
	}
	seq := 0
	send := func(n int) []int {
		var out []int
		for range n {
			expectCode(t, sendRaw(t, raw, s.Addr(), topic, int32(seq%queues), nil, []byte(strconv.Itoa(seq))), protocol.Success, "send")
			out = append(out, seq)
			seq++
		}
		return out
	}
	waitConsumed := func(want []int, deadline time.Duration) {
		t.Helper()
		testutil.Eventually(t, deadline, func() error {
			got := log.consumed()
			for _, s := range want {
				if !got[s] {
					return fmt.Errorf("message %d not consumed yet (%d of %d)", s, len(got), seq)
				}
			}
			return nil
		})
	}
	// ownersSplit reports which consumer (by instance prefix) owns each
	// topic queue.
	ownerNames := func() map[int]string {
		out := map[int]string{}
		for mq, owner := range s.QueueLockOwners(group) {
			if mq.Topic == topic {
				_, inst, _ := strings.Cut(owner, "@")
				out[mq.QueueID] = inst[:1]
			}
		}
		return out
	}

	a := start("A")
	aStopped := false
	t.Cleanup(func() {
		if !aStopped {
			a.Shutdown()
		}
	})
	waitConsumed(send(20), 20*time.Second)

	b := start("B")
	t.Cleanup(func() { b.Shutdown() })
	// B gets its share once A's lease on it has run out and B's rebalance
	// asks again (its timer fires 20 s after its start).
	testutil.Eventually(t, 45*time.Second, func() error {
		owners := ownerNames()
		n := map[string]int{}
		for _, o := range owners {
			n[o]++
		}
		if len(owners) != queues || n["A"] == 0 || n["B"] == 0 {
			return fmt.Errorf("topic queues owned: %v", owners)
		}
		return nil
	})
	waitConsumed(send(40), 20*time.Second)

	// A leaves: it unlocks at shutdown and B takes every queue at once.
	checkOwner.Store(false)
	a.Shutdown()
	aStopped = true
	testutil.Eventually(t, 20*time.Second, func() error {
		owners := ownerNames()
		for q := range queues {
			if owners[q] != "B" {
				return fmt.Errorf("topic queues owned: %v", owners)
			}
		}
		return nil
	})
	waitConsumed(send(20), 20*time.Second)

	log.mu.Lock()
	defer log.mu.Unlock()
	for _, v := range log.violations {
		t.Error(v)
	}
	for name, qs := range log.seqs {
		for q, seqs := range qs {
			if !slices.IsSorted(seqs) || len(slices.Compact(slices.Clone(seqs))) != len(seqs) {
				t.Errorf("%s consumed queue %d out of order: %v", name, q, seqs)
			}
			for _, s := range seqs {
				if s%queues != q {
					t.Errorf("message %d consumed from queue %d", s, q)
				}
			}
		}
	}
}
