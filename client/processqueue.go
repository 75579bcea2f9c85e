package client

import (
	"context"
	"sort"
	"sync"
	"time"
)

// processQueue is one queue a push consumer holds: its pull position, the
// pulled messages not yet consumed, and the offset that may be committed.
//
// The committable offset is that of the lowest pulled message not yet
// consumed (or the next offset to pull when none is outstanding), as in
// Java's ProcessQueue: a hand-over never skips a message the handler has not
// finished, at the price of replaying those that finished above it.
type processQueue struct {
	mq     MessageQueue
	broker *brokerInfo
	sub    *subscription

	ctx    context.Context // ends when the queue is dropped
	cancel context.CancelFunc
	done   sync.WaitGroup // the queue's goroutines

	mu         sync.Mutex
	entries    []pqEntry // pulled messages, ascending offsets
	nextOffset int64     // next offset to pull
	committed  int64     // last offset the broker (or memory) confirmed; -1 none
	dropped    bool
	arrived    chan struct{} // signalled when messages are added (orderly)

	// orderly lock state (clustering)
	locked   bool
	lockedAt time.Time
}

type pqEntry struct {
	msg  *MessageExt
	done bool
}

func newProcessQueue(parent context.Context, mq MessageQueue, b *brokerInfo, sub *subscription, start int64) *processQueue {
	ctx, cancel := context.WithCancel(parent)
	return &processQueue{
		mq: mq, broker: b, sub: sub, ctx: ctx, cancel: cancel,
		nextOffset: start, committed: -1, arrived: make(chan struct{}, 1),
	}
}

// put records a pull's messages and the next offset to pull, together, so
// the committable offset never runs ahead of a message not yet recorded.
func (pq *processQueue) put(msgs []*MessageExt, next int64) bool {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	if pq.dropped {
		return false
	}
	for _, m := range msgs {
		pq.entries = append(pq.entries, pqEntry{msg: m})
	}
	pq.nextOffset = next
	if len(msgs) > 0 {
		select {
		case pq.arrived <- struct{}{}:
		default:
		}
	}
	return true
}

// setNext moves the pull position (no messages came).
func (pq *processQueue) setNext(next int64) {
	pq.mu.Lock()
	pq.nextOffset = next
	pq.mu.Unlock()
}

// next is the offset to pull from.
func (pq *processQueue) next() int64 {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	return pq.nextOffset
}

// cached counts messages pulled and not yet consumed.
func (pq *processQueue) cached() int {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	return len(pq.entries)
}

// markDone records msgs as consumed and drops the consumed run at the front.
func (pq *processQueue) markDone(msgs []*MessageExt) {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	for _, m := range msgs {
		i := sort.Search(len(pq.entries), func(i int) bool { return pq.entries[i].msg.QueueOffset >= m.QueueOffset })
		if i < len(pq.entries) && pq.entries[i].msg == m {
			pq.entries[i].done = true
		}
	}
	n := 0
	for n < len(pq.entries) && pq.entries[n].done {
		pq.entries[n] = pqEntry{}
		n++
	}
	if n > 0 {
		pq.entries = pq.entries[n:]
		if len(pq.entries) == 0 {
			pq.entries = nil // release the array
		}
	}
}

// commitOffset is the offset that may be committed now.
func (pq *processQueue) commitOffset() int64 {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	if len(pq.entries) > 0 {
		return pq.entries[0].msg.QueueOffset
	}
	return pq.nextOffset
}

// head returns up to n messages from the front that are not yet consumed
// (orderly mode consumes strictly from the front).
func (pq *processQueue) head(n int) []*MessageExt {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	var out []*MessageExt
	for i := 0; i < len(pq.entries) && len(out) < n; i++ {
		if !pq.entries[i].done {
			out = append(out, pq.entries[i].msg)
		}
	}
	return out
}

// drop marks the queue dropped and stops its goroutines' work.
func (pq *processQueue) drop() {
	pq.mu.Lock()
	pq.dropped = true
	pq.mu.Unlock()
	pq.cancel()
}

func (pq *processQueue) isDropped() bool {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	return pq.dropped
}

// setLocked records the outcome of a lock request.
func (pq *processQueue) setLocked(ok bool) {
	pq.mu.Lock()
	pq.locked = ok
	if ok {
		pq.lockedAt = time.Now()
	}
	pq.mu.Unlock()
}

// lockValid reports whether the broker lock is held and recent: a lock not
// renewed within maxAge may have expired on the broker.
func (pq *processQueue) lockValid(maxAge time.Duration) bool {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	return pq.locked && time.Since(pq.lockedAt) < maxAge
}
