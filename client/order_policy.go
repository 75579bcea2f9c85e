package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zonemq/zonemq/internal/idc"
	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// OrderPolicy says what SendOrderly does when the broker holding the
// queue a message maps to is down. It is set per topic in the name
// servers' KV config, namespace OrderPolicyNamespace, key the topic
// (admin.Client.SetOrderPolicy, or zonemq admin kv put).
type OrderPolicy string

const (
	// OrderAvailable (the default) keeps ordered sends going: the selector
	// is asked again without the failed broker's queues, so a key moves to
	// a live broker. Order per key holds from the failover on (and again
	// from the fail-back on); messages sent around the switch may be
	// consumed out of order.
	OrderAvailable OrderPolicy = "available"
	// OrderStrict never moves a queue's messages: a key always maps to the
	// same queue, and while that queue's broker has no live master the
	// send fails with ErrOrderedQueueUnavailable, until the broker returns
	// or its group fails over to a replica (same broker name). Order per
	// key holds across failures; availability is given up for the keys of
	// the dead broker.
	OrderStrict OrderPolicy = "strict"
)

// OrderPolicyNamespace is the name-server KV namespace of the per-topic
// order policies.
const OrderPolicyNamespace = "ZONEMQ_ORDER_POLICY"

// orderPolicyTTL is how long a topic's policy is used before it is read
// again from the name servers.
const orderPolicyTTL = 10 * time.Second

// ErrOrderedQueueUnavailable is the error of an ordered send under
// OrderStrict whose queue's broker is down (errors.Is on the SendError).
var ErrOrderedQueueUnavailable = errors.New("zonemq client: the ordered queue's broker is unavailable (strict order policy)")

// orderPolicies caches the topics' policies and, for strict topics, the
// queues ever seen, so a key keeps its queue when a broker leaves the
// route. Used by the producer's ordered sends; safe for concurrent use.
type orderPolicies struct {
	c *core

	mu       sync.Mutex
	policies map[string]cachedPolicy            // by topic
	seen     map[string]map[MessageQueue]string // strict: topic → queue → broker IDC
}

type cachedPolicy struct {
	policy OrderPolicy
	read   time.Time
}

func newOrderPolicies(c *core) *orderPolicies {
	return &orderPolicies{c: c, policies: map[string]cachedPolicy{}, seen: map[string]map[MessageQueue]string{}}
}

// policy returns topic's policy, reading the name servers at most every
// orderPolicyTTL. When they cannot be read the last known policy stays
// (available when none is known), so an outage of the name servers does
// not switch a strict topic to available.
func (o *orderPolicies) policy(ctx context.Context, topic string) OrderPolicy {
	o.mu.Lock()
	cp, ok := o.policies[topic]
	o.mu.Unlock()
	if ok && time.Since(cp.read) < orderPolicyTTL {
		return cp.policy
	}
	if !ok {
		cp.policy = OrderAvailable
	}
	h := protocol.GetKVConfigRequestHeader{Namespace: OrderPolicyNamespace, Key: topic}
	resp, _, err := o.c.ns.invoke(ctx, func() *remoting.Command { return request(protocol.GetKVConfig, h.Ext(), nil) })
	switch {
	case err != nil:
		return cp.policy
	case resp.Code == int32(protocol.Success) && OrderPolicy(strings.TrimSpace(resp.Ext("value"))) == OrderStrict:
		cp.policy = OrderStrict
	default: // not found, or any other value
		cp.policy = OrderAvailable
	}
	cp.read = time.Now()
	o.mu.Lock()
	o.policies[topic] = cp
	o.mu.Unlock()
	return cp.policy
}

// universe is the stable queue list of a strict topic: its route's
// orderTopicConf when it has one (every entry, live or not), else every
// queue ever seen in its routes, the own IDC's only when it has any, by
// broker name and queue id.
func (o *orderPolicies) universe(topic string, r *route, ownIDC string) []MessageQueue {
	if r != nil && r.data.OrderTopicConf != "" {
		var out []MessageQueue
		for _, item := range strings.Split(r.data.OrderTopicConf, ";") {
			name, num, ok := strings.Cut(strings.TrimSpace(item), ":")
			n, err := strconv.Atoi(num)
			if !ok || err != nil {
				continue
			}
			for i := range n {
				out = append(out, MessageQueue{Topic: topic, BrokerName: name, QueueID: i})
			}
		}
		if len(out) > 0 {
			return out
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	seen := o.seen[topic]
	if seen == nil {
		seen = map[MessageQueue]string{}
		o.seen[topic] = seen
	}
	if r != nil {
		for _, q := range orderQueues(r) {
			seen[MessageQueue{Topic: topic, BrokerName: q.broker.name, QueueID: q.queueID}] = q.broker.idc
		}
	}
	var own, all []MessageQueue
	for q, where := range seen {
		all = append(all, q)
		if idc.Same(where, ownIDC) {
			own = append(own, q)
		}
	}
	if len(own) > 0 {
		all = own
	}
	slices.SortFunc(all, func(x, y MessageQueue) int {
		if c := strings.Compare(x.BrokerName, y.BrokerName); c != 0 {
			return c
		}
		return x.QueueID - y.QueueID
	})
	return all
}

// pickStrict asks selector among the strict topic's stable queue list and
// sends only to the queue it chooses: while that queue's broker has no
// live master (or failed in this send) the send fails with
// ErrOrderedQueueUnavailable instead of moving the message.
func (o *orderPolicies) pickStrict(s *sender, msg *Message, selector QueueSelector, arg any) picker {
	return func(p *sendPlan, tried map[string]bool) (writeQueue, error) {
		r := s.c.routes.cached(p.topic)
		u := o.universe(p.topic, r, s.c.cfg.IDC)
		if len(u) == 0 {
			return writeQueue{}, errNoQueue
		}
		chosen := selector.Select(u, msg, arg)
		if !slices.Contains(u, chosen) {
			return writeQueue{}, fmt.Errorf("%w: the selector chose %s, which is not among the offered queues", ErrInvalidMessage, chosen)
		}
		if r != nil && !tried[chosen.BrokerName] {
			for _, q := range orderQueues(r) {
				if q.broker.name == chosen.BrokerName && q.queueID == chosen.QueueID {
					return q, nil
				}
			}
		}
		return writeQueue{}, fmt.Errorf("%w: queue %s", ErrOrderedQueueUnavailable, chosen)
	}
}
