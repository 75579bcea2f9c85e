package broker

import (
	"sync"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// queueKey names one queue of a topic.
type queueKey struct {
	topic   string
	queueID int32
}

// parkedPull is a pull waiting for a message.
type parkedPull struct {
	*pullRequest
	key     queueKey
	seenMax int64 // the queue's max offset when the read found nothing
	// fenceWait, when not 0, is where the store's visible end must reach:
	// the read found a record that is not confirmed yet (store.GetVisible),
	// so arrivals do not wake it, the visible end moving does.
	fenceWait int64
	// expireAt is when the expiry loop answers it: its deadline less a
	// random share of up to an eighth of its hold (longpoll_expiry.go).
	expireAt  time.Time
	heapIndex int // in pullHolder.expiries; guarded by pullHolder.mu
}

// pullHolder parks pulls that found no message (long polling). A parked
// pull is read again and answered when the store reports an arrival on its
// queue, or when its hold time passes; it is dropped when its connection
// closes, and answered PULL_NOT_FOUND at shutdown. Each parked pull is
// answered at most once: whoever removes it from the maps owns it.
type pullHolder struct {
	s *Server

	mu      sync.Mutex
	closed  bool
	byQueue map[queueKey]map[*parkedPull]struct{}
	byConn  map[*remoting.Conn]map[*parkedPull]struct{}
	// fenced holds the parked pulls with a fenceWait (notifyVisible).
	fenced map[*parkedPull]struct{}
	// expiries orders the parked pulls by expireAt; count is how many are
	// parked; maxParked and maxPerConn cap them (HardeningOptions).
	expiries   pullHeap
	count      int
	maxParked  int
	maxPerConn int
	wake       chan struct{} // an earlier expiry was parked
	// answering bounds the expiry answers in flight (longpoll_expiry.go).
	answering chan struct{}

	// wg counts the goroutines answering released pulls; close waits for
	// them because they read the store.
	wg sync.WaitGroup
}

func newPullHolder(s *Server) *pullHolder {
	return &pullHolder{
		s:          s,
		byQueue:    map[queueKey]map[*parkedPull]struct{}{},
		byConn:     map[*remoting.Conn]map[*parkedPull]struct{}{},
		fenced:     map[*parkedPull]struct{}{},
		maxParked:  s.opts.Hardening.MaxParkedPulls,
		maxPerConn: s.opts.Hardening.MaxParkedPullsPerConn,
		wake:       make(chan struct{}, 1),
		answering:  make(chan struct{}, expiryAnswersInFlight),
	}
}

// parkOutcome is what park did with a pull.
type parkOutcome int

const (
	parked     parkOutcome = iota // held; answered later
	parkClosed                    // the holder is closed: answer at once
	parkFull                      // a cap is reached: answer SYSTEM_BUSY
)

// park holds p until a message arrives on its queue (or, with fenceWait,
// until the store's visible end reaches fenceWait) or p.deadline.
func (h *pullHolder) park(p *pullRequest, seenMax, fenceWait int64) parkOutcome {
	pp := &parkedPull{pullRequest: p, key: queueKey{p.header.Topic, p.header.QueueID}, seenMax: seenMax, fenceWait: fenceWait}
	pp.expireAt = spreadExpiry(time.Now(), p.deadline)
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return parkClosed
	}
	if h.count >= h.maxParked || len(h.byConn[pp.conn]) >= h.maxPerConn {
		h.mu.Unlock()
		return parkFull
	}
	addTo(h.byQueue, pp.key, pp)
	addTo(h.byConn, pp.conn, pp)
	if fenceWait > 0 {
		h.fenced[pp] = struct{}{}
	}
	h.count++
	h.pushExpiryLocked(pp)
	h.mu.Unlock()
	// A message stored (or confirmed) between the read and the park found
	// nobody to wake.
	if fenceWait > 0 && h.s.store.Visible() >= fenceWait ||
		fenceWait == 0 && h.s.store.MaxOffset(pp.key.topic, pp.key.queueID) > seenMax {
		h.release(pp, true)
	}
	return parked
}

func addTo[K comparable](m map[K]map[*parkedPull]struct{}, k K, pp *parkedPull) {
	set := m[k]
	if set == nil {
		set = map[*parkedPull]struct{}{}
		m[k] = set
	}
	set[pp] = struct{}{}
}

func removeFrom[K comparable](m map[K]map[*parkedPull]struct{}, k K, pp *parkedPull) {
	if set := m[k]; set != nil {
		delete(set, pp)
		if len(set) == 0 {
			delete(m, k)
		}
	}
}

// takeLocked removes pp and reports whether it was still parked (so the
// caller now owns answering it). Caller holds mu.
func (h *pullHolder) takeLocked(pp *parkedPull) bool {
	if _, ok := h.byQueue[pp.key][pp]; !ok {
		return false
	}
	removeFrom(h.byQueue, pp.key, pp)
	removeFrom(h.byConn, pp.conn, pp)
	delete(h.fenced, pp)
	h.removeExpiryLocked(pp)
	h.count--
	return true
}

// release answers pp on a goroutine of its own, woken by an arrival (it may
// park again until its deadline if the read still finds nothing).
func (h *pullHolder) release(pp *parkedPull, woken bool) {
	h.mu.Lock()
	if h.closed || !h.takeLocked(pp) {
		h.mu.Unlock()
		return
	}
	h.wg.Add(1)
	h.mu.Unlock()
	go h.answer(pp, woken)
}

func (h *pullHolder) answer(pp *parkedPull, woken bool) {
	defer h.wg.Done()
	mayPark := woken && time.Now().Before(pp.deadline)
	if resp := h.s.servePull(pp.pullRequest, false, mayPark); resp != nil {
		if err := pp.conn.Respond(resp); err != nil {
			h.s.logger.Debug("answering a parked pull failed", "peer", pp.conn.RemoteAddr(), "err", err)
		}
		if resp.Encoded != nil {
			resp.Encoded() // its body buffer goes back to the pool
		}
	}
}

// notify is the store's OnArrive callback: it releases the pulls parked on
// the queue that wait below maxOffset. It only moves map entries and starts
// goroutines, so the store's write path is not held up.
func (h *pullHolder) notify(topic string, queueID int32, maxOffset int64) {
	key := queueKey{topic, queueID}
	h.mu.Lock()
	if h.closed || len(h.byQueue[key]) == 0 {
		h.mu.Unlock()
		return
	}
	var ready []*parkedPull
	for pp := range h.byQueue[key] {
		if pp.fenceWait == 0 && pp.header.QueueOffset < maxOffset {
			ready = append(ready, pp)
		}
	}
	h.releaseLocked(ready)
}

// notifyVisible releases the pulls that wait for the store's visible end
// (fenceWait) once it reached them.
func (h *pullHolder) notifyVisible(visible int64) {
	h.mu.Lock()
	if h.closed || len(h.fenced) == 0 {
		h.mu.Unlock()
		return
	}
	var ready []*parkedPull
	for pp := range h.fenced {
		if pp.fenceWait <= visible {
			ready = append(ready, pp)
		}
	}
	h.releaseLocked(ready)
}

// releaseLocked takes ready out of the maps, unlocks mu and answers each on
// a goroutine of its own. Caller holds mu.
func (h *pullHolder) releaseLocked(ready []*parkedPull) {
	for _, pp := range ready {
		h.takeLocked(pp)
		h.wg.Add(1)
	}
	h.mu.Unlock()
	for _, pp := range ready {
		go h.answer(pp, true)
	}
}

// dropConn forgets the pulls parked by a closed connection.
func (h *pullHolder) dropConn(c *remoting.Conn) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for pp := range h.byConn[c] {
		h.takeLocked(pp)
	}
}

// parked returns the number of parked pulls.
func (h *pullHolder) parked() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.count
}

// close refuses new parks and answers every parked pull with
// PULL_NOT_FOUND, each on its own goroutine so that a client that does not
// read cannot hold up the shutdown. The returned channel closes when all
// those answers are written; wait also waits for the released pulls still
// being read.
func (h *pullHolder) close() <-chan struct{} {
	h.mu.Lock()
	h.closed = true
	var all []*parkedPull
	for _, set := range h.byQueue {
		for pp := range set {
			all = append(all, pp)
		}
	}
	for _, pp := range all {
		h.takeLocked(pp)
	}
	h.wg.Add(len(all))
	h.mu.Unlock()
	var answers sync.WaitGroup
	answers.Add(len(all))
	for _, pp := range all {
		go func() {
			defer h.wg.Done()
			defer answers.Done()
			hd := &pp.header
			resp := remoting.NewResponse(pp.req, int32(protocol.PullNotFound), "broker is shutting down")
			rh := protocol.PullMessageResponseHeader{
				SuggestWhichBrokerID: protocol.MasterID,
				NextBeginOffset:      hd.QueueOffset,
				MinOffset:            h.s.store.MinOffset(hd.Topic, hd.QueueID),
				MaxOffset:            h.s.store.VisibleMaxOffset(hd.Topic, hd.QueueID),
			}
			resp.ExtFields = rh.Ext()
			pp.conn.Respond(resp)
		}()
	}
	done := make(chan struct{})
	go func() {
		answers.Wait()
		close(done)
	}()
	return done
}

// wait returns when every answer close or a release started has finished.
// Call it after close, before the store closes.
func (h *pullHolder) wait() { h.wg.Wait() }
