package broker

import (
	"container/heap"
	"context"
	"math/rand/v2"
	"time"
)

// Expiry of parked pulls. One loop answers the pulls whose hold time has
// passed, earliest first, with at most expiryAnswersInFlight answers being
// written at once, instead of a timer and a goroutine per pull firing
// together: 300 000 pulls parked in one burst used to expire in one burst
// too, stalling the broker for ~45 s (and its name-server heartbeats with
// it). Each pull is also answered up to an eighth of its hold early, at
// random, so a burst parked together does not come due together.
const (
	expiryAnswersInFlight = 256
	// expiryBatch is the most pulls taken from the heap per lock hold.
	expiryBatch = 1024
)

// spreadExpiry returns when a pull parked at now with deadline is
// answered: the deadline less a random share of up to an eighth of the
// hold. Answering a long poll early is always allowed: the client pulls
// again.
func spreadExpiry(now, deadline time.Time) time.Time {
	hold := deadline.Sub(now)
	if hold < 8 {
		return deadline
	}
	return deadline.Add(-time.Duration(rand.Int64N(int64(hold / 8))))
}

// pullHeap orders parked pulls by expireAt (container/heap).
type pullHeap []*parkedPull

func (q pullHeap) Len() int           { return len(q) }
func (q pullHeap) Less(i, j int) bool { return q[i].expireAt.Before(q[j].expireAt) }
func (q pullHeap) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].heapIndex, q[j].heapIndex = i, j
}
func (q *pullHeap) Push(x any) {
	pp := x.(*parkedPull)
	pp.heapIndex = len(*q)
	*q = append(*q, pp)
}
func (q *pullHeap) Pop() any {
	old := *q
	pp := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	pp.heapIndex = -1
	return pp
}

// pushExpiryLocked adds pp to the expiry heap and wakes the loop if pp is
// now the first due. Caller holds mu.
func (h *pullHolder) pushExpiryLocked(pp *parkedPull) {
	heap.Push(&h.expiries, pp)
	if pp.heapIndex == 0 {
		select {
		case h.wake <- struct{}{}:
		default:
		}
	}
}

// removeExpiryLocked takes pp out of the expiry heap. Caller holds mu.
func (h *pullHolder) removeExpiryLocked(pp *parkedPull) {
	if pp.heapIndex >= 0 && pp.heapIndex < len(h.expiries) && h.expiries[pp.heapIndex] == pp {
		heap.Remove(&h.expiries, pp.heapIndex)
	}
}

// expiryLoop answers parked pulls whose time has come until ctx ends.
func (h *pullHolder) expiryLoop(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		due, next := h.takeDue(time.Now())
		for _, pp := range due {
			select {
			case h.answering <- struct{}{}:
			case <-ctx.Done():
				// Shutting down: close answers what is still parked;
				// these were taken already, so answer them here.
				h.answering <- struct{}{}
			}
			go func() {
				defer func() { <-h.answering }()
				h.answer(pp, false)
			}()
		}
		if len(due) == expiryBatch {
			continue // more are due now
		}
		timer.Reset(next)
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-h.wake:
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		}
	}
}

// takeDue removes up to expiryBatch pulls due at now from the holder (the
// caller then owns answering them) and returns the wait until the next.
func (h *pullHolder) takeDue(now time.Time) ([]*parkedPull, time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var due []*parkedPull
	for len(h.expiries) > 0 && len(due) < expiryBatch && !h.expiries[0].expireAt.After(now) {
		pp := h.expiries[0]
		h.takeLocked(pp)
		h.wg.Add(1) // answer's Done
		due = append(due, pp)
	}
	next := time.Hour
	if len(h.expiries) > 0 {
		next = max(h.expiries[0].expireAt.Sub(now), 0)
	}
	return due, next
}
