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

// orderedQueues lists the writable queues for ordered sends: following the
// route's orderTopicConf ("brokerA:4;brokerB:4", in its order) when there
// is one, else the route's queues by broker name. When the own IDC has any,
// only the own IDC's are listed, so an order key maps to one queue of the
// own IDC and ordered traffic stays local; otherwise every IDC's, in the
// route's order. Brokers without a live master are left out.
func orderedQueues(r *route, own string) []writeQueue {
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
	qs = idc.OwnFirst(qs, writeQueueIDC, own)
	n := 0
	for n < len(qs) && idc.Same(qs[n].broker.idc, own) {
		n++
	}
	if n > 0 {
		return qs[:n]
	}
	return qs
}

// pickSelected returns a picker that asks selector among the queues of the
// brokers not yet tried.
func (s *sender) pickSelected(msg *Message, selector QueueSelector, arg any) picker {
	return func(r *route, tried map[string]bool) (writeQueue, error) {
		var avail []writeQueue
		for _, q := range orderedQueues(r, s.c.cfg.IDC) {
			if !tried[q.broker.name] {
				avail = append(avail, q)
			}
		}
		if len(avail) == 0 {
			if len(tried) == 0 {
				return writeQueue{}, fmt.Errorf("%w: topic %s has no writable queue", ErrNoRoute, msg.Topic)
			}
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
