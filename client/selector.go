package client

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/zonemq/zonemq/internal/idc"
)

// QueueSelector chooses the queue of an ordered send (Producer.SendOrderly).
// queues is never empty; Select must return one of its elements.
// Implementations must be safe for concurrent use.
type QueueSelector interface {
	Select(queues []MessageQueue, msg *Message, arg any) MessageQueue
}

// QueueSelectorFunc adapts a function to QueueSelector.
type QueueSelectorFunc func(queues []MessageQueue, msg *Message, arg any) MessageQueue

// Select calls f.
func (f QueueSelectorFunc) Select(queues []MessageQueue, msg *Message, arg any) MessageQueue {
	return f(queues, msg, arg)
}

// HashSelector maps arg (an order key such as an order id) to
// queues[hash(arg) % len(queues)], hashing arg's fmt "%v" text with
// FNV-1a. Integers map by value. The zero value is ready to use.
type HashSelector struct{}

// Select implements QueueSelector.
func (HashSelector) Select(queues []MessageQueue, _ *Message, arg any) MessageQueue {
	var h uint64
	switch v := arg.(type) {
	case int:
		h = uint64(v)
	case int64:
		h = uint64(v)
	case uint64:
		h = v
	default:
		f := fnv.New64a()
		fmt.Fprint(f, arg)
		h = f.Sum64()
	}
	return queues[h%uint64(len(queues))]
}

// orderQueues lists a route's writable queues for ordered sends: following
// its orderTopicConf ("brokerA:4;brokerB:4", in that order) when it has
// one, else by broker name and queue id. Brokers without a live master are
// left out.
func orderQueues(r *route) []writeQueue {
	var qs []writeQueue
	if conf := r.data.OrderTopicConf; conf != "" {
		for _, item := range strings.Split(conf, ";") {
			name, num, ok := strings.Cut(strings.TrimSpace(item), ":")
			n, err := strconv.Atoi(num)
			b := r.brokers[name]
			if !ok || err != nil || b == nil || b.master() == "" {
				continue
			}
			for i := 0; i < n; i++ {
				qs = append(qs, writeQueue{broker: b, queueID: i})
			}
		}
	}
	if len(qs) == 0 {
		qs = r.sendQueues()
	}
	return qs
}

// orderedChoices is what the selector of an ordered send chooses from: the
// own IDC's queues of the topic (in orderQueues order); else the own IDC's
// auto-create queues; else every IDC's queues of the topic; else the
// template's. An order key thus maps to one queue of the own IDC, and
// ordered traffic stays local while the own IDC has a broker.
func (s *sender) orderedChoices(p *sendPlan) [][]writeQueue {
	var own, all []writeQueue
	if r := s.c.routes.cached(p.topic); r != nil {
		all = orderQueues(r)
		for _, q := range all {
			if idc.Same(q.broker.idc, s.c.cfg.IDC) {
				own = append(own, q)
			}
		}
	}
	return [][]writeQueue{own, p.tiers[1], all, p.tiers[3]}
}

// pickSelected returns a picker that asks selector among the best choices'
// queues whose broker was not tried yet.
func (s *sender) pickSelected(msg *Message, selector QueueSelector, arg any) picker {
	return func(p *sendPlan, tried map[string]bool) (writeQueue, error) {
		var avail []writeQueue
		for _, choice := range s.orderedChoices(p) {
			for _, q := range choice {
				if !tried[q.broker.name] {
					avail = append(avail, q)
				}
			}
			if len(avail) > 0 {
				break
			}
		}
		if len(avail) == 0 {
			return writeQueue{}, errNoQueue
		}
		mqs := make([]MessageQueue, len(avail))
		for i, q := range avail {
			mqs[i] = MessageQueue{Topic: msg.Topic, BrokerName: q.broker.name, QueueID: q.queueID}
		}
		chosen := selector.Select(mqs, msg, arg)
		for i, mq := range mqs {
			if mq == chosen {
				return avail[i], nil
			}
		}
		return writeQueue{}, fmt.Errorf("%w: the selector chose %s, which is not among the offered queues", ErrInvalidMessage, chosen)
	}
}

// mustJSON encodes v, a value of a fixed struct type that always encodes.
func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
