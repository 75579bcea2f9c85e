package ledger

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// Check proves the ledger's guarantees:
//
//   - every acknowledged message was consumed at least once;
//   - nothing unexpected was consumed: no key that was never sent, no key
//     stored at two positions (checkUnexpected);
//   - no acknowledgement came from a fenced master: an acknowledgement at
//     epoch E by the broker at Addr is valid only if the history has Addr
//     as the group's master at E, and E is not older than the epoch in
//     force when the send started (a master elected before the send began
//     had already fenced every earlier one);
//   - the epoch history and the acknowledgements' epochs are a
//     linearizable register (checkEpochs);
//   - for messages with an OrderKey, the first deliveries of a key's
//     messages come in the order the sends were acknowledged (a key is
//     sent by one producer, one send at a time). Redeliveries are allowed:
//     an orderly consumer may see a message again after a rebalance, but
//     never a later message of its key before an earlier one's first
//     delivery. Likewise per queue: an ordered topic's queue is consumed
//     in offset order, across a failover of its group (the new master
//     continues the same offsets).
func Check(in Input) Result {
	var r Result
	first := firstDeliveries(in.Consumptions, &r)
	for _, a := range in.Acks {
		r.Acked++
		if _, ok := first[a.Key]; ok {
			r.Consumed++
		} else {
			r.Lost++
			addExample(&r.LostExamples, fmt.Sprintf("%s acked by %s (%s) queue %d offset %d at %s, never consumed",
				a.Key, a.Group, a.Addr, a.Queue, a.Offset, a.AckedAt.Format(time.RFC3339Nano)))
		}
	}
	checkUnexpected(in, &r)
	checkFencing(in, &r)
	checkEpochs(in, &r)
	checkOrder(in.Acks, first, &r)
	checkQueueOrder(in.Acks, first, &r)
	return r
}

// firstDeliveries returns each key's first delivery (by time, then Seq)
// and counts the duplicates.
func firstDeliveries(cs []Consumption, r *Result) map[string]Consumption {
	first := make(map[string]Consumption, len(cs))
	for _, c := range cs {
		prev, seen := first[c.Key]
		if seen {
			r.Duplicates++
		}
		if !seen || before(c, prev) {
			first[c.Key] = c
		}
	}
	return first
}

func before(a, b Consumption) bool {
	if !a.At.Equal(b.At) {
		return a.At.Before(b.At)
	}
	return a.Seq < b.Seq
}

// checkFencing checks every acknowledgement against its group's history.
func checkFencing(in Input, r *Result) {
	hist := map[string][]Epoch{}
	for _, e := range in.History {
		hist[e.Group] = append(hist[e.Group], e)
	}
	for g := range hist {
		slices.SortFunc(hist[g], func(a, b Epoch) int { return cmp.Compare(a.Epoch, b.Epoch) })
	}
	for _, a := range in.Acks {
		h := hist[a.Group]
		if a.Epoch == 0 || len(h) == 0 {
			r.Unchecked++
			continue
		}
		if why := fenced(a, h, in.Grace); why != "" {
			r.FencedAcks++
			addExample(&r.FencedExamples, fmt.Sprintf("%s acked by %s (%s) at epoch %d: %s", a.Key, a.Group, a.Addr, a.Epoch, why))
		}
	}
}

// fenced says why a is not a valid master's acknowledgement under h
// (sorted by epoch), or "".
func fenced(a Ack, h []Epoch, grace time.Duration) string {
	i, found := slices.BinarySearchFunc(h, a.Epoch, func(e Epoch, epoch int64) int { return cmp.Compare(e.Epoch, epoch) })
	if !found {
		if a.Epoch < h[0].Epoch {
			// Before the recorded history (it is bounded): cannot tell.
			return ""
		}
		return "the controller never elected a master at that epoch"
	}
	if h[i].Addr != "" && a.Addr != "" && h[i].Addr != a.Addr {
		return fmt.Sprintf("the master of epoch %d was %s (id %d)", a.Epoch, h[i].Addr, h[i].MasterID)
	}
	// The epoch in force when the send started: the newest elected at or
	// before SentAt (history times of zero are unknown and skipped).
	var inForce *Epoch
	for j := range h {
		if !h[j].At.IsZero() && !h[j].At.Add(grace).After(a.SentAt) {
			if inForce == nil || h[j].Epoch > inForce.Epoch {
				inForce = &h[j]
			}
		}
	}
	if inForce != nil && inForce.Epoch > a.Epoch {
		return fmt.Sprintf("epoch %d (master %s) was elected at %s, before the send started at %s",
			inForce.Epoch, inForce.Addr, inForce.At.Format(time.RFC3339Nano), a.SentAt.Format(time.RFC3339Nano))
	}
	return ""
}

// checkOrder compares, per order key, the acknowledgement order with the
// order of first deliveries.
func checkOrder(acks []Ack, first map[string]Consumption, r *Result) {
	byKey := map[string][]Ack{}
	for _, a := range acks {
		if a.OrderKey != "" {
			byKey[a.OrderKey] = append(byKey[a.OrderKey], a)
		}
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	r.OrderedKeys = len(keys)
	for _, k := range keys {
		as := byKey[k]
		slices.SortStableFunc(as, func(a, b Ack) int { return a.AckedAt.Compare(b.AckedAt) })
		// Walk the acknowledged messages in order; each consumed one must
		// be first delivered after every earlier consumed one.
		var last *Consumption
		var lastKey string
		for _, a := range as {
			c, ok := first[a.Key]
			if !ok {
				continue // lost: counted already
			}
			if last != nil && before(c, *last) {
				r.OrderViolations++
				addExample(&r.OrderExamples, fmt.Sprintf("order key %s: %s (acked %s) first consumed at %s, before %s",
					k, a.Key, a.AckedAt.Format(time.RFC3339Nano), c.At.Format(time.RFC3339Nano), lastKey))
				continue
			}
			last, lastKey = &c, a.Key
		}
	}
}

// checkQueueOrder checks that each ordered queue's messages were first
// delivered in offset order.
func checkQueueOrder(acks []Ack, first map[string]Consumption, r *Result) {
	type queue struct {
		group string
		id    int
	}
	byQueue := map[queue][]Ack{}
	for _, a := range acks {
		if a.OrderKey != "" {
			q := queue{a.Group, a.Queue}
			byQueue[q] = append(byQueue[q], a)
		}
	}
	for q, as := range byQueue {
		slices.SortFunc(as, func(a, b Ack) int { return cmp.Compare(a.Offset, b.Offset) })
		var last *Consumption
		for _, a := range as {
			c, ok := first[a.Key]
			if !ok {
				continue
			}
			if last != nil && before(c, *last) {
				r.OrderViolations++
				addExample(&r.OrderExamples, fmt.Sprintf("queue %s/%d: offset %d (%s) first consumed before a lower offset",
					q.group, q.id, a.Offset, a.Key))
				continue
			}
			last = &c
		}
	}
}
