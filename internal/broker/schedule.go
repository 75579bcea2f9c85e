package broker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/store"
	"github.com/zonemq/zonemq/internal/wallclock"
)

// DefaultMessageDelayLevel is RocketMQ's default messageDelayLevel: the
// delays of levels 1 to 18.
const DefaultMessageDelayLevel = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"

// delayOffsetMetadata is the store metadata name of the schedule service's
// delivery offsets (RocketMQ's delayOffset.json).
const delayOffsetMetadata = "delayOffset"

// Schedule service timings.
const (
	// scheduleBatch is how many delayed messages one read takes.
	scheduleBatch = 32
	// scheduleRetryDelay is how long a level waits after a failed delivery
	// (a full disk, say) before trying the same message again.
	scheduleRetryDelay = time.Second
	// scheduleFlushInterval bounds how stale the persisted delivery offsets
	// may be, and so how many deliveries a crash can repeat.
	scheduleFlushInterval = time.Second
)

// ParseMessageDelayLevel parses a messageDelayLevel string: space-separated
// delays, each a positive whole number with the unit s, m, h or d ("1s 5s
// 10s 30s 1m …"), level 1 first. zonemq also accepts ms (RocketMQ does not),
// which tests use for short delays. Between 1 and 18 levels are accepted
// (the send path caps a message's DELAY at 18).
func ParseMessageDelayLevel(s string) ([]time.Duration, error) {
	units := map[string]time.Duration{"ms": time.Millisecond, "s": time.Second, "m": time.Minute, "h": time.Hour, "d": 24 * time.Hour}
	fields := strings.Fields(s)
	if len(fields) == 0 || len(fields) > maxDelayLevel {
		return nil, fmt.Errorf("messageDelayLevel %q has %d levels; it needs 1 to %d", s, len(fields), maxDelayLevel)
	}
	out := make([]time.Duration, len(fields))
	for i, f := range fields {
		num := strings.TrimRight(f, "smhd")
		unit, ok := units[f[len(num):]]
		n, err := strconv.ParseInt(num, 10, 64)
		if !ok || err != nil || n <= 0 || n > int64(math.MaxInt64/unit) {
			return nil, fmt.Errorf("messageDelayLevel level %d is %q; want a positive whole number with unit s, m, h or d", i+1, f)
		}
		out[i] = time.Duration(n) * unit
	}
	return out, nil
}

// delayOffsetTable is the persisted form of the delivery offsets: the next
// SCHEDULE_TOPIC_XXXX queue offset to deliver, keyed by delay level.
type delayOffsetTable struct {
	OffsetTable map[int]int64 `json:"offsetTable"`
}

// scheduleService keeps delayed messages in SCHEDULE_TOPIC_XXXX, queue
// level-1, and puts each into its real topic and queue once its store time
// plus its level's delay has passed. Java writes the due time into the
// consume-queue tag slot; our consume queue keeps the tag hash, so the due
// time is computed from the record's store timestamp when it is read.
//
// One goroutine (deliverLoop) delivers every level in queue order. The
// offsets it has delivered up to are persisted at most flushEvery after a
// change and at Shutdown, so a crash repeats at most the deliveries of that
// last interval and loses none.
type scheduleService struct {
	s          *Server
	levels     []time.Duration
	flushEvery time.Duration

	wake    chan struct{} // a delayed message was stored; cap 1
	arrived atomic.Uint64 // bit level-1: a message was stored in that level since the loop last looked

	mu        sync.Mutex
	offsets   []int64 // next queue offset to deliver, index level-1; written by deliverLoop only
	dirty     bool    // offsets changed since they were last persisted
	lastFlush time.Time
}

// newScheduleService loads the persisted offsets. Without an offsets file
// every level starts at its oldest stored message; an unreadable one is an
// error, since guessing would repeat or skip deliveries.
func newScheduleService(s *Server) (*scheduleService, error) {
	levels, err := ParseMessageDelayLevel(s.opts.MessageDelayLevel)
	if err != nil {
		return nil, fmt.Errorf("MessageDelayLevel (--message-delay-level): %w", err)
	}
	d := &scheduleService{
		s:          s,
		levels:     levels,
		flushEvery: scheduleFlushInterval,
		wake:       make(chan struct{}, 1),
		offsets:    make([]int64, len(levels)),
		lastFlush:  time.Now(),
	}
	var t delayOffsetTable
	found, err := s.loadExtraMetadata(delayOffsetMetadata, "deliver again every delayed message still stored", &t)
	if err != nil {
		return nil, fmt.Errorf("the delay offsets: %w", err)
	}
	for i := range d.offsets {
		d.offsets[i] = s.store.MinOffset(protocol.ScheduleTopic, int32(i))
	}
	if found {
		for level, off := range t.OffsetTable {
			if level >= 1 && level <= len(d.offsets) {
				d.offsets[level-1] = off
			}
		}
	}
	return d, nil
}

// schedule stores m in the schedule topic for delivery after its level's
// delay (the s.schedule seam). level is clamped to the configured levels.
// m itself is not changed, so the send answer still names the queue the
// producer chose; the result is the schedule record's.
func (d *scheduleService) schedule(ctx context.Context, m *protocol.MessageExt, level int) (store.PutResult, error) {
	level = min(max(level, 1), len(d.levels))
	if _, err := d.s.ensureTopic(newTopicConfig(protocol.ScheduleTopic, len(d.levels), protocol.PermReadWrite)); err != nil {
		return store.PutResult{}, err
	}
	sm := *m
	sm.Topic = protocol.ScheduleTopic
	sm.QueueID = int32(level - 1)
	props := setProperty(m.Properties, protocol.PropertyRealTopic, m.Topic)
	props = setProperty(props, protocol.PropertyRealQueueID, strconv.Itoa(int(m.QueueID)))
	sm.Properties = setProperty(props, protocol.PropertyDelayLevel, strconv.Itoa(level))
	res, err := d.s.putMessage(ctx, &sm)
	if err != nil {
		return res, err
	}
	d.arrived.Or(1 << (level - 1))
	select {
	case d.wake <- struct{}{}:
	default:
	}
	return res, nil
}

// idle marks a level with nothing left to deliver: it is read again only
// when a message arrives in it.
const idle = math.MaxInt64

// deliverLoop delivers due messages until ctx ends. It keeps, per level,
// the due time (ms) of the first undelivered message and sleeps until the
// earliest of them, a new delayed message or the next offsets flush.
func (d *scheduleService) deliverLoop(ctx context.Context) {
	next := make([]int64, len(d.levels)) // 0: read the level now
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		arrived := d.arrived.Swap(0)
		for i := range next {
			if arrived&(1<<i) != 0 && next[i] == idle {
				next[i] = 0
			}
		}
		now := wallclock.UnixMilli()
		earliest := int64(idle)
		for i := range next {
			if next[i] <= now {
				next[i] = d.deliverLevel(ctx, i, now)
			}
			earliest = min(earliest, next[i])
			if ctx.Err() != nil {
				return
			}
		}
		wait := time.Hour
		if earliest != idle {
			wait = time.Duration(earliest-wallclock.UnixMilli()) * time.Millisecond
		}
		if flushIn, ok := d.flushIfDue(); ok {
			wait = min(wait, flushIn)
		}
		timer.Reset(max(wait, 0))
		select {
		case <-ctx.Done():
			return
		case <-d.wake:
			// Timers are synchronous since Go 1.23: Reset at the top of
			// the loop needs no drain.
		case <-timer.C:
		}
	}
}

// deliverLevel delivers level i+1's due messages and returns the due time
// of the first one that is not due yet, idle when none is left, or a retry
// time after a failure.
func (d *scheduleService) deliverLevel(ctx context.Context, i int, now int64) int64 {
	if !d.s.isMaster() {
		// A replica delivers nothing: its master does, and the delivered
		// messages reach the replica through the log.
		return now + 500
	}
	queueID := int32(i)
	delay := d.levels[i].Milliseconds()
	for ctx.Err() == nil {
		off := d.offset(i)
		res := d.s.store.GetMessages(protocol.ScheduleTopic, queueID, off, scheduleBatch, 0, nil)
		switch res.Status {
		case store.Found:
		case store.OffsetOverflowOne:
			return idle
		case store.NoMessageInQueue:
			if off != 0 {
				d.s.logger.Warn("a schedule queue is gone; restarting it from 0", "level", i+1, "offset", off)
				d.setOffset(i, 0)
			}
			return idle
		case store.OffsetOverflowBadly:
			// The offsets file is newer than the store (the store lost its
			// tail in a crash): nothing beyond the end can be delivered.
			d.s.logger.Warn("the delay offset is beyond its schedule queue; moving it back to the end",
				"level", i+1, "offset", off, "max", res.MaxOffset)
			d.setOffset(i, res.MaxOffset)
			continue
		case store.OffsetTooSmall:
			d.s.logger.Error("delayed messages were removed before they were due (retention); they are lost",
				"level", i+1, "from", off, "to", res.NextBeginOffset)
			d.setOffset(i, res.NextBeginOffset)
			continue
		default: // nothing readable at off: step over what the store skipped
			if res.NextBeginOffset <= off {
				return now + scheduleRetryDelay.Milliseconds()
			}
			d.s.logger.Warn("skipping unreadable delayed messages", "level", i+1, "from", off, "to", res.NextBeginOffset, "status", res.Status)
			d.setOffset(i, res.NextBeginOffset)
			continue
		}
		for _, rec := range res.Messages {
			m, _, err := protocol.DecodeStoredMessage(rec, true, false)
			if err != nil {
				// Stepped over by the next record's offset, or by
				// NextBeginOffset below.
				d.s.logger.Error("skipping an undecodable delayed message", "level", i+1, "after", off, "err", err)
				continue
			}
			if due := m.StoreTimestamp + delay; due > now {
				return due
			}
			if err := d.deliver(ctx, m); err != nil {
				if permanent(err) {
					d.s.logger.Error("dropping a delayed message that cannot be delivered", "level", i+1, "offset", m.QueueOffset, "err", err)
				} else {
					d.s.logger.Warn("delivering a delayed message failed; retrying", "level", i+1, "offset", m.QueueOffset, "err", err)
					return now + scheduleRetryDelay.Milliseconds()
				}
			}
			off = m.QueueOffset + 1
			d.setOffset(i, off)
		}
		if res.NextBeginOffset > off {
			d.setOffset(i, res.NextBeginOffset)
		}
	}
	return idle
}

// permanent reports whether a delivery error will repeat whatever happens
// (a message the store refuses), as opposed to a full disk or a shutdown.
func permanent(err error) bool {
	return errors.Is(err, store.ErrIllegalMessage) || errors.Is(err, store.ErrMessageTooLarge) || errors.Is(err, errNoRealTopic)
}

// errNoRealTopic means a schedule record lacks REAL_TOPIC or REAL_QID.
var errNoRealTopic = errors.New("the delayed message has no valid REAL_TOPIC / REAL_QID")

// deliver puts a due message into its real topic and queue: DELAY is
// removed, everything else (UNIQ_KEY, KEYS, TAGS, REAL_TOPIC, REAL_QID,
// the reconsume count, born host and time) is kept, as in RocketMQ.
func (d *scheduleService) deliver(ctx context.Context, m *protocol.MessageExt) error {
	topic, ok := protocol.Property(m.Properties, protocol.PropertyRealTopic)
	qid, ok2 := protocol.Property(m.Properties, protocol.PropertyRealQueueID)
	queueID, err := strconv.ParseInt(qid, 10, 32)
	if !ok || !ok2 || err != nil || queueID < 0 || protocol.ValidateTopic(topic) != nil {
		return errNoRealTopic
	}
	out := &protocol.MessageExt{
		Topic:                     topic,
		QueueID:                   int32(queueID),
		Flag:                      m.Flag,
		SysFlag:                   m.SysFlag,
		BornTimestamp:             m.BornTimestamp,
		BornHost:                  m.BornHost,
		ReconsumeTimes:            m.ReconsumeTimes,
		PreparedTransactionOffset: m.PreparedTransactionOffset,
		Body:                      m.Body,
		Properties:                removeProperties(m.Properties, protocol.PropertyDelayLevel),
	}
	_, err = d.s.putMessage(ctx, out)
	return err
}

func (d *scheduleService) offset(i int) int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.offsets[i]
}

func (d *scheduleService) setOffset(i int, off int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.offsets[i] != off {
		d.offsets[i] = off
		d.dirty = true
	}
}

// flushIfDue persists changed offsets once flushEvery has passed since the
// last flush. It returns how long until the next flush is due while
// offsets are still unpersisted.
func (d *scheduleService) flushIfDue() (time.Duration, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.dirty {
		return 0, false
	}
	if left := d.flushEvery - time.Since(d.lastFlush); left > 0 {
		return left, true
	}
	if err := d.flushLocked(); err != nil {
		d.s.logger.Error("persisting the delay offsets", "err", err)
		return d.flushEvery, true
	}
	return 0, false
}

// flushLocked persists the offsets. Caller holds mu.
func (d *scheduleService) flushLocked() error {
	d.lastFlush = time.Now()
	if err := d.s.store.SaveMetadata(delayOffsetMetadata, d.tableLocked()); err != nil {
		return err
	}
	d.dirty = false
	return nil
}

// tableLocked returns the offsets keyed by level. Caller holds mu.
func (d *scheduleService) tableLocked() delayOffsetTable {
	t := delayOffsetTable{OffsetTable: make(map[int]int64, len(d.offsets))}
	for i, off := range d.offsets {
		t.OffsetTable[i+1] = off
	}
	return t
}

// close persists the offsets at Shutdown, after deliverLoop has stopped.
func (d *scheduleService) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.flushLocked(); err != nil {
		d.s.logger.Error("persisting the delay offsets at shutdown", "err", err)
	}
}

// handleGetAllDelayOffset serves GET_ALL_DELAY_OFFSET (admin tools): the
// delivery offset of every level.
func (d *scheduleService) handleGetAllDelayOffset(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
	d.mu.Lock()
	t := d.tableLocked()
	d.mu.Unlock()
	return successJSON(req, t)
}
