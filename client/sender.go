package client

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zonemq/zonemq/internal/idc"
	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// SendStatus is how a broker stored a message (RocketMQ's SendStatus).
// Every status a SendResult carries means the message was stored.
type SendStatus int

// Send statuses.
const (
	SendOK SendStatus = iota
	// SendFlushDiskTimeout: stored, but a sync-flush broker's fsync did
	// not finish in time.
	SendFlushDiskTimeout
	// SendFlushSlaveTimeout and SendSlaveNotAvailable name RocketMQ's
	// replica statuses. The SDK never returns them in a SendResult: a
	// message its group could not copy is not acknowledged, so the send
	// is retried on another broker (or fails with a *ResponseError).
	SendFlushSlaveTimeout
	SendSlaveNotAvailable
)

// String names the status as RocketMQ does.
func (s SendStatus) String() string {
	switch s {
	case SendOK:
		return "SEND_OK"
	case SendFlushDiskTimeout:
		return "FLUSH_DISK_TIMEOUT"
	case SendFlushSlaveTimeout:
		return "FLUSH_SLAVE_TIMEOUT"
	case SendSlaveNotAvailable:
		return "SLAVE_NOT_AVAILABLE"
	}
	return "SendStatus(" + strconv.Itoa(int(s)) + ")"
}

// SendResult describes a stored message (or batch).
type SendResult struct {
	Status SendStatus
	// MsgID is the message's UNIQ_KEY (comma-joined for a batch).
	MsgID string
	// OffsetMsgID is the broker's id of the message (comma-joined for a
	// batch).
	OffsetMsgID string
	// Queue and QueueOffset are where the message (the batch's first
	// message) was stored.
	Queue       MessageQueue
	QueueOffset int64
	// BrokerName, BrokerAddr and IDC are the broker that stored it.
	BrokerName string
	BrokerAddr string
	IDC        string
	// Epoch is the replication epoch of the master that acknowledged (its
	// term as master, from the controller or its own promotion); 0 from a
	// broker without a group or from a stock broker.
	Epoch int64
}

// sender is the send machinery of a Producer (and of a consumer's
// fallback retry): queue choice, per-attempt timeouts, failover across
// brokers and IDCs, and fault isolation.
type sender struct {
	c                 *core
	group             string
	sendTimeout       time.Duration
	attemptTimeout    time.Duration
	suspectAfter      time.Duration // suspect.go; 0: off
	latency           sync.Map      // broker address → *brokerLatency (suspect.go)
	isolation         time.Duration
	compressThreshold int
	maxSize           int

	rr  atomic.Uint64 // round-robin position
	own sync.Map      // topic → *ownQueues (sendasync.go)

	mu       sync.Mutex
	isolated map[string]isolation // by broker name

	stats sendStats // stats.go
}

// isolation is a failed broker's penalty: it is tried after every other
// broker until until. Each failure in a row doubles the period (up to
// maxIsolation), so a hung broker that keeps eating an attempt timeout is
// tried ever more rarely; a success ends it.
type isolation struct {
	until   time.Time
	strikes int
	probing bool // a probeLoop knocks on the broker
}

// maxIsolation caps the doubling isolation period.
const maxIsolation = 30 * time.Second

func newSender(c *core, group string, sendTimeout, attemptTimeout, isolationPeriod time.Duration, compress, maxSize int) *sender {
	s := &sender{
		c: c, group: group, sendTimeout: sendTimeout, attemptTimeout: attemptTimeout, isolation: isolationPeriod,
		compressThreshold: compress, maxSize: maxSize, isolated: map[string]isolation{},
	}
	c.routes.onChange(s.routeChanged)
	return s
}

// outgoing is a prepared send: everything but the queue.
type outgoing struct {
	topic  string
	code   protocol.RequestCode
	header protocol.SendMessageRequestHeader
	body   []byte
	msgID  string
	oneway bool
}

// prepare validates msgs and encodes them once: one message as
// SEND_MESSAGE, several as one SEND_BATCH_MESSAGE.
func (s *sender) prepare(msgs []*Message) (*outgoing, error) {
	if len(msgs) == 0 {
		return nil, fmt.Errorf("%w: no message", ErrInvalidMessage)
	}
	for _, m := range msgs {
		if err := m.validate(s.maxSize); err != nil {
			return nil, err
		}
	}
	out := &outgoing{topic: msgs[0].Topic, header: protocol.SendMessageRequestHeader{
		ProducerGroup:         s.group,
		Topic:                 msgs[0].Topic,
		DefaultTopic:          protocol.AutoCreateTopicKey,
		DefaultTopicQueueNums: 4,
	}}
	if len(msgs) == 1 {
		m := msgs[0]
		out.code = protocol.SendMessage
		out.msgID = m.ID
		if out.msgID == "" {
			out.msgID = processUniqKeys.next()
		}
		out.header.Properties = m.encodeProperties(out.msgID)
		out.header.Flag = m.Flag
		out.header.Retry = m.Resent && m.ID != ""
		out.body = m.Body
		if s.compressThreshold > 0 && len(m.Body) >= s.compressThreshold {
			z, smaller, err := compressBody(m.Body)
			if err != nil {
				return nil, fmt.Errorf("zonemq client: compress body: %w", err)
			}
			if smaller {
				out.body = z
				out.header.SysFlag |= protocol.SysFlagCompressed
			}
		}
		return out, nil
	}
	// A batch: one topic, no delay, each message with its own UNIQ_KEY (as
	// Java producers do; rocketmq-client-go leaves batch items without one).
	out.code = protocol.SendBatchMessage
	out.header.Batch = true
	ids := make([]string, len(msgs))
	size := 0
	for i, m := range msgs {
		if m.Topic != out.topic {
			return nil, fmt.Errorf("%w: a batch must have one topic (%s and %s)", ErrInvalidMessage, out.topic, m.Topic)
		}
		if m.DelayLevel > 0 || !m.DeliverAt.IsZero() {
			return nil, fmt.Errorf("%w: a batch cannot carry delayed messages", ErrInvalidMessage)
		}
		ids[i] = m.ID
		if ids[i] == "" {
			ids[i] = processUniqKeys.next()
		}
		out.body = appendBatchItem(out.body, m, m.encodeProperties(ids[i]))
		size += len(m.Body)
	}
	if size > s.maxSize {
		return nil, fmt.Errorf("%w: batch bodies total %d bytes, over %d", ErrInvalidMessage, size, s.maxSize)
	}
	out.msgID = strings.Join(ids, ",")
	return out, nil
}

// appendBatchItem encodes one batch item: TOTALSIZE, MAGICCODE (0), BODYCRC
// (0), FLAG, BODYLEN, BODY, PROPLEN (int16), PROPERTIES.
func appendBatchItem(dst []byte, m *Message, props string) []byte {
	total := 4 + 4 + 4 + 4 + 4 + len(m.Body) + 2 + len(props)
	dst = binary.BigEndian.AppendUint32(dst, uint32(total))
	dst = binary.BigEndian.AppendUint32(dst, 0)
	dst = binary.BigEndian.AppendUint32(dst, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(m.Flag))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(m.Body)))
	dst = append(dst, m.Body...)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(props)))
	return append(dst, props...)
}

// errNoQueue tells send that the picker has nothing left this round.
var errNoQueue = errors.New("no queue left")

// sendPlan is what a send chooses queues from, in tiers of preference:
//
//	0  the topic's queues on own-IDC brokers
//	1  the auto-create template's (TBW102) queues on own-IDC brokers, when
//	   tier 0 is empty: an own-IDC broker creates the topic on first send,
//	   so a topic that so far lives only in other IDCs becomes local
//	   instead of being sent across IDCs for ever
//	2  the topic's queues in other IDCs
//	3  the template's queues in other IDCs, when the topic has no queue at
//	   all (RocketMQ's auto-create)
type sendPlan struct {
	topic string
	tiers [4][]writeQueue
}

// picker chooses the next queue given the plan and the brokers tried in
// this round. It returns errNoQueue when none is left, or another error to
// stop the send.
type picker func(p *sendPlan, tried map[string]bool) (writeQueue, error)

// maxRecordedAttempts bounds SendError.Attempts.
const maxRecordedAttempts = 16

// deliver sends out: each attempt gets SendAttemptTimeout; a failed attempt
// (no answer, broken connection, retryable code) is retried at once on
// another broker — own IDC first, then other IDCs — until one stores the
// message, a non-retryable answer arrives, or the send timeout passes. When
// every broker of the plan failed, the route is re-read and another round
// starts after a short pause.
func (s *sender) deliver(ctx context.Context, out *outgoing, pick picker) (*SendResult, error) {
	return s.deliverFrom(ctx, out, pick, &SendError{Topic: out.topic}, map[string]bool{}, nil, map[string]bool{})
}

// recordAttempt adds a failed attempt to fail.
func recordAttempt(fail *SendError, q writeQueue, err error) {
	if len(fail.Attempts) < maxRecordedAttempts {
		fail.Attempts = append(fail.Attempts, AttemptError{Broker: q.broker.name, Addr: q.broker.master(), IDC: q.broker.idc, Err: err})
	}
}

// deliverFrom is deliver after the attempts already in fail and tried (an
// asynchronous send's first attempt, sendasync.go): next, when not nil, is
// the queue to try first (the same queue at its group's new master), and
// redirected the groups already followed to a new master (newMaster).
func (s *sender) deliverFrom(ctx context.Context, out *outgoing, pick picker, fail *SendError, tried map[string]bool,
	next *writeQueue, redirected map[string]bool) (*SendResult, error) {
	if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > s.sendTimeout {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.sendTimeout)
		defer cancel()
	}
	// Every attempt after a failed one says so: the broker answers a
	// retry with the copy an unanswered attempt may have stored, instead
	// of storing it twice (broker/sendretry.go).
	record := func(q writeQueue, err error) {
		recordAttempt(fail, q, err)
		out.header.Retry = true
	}
	if len(fail.Attempts) > 0 {
		out.header.Retry = true
	}
	pause := 20 * time.Millisecond
	for {
		p, err := s.plan(ctx, out.topic)
		var q writeQueue
		switch {
		case next != nil:
			q, err, next = *next, nil, nil
		case err == nil:
			q, err = pick(p, tried)
		}
		switch {
		case err == nil:
		case errors.Is(err, errNoQueue) || errors.Is(err, ErrNoRoute) || errors.Is(err, ErrNoNameServer):
			// Every broker failed this round, or the route has none: read
			// the route again and start over after a pause.
			if len(tried) == 0 && fail.Err == nil {
				fail.Err = err
			}
			tried = map[string]bool{}
			if !sleepCtx(ctx, pause) {
				return nil, s.stop(ctx, fail)
			}
			pause = min(2*pause, 500*time.Millisecond)
			s.c.routes.fetch(ctx, out.topic)
			continue
		default:
			if ctx.Err() != nil {
				return nil, s.stop(ctx, fail)
			}
			fail.Err = err
			return nil, fail
		}
		tried[q.broker.name] = true
		res, err := s.attempt(ctx, out, q)
		if err == nil {
			s.recovered(q.broker.name)
			if q.autoCreate {
				// Sent through the auto-create template: the broker has
				// the topic now; read its route.
				s.c.routes.triggerRefresh()
			}
			return res, nil
		}
		record(q, err)
		if ctx.Err() != nil {
			return nil, s.stop(ctx, fail)
		}
		if !retryable(err) {
			return nil, fail
		}
		if nq, ok := s.newMaster(ctx, out.topic, q, err, redirected); ok {
			s.c.logger.Info("send refused by a broker that is no longer master; retrying at the new master", "topic", out.topic,
				"broker", q.broker.name, "old", q.broker.master(), "new", nq.broker.master())
			next = &nq
			continue
		}
		// The send goes on elsewhere: information, not a warning (the
		// application hears of it only if every broker fails).
		s.c.logger.Info("send moved to another broker", "topic", out.topic, "from", q.broker.name,
			"addr", q.broker.master(), "brokerIDC", q.broker.idc, "why", err)
		s.stats.retries.Add(1)
		s.isolate(q.broker.name, q.broker.master())
		s.c.routes.triggerRefresh()
	}
}

// newMaster returns q at its group's new master when err says q's broker is
// no longer the master and a fresh route names another one: a failover
// controller elected it, or a switchover handed over. Once per group and
// send, so a group changing hands twice cannot hold a send in a loop.
func (s *sender) newMaster(ctx context.Context, topic string, q writeQueue, err error, redirected map[string]bool) (writeQueue, bool) {
	var re *ResponseError
	if !errors.As(err, &re) || !re.NotMaster || redirected[q.broker.name] {
		return q, false
	}
	redirected[q.broker.name] = true
	r, ferr := s.c.routes.fetch(ctx, topic)
	if ferr != nil || r == nil {
		return q, false
	}
	b := r.brokers[q.broker.name]
	if b == nil || b.master() == "" || b.master() == q.broker.master() {
		return q, false
	}
	return writeQueue{broker: b, queueID: q.queueID, autoCreate: q.autoCreate}, true
}

// stop finishes a send whose context ended.
func (s *sender) stop(ctx context.Context, fail *SendError) error {
	err := ctx.Err()
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("%w: send timeout passed: %w", ErrTimeout, err)
	}
	if fail.Err == nil || len(fail.Attempts) > 0 {
		fail.Err = err
	}
	return fail
}

// plan builds the sendPlan of topic from its route and, when needed, the
// auto-create template's route.
func (s *sender) plan(ctx context.Context, topic string) (*sendPlan, error) {
	r, err := s.c.routes.get(ctx, topic)
	if err != nil {
		return nil, err
	}
	p := &sendPlan{topic: topic}
	own := s.c.cfg.IDC
	for _, q := range r.sendQueues() {
		if idc.Same(q.broker.idc, own) {
			p.tiers[0] = append(p.tiers[0], q)
		} else {
			p.tiers[2] = append(p.tiers[2], q)
		}
	}
	if len(p.tiers[0]) == 0 && (own != "" || len(p.tiers[2]) == 0) {
		// The template route is optional: brokers with auto-create
		// disabled do not serve it.
		if tpl, err := s.c.routes.get(ctx, protocol.AutoCreateTopicKey); err == nil {
			for _, q := range tpl.sendQueues() {
				switch {
				case idc.Same(q.broker.idc, own):
					p.tiers[1] = append(p.tiers[1], q)
				case len(p.tiers[2]) == 0:
					p.tiers[3] = append(p.tiers[3], q)
				}
			}
		}
	}
	for _, t := range p.tiers {
		if len(t) > 0 {
			return p, nil
		}
	}
	return nil, fmt.Errorf("%w: topic %s", ErrNoRoute, topic)
}

// pickRoundRobin is the normal queue choice: round-robin over the queues of
// the best tier that has a broker neither tried in this call nor isolated;
// isolated brokers (best tier first) only when nothing else is left, so a
// broker that just failed is used only as a last resort.
func (s *sender) pickRoundRobin(p *sendPlan, tried map[string]bool) (writeQueue, error) {
	var isolated []writeQueue
	for _, tier := range p.tiers {
		var healthy []writeQueue
		for _, q := range tier {
			switch {
			case tried[q.broker.name]:
			case s.isIsolated(q.broker.name):
				isolated = append(isolated, q)
			default:
				healthy = append(healthy, q)
			}
		}
		if len(healthy) > 0 {
			return healthy[s.rr.Add(1)%uint64(len(healthy))], nil
		}
	}
	if len(isolated) > 0 {
		// The first isolated broker's queues, round-robin.
		n := 1
		for n < len(isolated) && isolated[n].broker == isolated[0].broker {
			n++
		}
		return isolated[s.rr.Add(1)%uint64(n)], nil
	}
	return writeQueue{}, errNoQueue
}

// sendRequest is the request that sends out to q. With typed, its header
// writes itself into the frame (remoting.Command.Header: no map); only a
// request to be signed for the ACL needs the map.
//
// The header is out's own, set for q: a request is encoded when it is
// written (before Send or Invoke returns) and out's attempts are made one
// after another, so no copy is needed.
func sendRequest(out *outgoing, q writeQueue, typed bool) *remoting.Command {
	return sendRequestAt(out, q, typed, time.Now())
}

// sendRequestAt is sendRequest with the born time given.
func sendRequestAt(out *outgoing, q writeQueue, typed bool, born time.Time) *remoting.Command {
	out.header.QueueID = int32(q.queueID)
	out.header.BrokerName = q.broker.name
	out.header.BornTimestamp = born.UnixMilli()
	h := &out.header
	if typed {
		req := request(out.code, nil, out.body)
		if out.code == protocol.SendMessage {
			req.Header = h
		} else {
			req.Header = &protocol.SendMessageRequestHeaderV2{SendMessageRequestHeader: *h}
		}
		return req
	}
	var ext map[string]string
	if out.code == protocol.SendMessage {
		ext = h.Ext()
	} else {
		ext = (&protocol.SendMessageRequestHeaderV2{SendMessageRequestHeader: *h}).Ext()
	}
	return request(out.code, ext, out.body)
}

// attempt sends out to q once.
func (s *sender) attempt(ctx context.Context, out *outgoing, q writeQueue) (*SendResult, error) {
	req := sendRequest(out, q, s.c.cfg.AccessKey == "")
	addr := q.broker.master()
	timeout := s.attemptTimeout
	if out.oneway {
		octx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		if err := s.c.rc.InvokeOneway(octx, addr, s.c.sign(req)); err != nil {
			return nil, transportError(out.code.String(), addr, err)
		}
		return &SendResult{MsgID: out.msgID, Queue: MessageQueue{Topic: out.topic, BrokerName: q.broker.name, QueueID: q.queueID},
			BrokerName: q.broker.name, BrokerAddr: addr, IDC: q.broker.idc}, nil
	}
	resp, err := s.invokeWatched(ctx, out.topic, q, req, timeout)
	if err != nil {
		return nil, err
	}
	return sendResultOf(out, q, addr, resp)
}

// sendResultOf reads a broker's answer to out sent to q at addr.
func sendResultOf(out *outgoing, q writeQueue, addr string, resp *remoting.Command) (*SendResult, error) {
	code := protocol.ResponseCode(resp.Code)
	if !code.SendSucceeded() {
		return nil, responseError(out.code, addr, resp)
	}
	res := &SendResult{
		MsgID:       out.msgID,
		OffsetMsgID: resp.Ext("msgId"),
		Queue:       MessageQueue{Topic: out.topic, BrokerName: q.broker.name, QueueID: q.queueID},
		BrokerName:  q.broker.name,
		BrokerAddr:  addr,
		IDC:         q.broker.idc,
	}
	if code == protocol.FlushDiskTimeout {
		res.Status = SendFlushDiskTimeout
	}
	if v, err := strconv.Atoi(resp.Ext("queueId")); err == nil {
		res.Queue.QueueID = v
	}
	if v, err := strconv.ParseInt(resp.Ext("queueOffset"), 10, 64); err == nil {
		res.QueueOffset = v
	}
	if v, err := strconv.ParseInt(resp.Ext(protocol.ExtBrokerEpoch), 10, 64); err == nil {
		res.Epoch = v
	}
	return res, nil
}

func (s *sender) isolate(broker, addr string) {
	s.mu.Lock()
	iso := s.isolated[broker]
	iso.strikes++
	d := s.isolation << min(iso.strikes-1, 16)
	iso.until = time.Now().Add(min(d, max(maxIsolation, s.isolation)))
	startProbe := !iso.probing && addr != ""
	iso.probing = iso.probing || startProbe
	s.isolated[broker] = iso
	s.mu.Unlock()
	if startProbe {
		s.c.goLoop(func(ctx context.Context) { s.probeLoop(ctx, broker, addr) })
	}
}

// probeInterval is how often an isolated broker is knocked on.
const probeInterval = time.Second

// probeLoop knocks on an isolated broker once a second with a producer
// heartbeat, out of the applications' way, and ends the isolation at the
// first answer. A broker back from a hang is therefore used again within
// about a second (fail-back), while the doubling isolation keeps
// application sends from paying an attempt timeout on it meanwhile.
func (s *sender) probeLoop(ctx context.Context, broker, addr string) {
	hb := mustJSON(&protocol.HeartbeatData{
		ClientID:        s.c.id(),
		ProducerDataSet: []protocol.ProducerData{{GroupName: s.group}},
		ConsumerDataSet: []protocol.ConsumerData{},
	})
	for sleepCtx(ctx, probeInterval) {
		s.mu.Lock()
		_, still := s.isolated[broker]
		s.mu.Unlock()
		if !still {
			return // a send or a route change ended it
		}
		pctx, cancel := context.WithTimeout(ctx, s.attemptTimeout)
		err := s.c.heartbeatBroker(pctx, addr, hb)
		cancel()
		if err == nil {
			s.c.logger.Info("isolated broker answers again", "broker", broker, "addr", addr)
			s.recovered(broker)
			s.c.routes.triggerRefresh()
			return
		}
	}
}

// recovered ends a broker's isolation after a success.
func (s *sender) recovered(broker string) {
	s.mu.Lock()
	delete(s.isolated, broker)
	s.mu.Unlock()
}

func (s *sender) isIsolated(broker string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	iso, ok := s.isolated[broker]
	return ok && time.Now().Before(iso.until)
}

// routeChanged ends the isolation of a broker that a route shows
// (re-)registered: it came back, so it may be used again at once.
func (s *sender) routeChanged(topic string, old, cur *route) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, b := range cur.brokers {
		if _, iso := s.isolated[name]; !iso {
			continue
		}
		if old == nil || old.brokers[name] == nil || old.brokers[name].master() != b.master() {
			delete(s.isolated, name)
		}
	}
}

// sleepCtx waits d or until ctx ends; it reports whether d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
