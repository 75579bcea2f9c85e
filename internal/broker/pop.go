package broker

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zonemq/zonemq/internal/filter"
	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/store"
)

// POP consumption (protocol/pop.go, docs/grpc.md): per group and queue,
// the master keeps which offsets are handed out and invisible until when,
// and which are acked above the group's committed offset. The committed
// offset is the group's ordinary consumer offset — it is stored, replicated
// and shown as lag like any other — and moves up over every offset below
// the oldest message still in flight. What is in flight lives in memory:
// after a crash or a failover, messages from the committed offset on come
// again (at least once); at most popWindow of them per queue were acked
// already.
const (
	popMaxMessages  = 32
	popWindow       = 2048
	popMinInvisible = time.Second
	popMaxInvisible = 12 * time.Hour
	queueOffsetAt   = 20 // QUEUEOFFSET's place in a stored record
)

type popKey struct {
	group, topic string
	queue        int32
}

// popQueue is one queue's POP state for one group. Every offset in
// [committed, next) is either in flight or acked.
type popQueue struct {
	mu        sync.Mutex
	committed int64
	next      int64
	inflight  map[int64]*popEntry
	acked     map[int64]bool
}

type popEntry struct {
	deadline time.Time
	attempt  int
	nonce    uint64
}

type popTable struct {
	mu     sync.Mutex
	queues map[popKey]*popQueue
}

// popped is one message handed out.
type popped struct {
	record  []byte
	attempt int
	handle  string
}

func popHandle(queue int32, offset int64, nonce uint64) string {
	return fmt.Sprintf("%d:%d:%x", queue, offset, nonce)
}

func parsePopHandle(h string) (queue int32, offset int64, nonce uint64, ok bool) {
	parts := strings.Split(h, ":")
	if len(parts) != 3 {
		return 0, 0, 0, false
	}
	q, err1 := strconv.ParseInt(parts[0], 10, 32)
	off, err2 := strconv.ParseInt(parts[1], 10, 64)
	n, err3 := strconv.ParseUint(parts[2], 16, 64)
	if err1 != nil || err2 != nil || err3 != nil || q < 0 || off < 0 {
		return 0, 0, 0, false
	}
	return int32(q), off, n, true
}

// popQueueOf returns group's state of one queue, synced with the stored
// offset: an offset moved by someone else (a reset) starts it afresh. A
// group that never committed starts at the queue's oldest message.
func (s *Server) popQueueOf(k popKey) *popQueue {
	s.pops.mu.Lock()
	if s.pops.queues == nil {
		s.pops.queues = map[popKey]*popQueue{}
	}
	q := s.pops.queues[k]
	if q == nil {
		q = &popQueue{committed: -1}
		s.pops.queues[k] = q
	}
	s.pops.mu.Unlock()
	q.mu.Lock()
	stored, ok := s.store.QueryOffset(k.group, k.topic, k.queue)
	if !ok {
		stored = s.store.MinOffset(k.topic, k.queue)
	}
	if stored != q.committed {
		q.committed, q.next = stored, stored
		q.inflight, q.acked = map[int64]*popEntry{}, map[int64]bool{}
	}
	q.mu.Unlock()
	return q
}

// advance moves the committed offset over acked offsets and stores it.
// Called with q.mu held.
func (s *Server) advance(k popKey, q *popQueue) {
	start := q.committed
	for q.committed < q.next && q.inflight[q.committed] == nil {
		delete(q.acked, q.committed)
		q.committed++
	}
	if q.committed != start {
		s.store.CommitOffset(k.group, k.topic, k.queue, q.committed)
	}
}

// popRequest is a parsed ZONEMQ_POP_MESSAGES.
type popRequest struct {
	group, topic string
	queueID      int32
	max          int
	invisible    time.Duration
	maxAttempts  int
	fifo         bool
	tags         func(int64) bool
	sql          *filter.Expression // a SQL92 subscription, else nil
}

func (s *Server) handlePopMessages(ctx context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	ext := req.ExtFields
	p := popRequest{group: ext["consumerGroup"], topic: ext["topic"], fifo: ext["fifo"] == "true"}
	if err := protocol.ValidateGroup(p.group); err != nil {
		return errorf(req, protocol.InvalidParameter, "%s: consumerGroup: %v", protocol.PopMessages, err)
	}
	q, err1 := strconv.ParseInt(ext["queueId"], 10, 32)
	n, err2 := strconv.Atoi(ext["maxMsgNums"])
	inv, err3 := strconv.ParseInt(ext["invisibleTime"], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return errorf(req, protocol.InvalidParameter, "%s: queueId, maxMsgNums and invisibleTime must be integers", protocol.PopMessages)
	}
	p.queueID, p.max, p.invisible = int32(q), min(max(n, 1), popMaxMessages), time.Duration(inv)*time.Millisecond
	if p.invisible < popMinInvisible || p.invisible > popMaxInvisible {
		return errorf(req, protocol.InvalidParameter, "%s: invisibleTime %v is outside %v..%v", protocol.PopMessages,
			p.invisible, popMinInvisible, popMaxInvisible)
	}
	if !s.isMaster() {
		return errorf(req, protocol.ServiceNotAvailable, "broker %s is not its group's master: POP is served by the master", s.opts.BrokerName)
	}
	group := s.groups.getOrCreate(p.group)
	// The group's config decides what the request leaves open: an orderly
	// group is FIFO, and its retryMaxTimes bounds the deliveries.
	p.fifo = p.fifo || group.ConsumeMessageOrderly
	p.maxAttempts = group.RetryMaxTimes + 1
	if v, err := strconv.Atoi(ext["maxAttempts"]); err == nil && v > 0 {
		p.maxAttempts = v
	}
	if !group.ConsumeEnable {
		return errorf(req, protocol.NoPermission, "the consumer group %s may not consume from broker %s", p.group, s.opts.BrokerName)
	}
	cfg, ok := s.readableTopic(p.topic)
	if !ok {
		return errorf(req, protocol.TopicNotExist, "topic[%s] not exist on broker %s", p.topic, s.opts.BrokerName)
	}
	if !protocol.Readable(cfg.Perm) {
		return errorf(req, protocol.NoPermission, "the topic %s on broker %s is not readable (perm %d)", p.topic, s.opts.BrokerName, cfg.Perm)
	}
	h := protocol.PullMessageRequestHeader{ConsumerGroup: p.group, Topic: p.topic, SysFlag: protocol.PullFlagSubscription,
		Subscription: cmpOr(ext["expression"], "*"), ExpressionType: cmpOr(ext["expressionType"], "TAG")}
	tags, sql, resp := s.pullFilter(req, &h)
	if resp != nil {
		return resp
	}
	p.tags, p.sql = tags, sql
	queues := []int32{p.queueID}
	if p.queueID < 0 {
		queues = queues[:0]
		first := rand.IntN(max(cfg.ReadQueueNums, 1))
		for i := 0; i < cfg.ReadQueueNums; i++ {
			queues = append(queues, int32((first+i)%cfg.ReadQueueNums))
		}
	} else if int(p.queueID) >= cfg.ReadQueueNums {
		return errorf(req, protocol.InvalidParameter, "queueId[%d] is illegal: topic %s has %d read queues on broker %s",
			p.queueID, p.topic, cfg.ReadQueueNums, s.opts.BrokerName)
	}
	var out []popped
	for _, qid := range queues {
		if len(out) >= p.max {
			break
		}
		out = append(out, s.popQueueMessages(ctx, &p, qid, p.max-len(out))...)
	}
	if len(out) == 0 {
		return errorf(req, protocol.PullNotFound, "no message for group %s in %s on broker %s", p.group, p.topic, s.opts.BrokerName)
	}
	var body []byte
	handles := make([]string, len(out))
	attempts := make([]string, len(out))
	for i, m := range out {
		body = append(body, m.record...)
		handles[i], attempts[i] = m.handle, strconv.Itoa(m.attempt)
	}
	return success(req, map[string]string{protocol.ExtPopHandles: strings.Join(handles, ";"), "zonemqPopAttempts": strings.Join(attempts, ",")}, body)
}

func cmpOr(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// popQueueMessages hands out up to n messages of one queue: those whose
// invisible time ran out first (their attempt counted up; past maxAttempts
// they go to the group's dead-letter queue instead), then new ones. A FIFO
// queue hands out nothing new while a message of it is in flight.
func (s *Server) popQueueMessages(ctx context.Context, p *popRequest, qid int32, n int) []popped {
	k := popKey{p.group, p.topic, qid}
	q := s.popQueueOf(k)
	q.mu.Lock()
	defer q.mu.Unlock()
	now := time.Now()
	var out []popped
	var expired []int64
	for off, e := range q.inflight {
		if !e.deadline.After(now) {
			expired = append(expired, off)
		}
	}
	slices.Sort(expired)
	for _, off := range expired {
		if len(out) >= n {
			break
		}
		e := q.inflight[off]
		res := s.store.GetMessages(p.topic, qid, off, 1, maxPullBytes, nil)
		if res.Status != store.Found || len(res.Messages) == 0 || recordOffset(res.Messages[0]) != off {
			// Gone (cleaned up): nothing to deliver any more.
			delete(q.inflight, off)
			q.acked[off] = true
			continue
		}
		if e.attempt >= p.maxAttempts {
			if err := s.popToDLQ(ctx, k, off); err != nil {
				s.logger.Warn("POP: dead-lettering failed; the message stays in flight", "group", p.group, "topic", p.topic,
					"queue", qid, "offset", off, "err", err)
				continue
			}
			delete(q.inflight, off)
			q.acked[off] = true
			continue
		}
		e.attempt++
		e.nonce = rand.Uint64()
		e.deadline = now.Add(p.invisible)
		out = append(out, popped{record: res.Messages[0], attempt: e.attempt, handle: popHandle(qid, off, e.nonce)})
	}
	if p.fifo && len(q.inflight) > len(out) {
		s.advance(k, q)
		return out
	}
	room := popWindow - int(q.next-q.committed)
	if want := min(n-len(out), room); want > 0 {
		if p.fifo {
			want = min(want, n-len(out))
		}
		res := filterBySQL(s.store.GetVisible(nil, p.topic, qid, q.next, want, maxPullBytes, p.tags), p.sql)
		if res.NextBeginOffset > q.next {
			got := map[int64][]byte{}
			for _, rec := range res.Messages {
				got[recordOffset(rec)] = rec
			}
			for off := q.next; off < res.NextBeginOffset; off++ {
				rec, ok := got[off]
				if !ok {
					q.acked[off] = true // filtered out, or no longer stored
					continue
				}
				e := &popEntry{attempt: 1, nonce: rand.Uint64(), deadline: now.Add(p.invisible)}
				q.inflight[off] = e
				out = append(out, popped{record: rec, attempt: 1, handle: popHandle(qid, off, e.nonce)})
			}
			q.next = res.NextBeginOffset
		}
	}
	s.advance(k, q)
	return out
}

// recordOffset reads a stored record's queue offset.
func recordOffset(rec []byte) int64 {
	if len(rec) < queueOffsetAt+8 {
		return -1
	}
	return int64(binary.BigEndian.Uint64(rec[queueOffsetAt:]))
}

// inflightEntry finds the message a handle names, in flight now; it
// returns nil for a handle that is void (acked, expired and handed out
// again, or never issued). Called without locks; the caller locks q.
func (s *Server) popEntryOf(group, topic, handle string) (popKey, *popQueue, int64, uint64, bool) {
	qid, off, nonce, ok := parsePopHandle(handle)
	if !ok {
		return popKey{}, nil, 0, 0, false
	}
	k := popKey{group, topic, qid}
	s.pops.mu.Lock()
	q := s.pops.queues[k]
	s.pops.mu.Unlock()
	return k, q, off, nonce, q != nil
}

func (s *Server) handleAckPopMessages(ctx context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	group, topic := req.ExtFields["consumerGroup"], req.ExtFields["topic"]
	toDLQ := req.ExtFields["toDLQ"] == "true"
	void := 0
	for _, h := range strings.Split(req.ExtFields["handles"], ";") {
		if h == "" {
			continue
		}
		k, q, off, nonce, ok := s.popEntryOf(group, topic, h)
		if !ok {
			void++
			continue
		}
		q.mu.Lock()
		if e := q.inflight[off]; e != nil && e.nonce == nonce {
			if toDLQ {
				if err := s.popToDLQ(ctx, k, off); err != nil {
					q.mu.Unlock()
					return errorf(req, protocol.SystemError, "moving the message to the dead-letter queue of %s: %v", group, err)
				}
			}
			delete(q.inflight, off)
			q.acked[off] = true
			s.advance(k, q)
		} else {
			void++
		}
		q.mu.Unlock()
	}
	if void > 0 {
		return errorf(req, protocol.QueryNotFound, "%d receipt handle(s) name no message in flight on broker %s (acked, expired, or not issued)",
			void, s.opts.BrokerName)
	}
	return success(req, nil, nil)
}

func (s *Server) handleChangePopInvisibleTime(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	group, topic := req.ExtFields["consumerGroup"], req.ExtFields["topic"]
	inv, err := strconv.ParseInt(req.ExtFields["invisibleTime"], 10, 64)
	d := time.Duration(inv) * time.Millisecond
	if err != nil || d < 0 || d > popMaxInvisible {
		return errorf(req, protocol.InvalidParameter, "%s: invisibleTime must be 0..%v", protocol.ChangePopInvisibleTime, popMaxInvisible)
	}
	k, q, off, nonce, ok := s.popEntryOf(group, topic, req.ExtFields["handle"])
	if !ok {
		return errorf(req, protocol.QueryNotFound, "the receipt handle names no message in flight on broker %s", s.opts.BrokerName)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	e := q.inflight[off]
	if e == nil || e.nonce != nonce {
		return errorf(req, protocol.QueryNotFound, "the receipt handle names no message in flight on broker %s", s.opts.BrokerName)
	}
	// keepHandle renews the invisible time and keeps the handle valid (the
	// access point's auto-renewal: the client acks with the handle it got).
	if req.ExtFields["keepHandle"] != "true" {
		e.nonce = rand.Uint64()
	}
	e.deadline = time.Now().Add(d)
	return success(req, map[string]string{"handle": popHandle(k.queue, off, e.nonce)}, nil)
}

// popToDLQ copies the message at off of k's queue to the group's
// dead-letter queue. Called with the queue's lock held.
func (s *Server) popToDLQ(ctx context.Context, k popKey, off int64) error {
	res := s.store.GetMessages(k.topic, k.queue, off, 1, maxPullBytes, nil)
	if res.Status != store.Found || len(res.Messages) == 0 || recordOffset(res.Messages[0]) != off {
		return nil // gone: nothing to keep
	}
	m, _, err := protocol.DecodeStoredMessage(res.Messages[0], true, false)
	if err != nil {
		return err
	}
	_, err = s.putDLQ(ctx, k.group, m)
	return err
}
