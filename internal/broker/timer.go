package broker

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/store"
	"github.com/zonemq/zonemq/internal/wallclock"
)

// DefaultTimerMaxDelay is how far ahead a timer message may be due by
// default: RocketMQ 5's timerMaxDelaySec, 3 days.
const DefaultTimerMaxDelay = 72 * time.Hour

// Timer service settings.
const (
	// timerMetadata is the store metadata name of the delivered-timers
	// checkpoint (config/timerCheckpoint.json).
	timerMetadata = "timerCheckpoint"
	// timerFlushInterval bounds how stale the checkpoint may be, and so how
	// many deliveries a crash can repeat.
	timerFlushInterval = time.Second
	// timerRetryDelay is how long a delivery that failed (a full disk) waits
	// before it is tried again.
	timerRetryDelay = time.Second
	// timerBatch is how many due timers one pass of the loop takes out
	// under the lock before delivering them.
	timerBatch = 256
)

// timerEntry is one held timer message: when it is due (ms since the
// epoch) and where its record is (its offset in the timer topic's queue,
// which the checkpoint is kept by, and in the commit log, to read it). 24
// bytes per pending timer is all the memory a timer costs; the message
// itself stays in the commit log.
type timerEntry struct {
	due, queueOffset, commitLogOffset int64
}

// timerHeap orders pending timers by due time.
type timerHeap []timerEntry

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].due < h[j].due }
func (h timerHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)        { *h = append(*h, x.(timerEntry)) }
func (h *timerHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// timerService holds timer messages (TIMER_DELIVER_MS, TIMER_DELAY_SEC,
// TIMER_DELAY_MS) until they are due. A timer message is stored in the
// timer topic (queue 0) with REAL_TOPIC, REAL_QID and TIMER_OUT_MS (its due
// time) before the send is answered, so the commit log is the durable
// structure; in memory the service keeps a min-heap of pending timers and
// the set of timer-queue offsets already delivered. That set is persisted
// (config/timerCheckpoint.json, at most timerFlushInterval after a change
// and at Shutdown): after a crash every timer record not marked delivered
// is read back and held again, so none is lost, one is never delivered
// before its due time, and at most the deliveries of the last interval are
// repeated.
type timerService struct {
	s        *Server
	maxDelay time.Duration
	wake     chan struct{} // a timer was added; cap 1

	mu        sync.Mutex
	pending   timerHeap    // guarded by mu
	delivered deliveredSet // guarded by mu
	dirty     bool         // delivered changed since the last checkpoint
	lastFlush time.Time
}

// newTimerService loads the checkpoint and reads back every timer record
// not yet delivered. An unreadable checkpoint is an error: guessing would
// deliver timers again or lose them.
func newTimerService(s *Server) (*timerService, error) {
	t := &timerService{s: s, maxDelay: s.opts.TimerMaxDelay, wake: make(chan struct{}, 1), lastFlush: time.Now()}
	var cp timerCheckpoint
	found, err := s.loadExtraMetadata(timerMetadata, "deliver again every timer message still stored", &cp)
	if err != nil {
		return nil, fmt.Errorf("the timer checkpoint: %w", err)
	}
	minOff := s.store.MinOffset(protocol.TimerTopic, 0)
	if found {
		t.delivered = cp.set()
	} else {
		t.delivered = deliveredSet{base: minOff}
	}
	if t.delivered.base < minOff {
		s.logger.Error("timer messages were removed by retention before they were delivered; they are lost",
			"from", t.delivered.base, "to", minOff)
	}
	held, err := t.recover(max(t.delivered.base, minOff), t.delivered)
	if err != nil {
		return nil, err
	}
	t.pending = held
	heap.Init(&t.pending)
	if len(t.pending) > 0 {
		s.logger.Info("timer messages held again after a restart", "pending", len(t.pending))
	}
	return t, nil
}

// recover reads the timer queue from offset from to its end and returns
// every record not in delivered.
func (t *timerService) recover(from int64, delivered deliveredSet) ([]timerEntry, error) {
	var held []timerEntry
	off := from
	for {
		res := t.s.store.GetMessages(protocol.TimerTopic, 0, off, maxPullMessages, maxPullBytes, nil)
		if res.Status != store.Found {
			if res.NextBeginOffset > off && res.Status != store.OffsetOverflowOne && res.Status != store.OffsetOverflowBadly {
				t.s.logger.Warn("skipping unreadable timer records", "from", off, "to", res.NextBeginOffset, "status", res.Status)
				off = res.NextBeginOffset
				continue
			}
			return held, nil
		}
		for _, rec := range res.Messages {
			m, _, err := protocol.DecodeStoredMessage(rec, false, false)
			if err != nil {
				return held, fmt.Errorf("reading back timer records: %w", err)
			}
			if delivered.contains(m.QueueOffset) {
				continue
			}
			due, _ := strconv.ParseInt(propertyOr(m.Properties, protocol.PropertyTimerOutMS, "0"), 10, 64)
			held = append(held, timerEntry{due: due, queueOffset: m.QueueOffset, commitLogOffset: m.CommitLogOffset})
		}
		off = res.NextBeginOffset
	}
}

func propertyOr(props, name, def string) string {
	if v, ok := protocol.Property(props, name); ok {
		return v
	}
	return def
}

// isTimer reports whether a message asks to be held until a time.
func isTimer(props string) bool {
	for _, name := range []string{protocol.PropertyTimerDelaySec, protocol.PropertyTimerDelayMS, protocol.PropertyTimerDeliverMS} {
		if _, ok := protocol.Property(props, name); ok {
			return true
		}
	}
	return false
}

// dueTime settles a timer message's due time (ms) from its properties:
// TIMER_DELAY_SEC, else TIMER_DELAY_MS (both from now), else
// TIMER_DELIVER_MS. A value that is not a whole number, a negative delay,
// or a due time further ahead than maxDelay is refused.
func (t *timerService) dueTime(props string, now time.Time) (int64, error) {
	read := func(name string) (int64, bool, error) {
		v, ok := protocol.Property(props, name)
		if !ok {
			return 0, false, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return 0, true, fmt.Errorf("%w: %s=%q is not a whole number ≥ 0", store.ErrIllegalMessage, name, v)
		}
		return n, true, nil
	}
	var due int64
	sec, ok, err := read(protocol.PropertyTimerDelaySec)
	switch {
	case err != nil:
		return 0, err
	case ok:
		if sec > int64(t.maxDelay/time.Second)+1 {
			return 0, t.tooFar(time.Duration(sec) * time.Second)
		}
		due = now.UnixMilli() + sec*1000
	default:
		ms, ok, err := read(protocol.PropertyTimerDelayMS)
		switch {
		case err != nil:
			return 0, err
		case ok:
			if ms > t.maxDelay.Milliseconds() {
				return 0, t.tooFar(time.Duration(ms) * time.Millisecond)
			}
			due = now.UnixMilli() + ms
		default:
			if due, _, err = read(protocol.PropertyTimerDeliverMS); err != nil {
				return 0, err
			}
		}
	}
	// Compared in ms: a due time near the int64 limit must not overflow
	// into the past.
	if aheadMS := due - now.UnixMilli(); aheadMS > t.maxDelay.Milliseconds() {
		return 0, t.tooFar(time.Duration(min(aheadMS, int64(math.MaxInt64/time.Millisecond))) * time.Millisecond)
	}
	return due, nil
}

func (t *timerService) tooFar(ahead time.Duration) error {
	return fmt.Errorf("%w: the timer is due %s ahead; broker %s holds timers at most %s ahead (--timer-max-delay)",
		store.ErrIllegalMessage, ahead.Round(time.Second), t.s.opts.BrokerName, t.maxDelay)
}

// schedule holds m until its due time, or stores it at once when that time
// has passed. The send answer is the timer record's, with the queue the
// producer chose.
func (t *timerService) schedule(ctx context.Context, m *protocol.MessageExt) (store.PutResult, error) {
	now := wallclock.Now()
	due, err := t.dueTime(m.Properties, now)
	if err != nil {
		return store.PutResult{}, err
	}
	if due <= now.UnixMilli() {
		return t.s.putMessage(ctx, m)
	}
	if _, err := t.s.ensureTopic(newTopicConfig(protocol.TimerTopic, 1, protocol.PermReadWrite)); err != nil {
		return store.PutResult{}, err
	}
	tm := *m
	tm.Topic, tm.QueueID = protocol.TimerTopic, 0
	props := setProperty(m.Properties, protocol.PropertyRealTopic, m.Topic)
	props = setProperty(props, protocol.PropertyRealQueueID, strconv.Itoa(int(m.QueueID)))
	tm.Properties = setProperty(props, protocol.PropertyTimerOutMS, strconv.FormatInt(due, 10))
	res, err := t.s.putMessage(ctx, &tm)
	if err != nil {
		return res, err
	}
	t.add(timerEntry{due: due, queueOffset: res.QueueOffset, commitLogOffset: res.CommitLogOffset})
	return res, nil
}

// add holds one timer and wakes the loop.
func (t *timerService) add(e timerEntry) {
	t.mu.Lock()
	heap.Push(&t.pending, e)
	t.mu.Unlock()
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// pendingCount is how many timers are held.
func (t *timerService) pendingCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.pending)
}

// timerReplicaPoll is how often a replica's loop looks whether it has
// become master.
const timerReplicaPoll = 500 * time.Millisecond

// deliverLoop stores due timers in their topics until ctx ends. It sleeps
// until the earliest due time, a new timer or the next checkpoint. A
// replica delivers nothing (its master does, and the deliveries reach it
// through the log); when it becomes master it reads the timer queue again
// (rebuild), since timers replicated meanwhile never passed its send path.
func (t *timerService) deliverLoop(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	batch := make([]timerEntry, 0, timerBatch)
	wasMaster := t.s.isMaster()
	for ctx.Err() == nil {
		if !t.s.isMaster() {
			wasMaster = false
			timer.Reset(timerReplicaPoll)
			select {
			case <-ctx.Done():
			case <-timer.C:
			}
			continue
		}
		if !wasMaster {
			wasMaster = true
			if err := t.rebuild(); err != nil {
				t.s.logger.Error("re-reading the timer queue after becoming master", "err", err)
			}
		}
		now := wallclock.UnixMilli()
		wait := time.Hour
		batch = batch[:0]
		t.mu.Lock()
		for len(t.pending) > 0 && t.pending[0].due <= now && len(batch) < timerBatch {
			batch = append(batch, heap.Pop(&t.pending).(timerEntry))
		}
		if len(t.pending) > 0 {
			wait = time.Duration(t.pending[0].due-wallclock.UnixMilli()) * time.Millisecond
		}
		t.mu.Unlock()
		for _, e := range batch {
			t.deliverOne(ctx, e, now)
		}
		// Every pass, not only idle ones: under a steady stream of due
		// timers the checkpoint must still move.
		flushIn, flushPending := t.flushIfDue()
		if len(batch) > 0 {
			continue // more may be due: look again before sleeping
		}
		if flushPending {
			wait = min(wait, flushIn)
		}
		timer.Reset(max(wait, 0))
		select {
		case <-ctx.Done():
		case <-t.wake:
		case <-timer.C:
		}
	}
}

// deliverOne stores one due timer in its topic and marks it delivered; a
// failure that may pass (a full disk) holds it again for timerRetryDelay.
func (t *timerService) deliverOne(ctx context.Context, e timerEntry, now int64) {
	t.mu.Lock()
	recalled := t.delivered.contains(e.queueOffset)
	t.mu.Unlock()
	if recalled {
		return // ZONEMQ_RECALL_TIMER (timer_recall.go)
	}
	err := t.deliver(ctx, e)
	if err != nil && !permanent(err) && !errors.Is(err, store.ErrNotFound) {
		if ctx.Err() == nil {
			t.s.logger.Warn("delivering a timer message failed; retrying", "offset", e.queueOffset, "err", err)
		}
		t.add(timerEntry{due: now + timerRetryDelay.Milliseconds(), queueOffset: e.queueOffset, commitLogOffset: e.commitLogOffset})
		return
	}
	if err != nil {
		t.s.logger.Error("dropping a timer message that cannot be delivered", "offset", e.queueOffset, "err", err)
	}
	t.mu.Lock()
	t.delivered.mark(e.queueOffset)
	t.dirty = true
	t.mu.Unlock()
}

// deliver reads the timer record and stores it in REAL_TOPIC/REAL_QID with
// the timer properties removed, except TIMER_OUT_MS (the due time, kept so
// a consumer can see it); everything else is kept, as for delay levels.
func (t *timerService) deliver(ctx context.Context, e timerEntry) error {
	m, err := t.s.store.MessageAt(e.commitLogOffset)
	if err != nil {
		return err
	}
	topic, ok := protocol.Property(m.Properties, protocol.PropertyRealTopic)
	qid, ok2 := protocol.Property(m.Properties, protocol.PropertyRealQueueID)
	queueID, err := strconv.ParseInt(qid, 10, 32)
	if !ok || !ok2 || err != nil || queueID < 0 || protocol.ValidateTopic(topic) != nil {
		return errNoRealTopic
	}
	out := &protocol.MessageExt{
		Topic:          topic,
		QueueID:        int32(queueID),
		Flag:           m.Flag,
		SysFlag:        m.SysFlag,
		BornTimestamp:  m.BornTimestamp,
		BornHost:       m.BornHost,
		ReconsumeTimes: m.ReconsumeTimes,
		Body:           append([]byte(nil), m.Body...),
		Properties: removeProperties(m.Properties, protocol.PropertyTimerDeliverMS, protocol.PropertyTimerDelaySec,
			protocol.PropertyTimerDelayMS),
	}
	_, err = t.s.putMessage(ctx, out)
	return err
}

// rebuild re-reads the held timers from the store after a promotion: the
// checkpoint on disk if it is ahead of the one in memory, then every timer
// record not marked delivered. Timers the old master delivered after its
// last checkpoint reached this broker are delivered again (at least once),
// none is lost.
func (t *timerService) rebuild() error {
	var cp timerCheckpoint
	found, err := t.s.store.LoadMetadata(timerMetadata, &cp)
	if err != nil {
		return err
	}
	t.mu.Lock()
	if found && cp.Base > t.delivered.base {
		t.delivered = cp.set()
	}
	delivered := deliveredSet{base: t.delivered.base, words: slices.Clone(t.delivered.words)}
	t.mu.Unlock()
	held, err := t.recover(max(delivered.base, t.s.store.MinOffset(protocol.TimerTopic, 0)), delivered)
	// Merge with what is held: a timer sent since the promotion may be in
	// both (or, stored after the scan, only in pending); one already
	// delivered is in neither.
	t.mu.Lock()
	have := make(map[int64]bool, len(t.pending))
	kept := t.pending[:0]
	for _, e := range t.pending {
		if !t.delivered.contains(e.queueOffset) && !have[e.queueOffset] {
			have[e.queueOffset] = true
			kept = append(kept, e)
		}
	}
	for _, e := range held {
		if !t.delivered.contains(e.queueOffset) && !have[e.queueOffset] {
			have[e.queueOffset] = true
			kept = append(kept, e)
		}
	}
	t.pending = kept
	heap.Init(&t.pending)
	t.mu.Unlock()
	t.s.logger.Info("timer messages held after becoming master", "pending", len(held))
	return err
}

// flushIfDue writes the checkpoint once timerFlushInterval has passed
// since the last one; it returns how long until the next is due while
// deliveries are unrecorded.
func (t *timerService) flushIfDue() (time.Duration, bool) {
	t.mu.Lock()
	if !t.dirty {
		t.mu.Unlock()
		return 0, false
	}
	if left := timerFlushInterval - time.Since(t.lastFlush); left > 0 {
		t.mu.Unlock()
		return left, true
	}
	cp := newTimerCheckpoint(&t.delivered)
	t.dirty, t.lastFlush = false, time.Now()
	t.mu.Unlock()
	// Saved outside the lock: sends keep adding timers meanwhile. Only
	// this loop (and close, after it) writes the checkpoint.
	if err := t.s.store.SaveMetadata(timerMetadata, cp); err != nil {
		t.s.logger.Error("persisting the timer checkpoint", "err", err)
		t.mu.Lock()
		t.dirty = true
		t.mu.Unlock()
		return timerFlushInterval, true
	}
	return 0, false
}

// close writes the checkpoint at Shutdown, after deliverLoop has stopped.
func (t *timerService) close() {
	t.mu.Lock()
	cp := newTimerCheckpoint(&t.delivered)
	t.mu.Unlock()
	if err := t.s.store.SaveMetadata(timerMetadata, cp); err != nil {
		t.s.logger.Error("persisting the timer checkpoint at shutdown", "err", err)
	}
}
