package broker

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/zonemq/zonemq/internal/acl"
	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/store"
	"github.com/zonemq/zonemq/internal/wallclock"
)

// Transaction topics (RocketMQ's TransactionalMessageUtil): half messages
// wait in the half topic; every commit, rollback or discard appends an op
// record (body: the half message's queue offset) to the op topic, which is
// what tells a resolved half message from a pending one after a restart.
const (
	transHalfTopic   = "RMQ_SYS_TRANS_HALF_TOPIC"
	transOpHalfTopic = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
	transOpTag       = "d" // RocketMQ's REMOVETAG
	// transactionStateMetadata is the store metadata name of the check
	// position (see transactionState).
	transactionStateMetadata = "transactionState"
	// propertyCheckImmunity delays the first check of one message
	// (CHECK_IMMUNITY_TIME_IN_SECONDS).
	propertyCheckImmunity = "CHECK_IMMUNITY_TIME_IN_SECONDS"
)

// transactionService keeps transaction half messages until their producer
// commits or rolls them back (END_TRANSACTION), and asks the producer
// (CHECK_TRANSACTION_STATE) about those left unresolved past the timeout.
// A message still unresolved after transactionCheckMax checks is discarded.
//
// Safe for concurrent use: END_TRANSACTION handlers and checkLoop share the
// state under mu.
type transactionService struct {
	s        *Server
	interval time.Duration
	timeout  time.Duration
	checkMax int

	mu sync.Mutex
	// halfOffset is the half-queue offset below which every half message
	// is resolved; checks start there.
	halfOffset int64
	// resolved holds the half messages at or above halfOffset that are
	// resolved or being resolved, by half-queue offset.
	resolved map[int64]resolution
	// checks counts the checks sent per pending half message since start.
	checks map[int64]int
	// origins holds the connection each pending half message came on
	// since start, by half-queue offset: its checks go there first.
	origins map[int64]*remoting.Conn
	dirty   bool

	sends sync.WaitGroup // check requests being written
}

// transactionState is the persisted check position: every half message
// below HalfOffset is resolved, and reading the op queue from OpOffset
// finds every resolution of the half messages above it.
type transactionState struct {
	HalfOffset int64 `json:"halfOffset"`
	OpOffset   int64 `json:"opOffset"`
}

// resolution is where the op record of a resolved half message is.
type resolution struct {
	// op is the op-queue offset of the op record; while pending, a lower
	// bound of it (the op queue's end when the resolution began).
	op int64
	// pending marks a resolution being stored (claimed, no op record yet).
	pending bool
}

// newTransactionService loads the check position and replays the op
// records written after it. Without a position file every stored op record
// is replayed; an unreadable one is an error.
func newTransactionService(s *Server) (*transactionService, error) {
	t := &transactionService{
		s: s, interval: s.opts.TransactionCheckInterval, timeout: s.opts.TransactionTimeout, checkMax: s.opts.TransactionCheckMax,
		resolved: map[int64]resolution{}, checks: map[int64]int{}, origins: map[int64]*remoting.Conn{},
	}
	var st transactionState
	found, err := s.loadExtraMetadata(transactionStateMetadata, "re-read every stored transaction op record", &st)
	if err != nil {
		return nil, fmt.Errorf("the transaction check position: %w", err)
	}
	if !found {
		st = transactionState{HalfOffset: s.store.MinOffset(transHalfTopic, 0), OpOffset: s.store.MinOffset(transOpHalfTopic, 0)}
	}
	t.halfOffset = st.HalfOffset
	if end := s.store.MaxOffset(transHalfTopic, 0); t.halfOffset > end {
		// The store lost its tail in a crash after the position was saved;
		// half messages stored from now on reuse those offsets and must
		// not count as resolved.
		s.logger.Warn("the transaction check position is beyond the half queue; moving it back", "position", t.halfOffset, "end", end)
		t.halfOffset = end
	}
	t.replayOps(st.OpOffset)
	for half := range t.resolved {
		if half >= s.store.MaxOffset(transHalfTopic, 0) {
			delete(t.resolved, half) // an op record of a lost half message
		}
	}
	return t, nil
}

// replayOps reads the op records from opOffset on into resolved.
func (t *transactionService) replayOps(opOffset int64) {
	for {
		res := t.s.store.GetMessages(transOpHalfTopic, 0, opOffset, 256, 0, nil)
		if res.Status == store.OffsetTooSmall {
			opOffset = res.NextBeginOffset
			continue
		}
		if res.Status != store.Found && res.NextBeginOffset <= opOffset {
			return
		}
		for _, rec := range res.Messages {
			m, _, err := protocol.DecodeStoredMessage(rec, false, false)
			if err != nil {
				continue
			}
			half, err := strconv.ParseInt(string(m.Body), 10, 64)
			if err == nil && half >= t.halfOffset {
				t.resolved[half] = resolution{op: m.QueueOffset}
			}
		}
		opOffset = res.NextBeginOffset
	}
}

// prepare stores a transaction half message that arrived on c (the
// s.prepareTransaction seam): in the half topic, with its real topic and
// queue in REAL_TOPIC / REAL_QID and the transaction bits of its sysflag
// cleared, as RocketMQ does. The send answer carries the half record's
// offset id and queue offset, which the producer returns in
// END_TRANSACTION. c is remembered so that checks go to that producer
// first.
func (t *transactionService) prepare(ctx context.Context, c *remoting.Conn, m *protocol.MessageExt) (store.PutResult, error) {
	if g, _ := protocol.Property(m.Properties, protocol.PropertyProducerGroup); g == "" {
		return store.PutResult{}, fmt.Errorf("%w: a transaction half message needs the %s property (its producer group)",
			store.ErrIllegalMessage, protocol.PropertyProducerGroup)
	}
	if _, err := t.s.ensureTopic(newTopicConfig(transHalfTopic, 1, protocol.PermReadWrite)); err != nil {
		return store.PutResult{}, err
	}
	hm := *m
	hm.Topic = transHalfTopic
	hm.QueueID = 0
	hm.SysFlag = m.SysFlag &^ protocol.SysFlagTransactionMask
	props := setProperty(m.Properties, protocol.PropertyRealTopic, m.Topic)
	hm.Properties = setProperty(props, protocol.PropertyRealQueueID, strconv.Itoa(int(m.QueueID)))
	res, err := t.s.putMessage(ctx, &hm)
	if err == nil && c != nil {
		t.mu.Lock()
		if res.QueueOffset >= t.halfOffset {
			t.origins[res.QueueOffset] = c
		}
		t.mu.Unlock()
	}
	return res, err
}

// endTransactionHeader is END_TRANSACTION's header.
type endTransactionHeader struct {
	ProducerGroup        string
	TranStateTableOffset int64 // the half message's queue offset
	CommitLogOffset      int64 // the half message's commit-log offset
	CommitOrRollback     int32 // 8 commit, 12 rollback, 0 unknown
	FromTransactionCheck bool
	MsgID                string
	TransactionID        string
}

func (h *endTransactionHeader) ext() map[string]string {
	w := protocol.ExtWriter{}
	return w.Str("producerGroup", h.ProducerGroup).Int("tranStateTableOffset", h.TranStateTableOffset).
		Int("commitLogOffset", h.CommitLogOffset).Int("commitOrRollback", int64(h.CommitOrRollback)).
		Bool("fromTransactionCheck", h.FromTransactionCheck).Str("msgId", h.MsgID).Str("transactionId", h.TransactionID)
}

func (h *endTransactionHeader) setExt(ext map[string]string) error {
	r := protocol.NewExtReader(ext)
	h.ProducerGroup = r.String("producerGroup")
	h.TranStateTableOffset = r.Int64("tranStateTableOffset")
	h.CommitLogOffset = r.Int64("commitLogOffset")
	h.CommitOrRollback = r.Int32("commitOrRollback")
	h.FromTransactionCheck = r.OptBool("fromTransactionCheck", false)
	h.MsgID = r.OptString("msgId")
	h.TransactionID = r.OptString("transactionId")
	return r.Err()
}

// handleEndTransaction serves END_TRANSACTION. Commit puts the half
// message into its real topic (through the schedule service when it has a
// DELAY level) and records the resolution; rollback only records it. A
// producer that does not know yet (0) gets no answer, as from RocketMQ,
// and is asked again later. Resolving an already resolved half message
// answers SUCCESS and stores nothing, so a late duplicate (the producer's
// own answer racing a check's) cannot commit twice.
func (t *transactionService) handleEndTransaction(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h endTransactionHeader
	if err := h.setExt(req.ExtFields); err != nil {
		return badHeader(req, err)
	}
	switch h.CommitOrRollback {
	case protocol.SysFlagTransactionCommit, protocol.SysFlagTransactionRollbck:
	case 0:
		t.s.logger.Debug("END_TRANSACTION with state unknown; the half message stays pending", "producerGroup", h.ProducerGroup,
			"msgId", h.MsgID, "fromCheck", h.FromTransactionCheck, "remark", req.Remark)
		return nil
	default:
		return errorf(req, protocol.InvalidParameter, "END_TRANSACTION: commitOrRollback %d is neither 8 (commit) nor 12 (rollback)", h.CommitOrRollback)
	}
	half, err := t.s.store.MessageAt(h.CommitLogOffset)
	if err != nil || half.Topic != transHalfTopic {
		return errorf(req, protocol.SystemError, "find prepared transaction message failed: no half message at commit-log offset %d on broker %s",
			h.CommitLogOffset, t.s.opts.BrokerName)
	}
	if g, _ := protocol.Property(half.Properties, protocol.PropertyProducerGroup); g != h.ProducerGroup {
		return errorf(req, protocol.SystemError, "the producer group wrong: the half message at %d belongs to %q, not %q", h.CommitLogOffset, g, h.ProducerGroup)
	}
	if half.QueueOffset != h.TranStateTableOffset {
		return errorf(req, protocol.SystemError, "the transaction state table offset wrong: the half message at %d has queue offset %d, not %d",
			h.CommitLogOffset, half.QueueOffset, h.TranStateTableOffset)
	}
	// Resolving makes a message visible in, or drops it from, its real
	// topic: only an account that may send there may do it.
	if real, _ := protocol.Property(half.Properties, protocol.PropertyRealTopic); real != "" {
		if resp := t.s.checkRecordPerm(c, req, acl.Pub, real); resp != nil {
			return resp
		}
	}
	if !t.claim(half.QueueOffset) {
		return success(req, nil, nil)
	}
	commit := h.CommitOrRollback == protocol.SysFlagTransactionCommit
	if commit {
		if _, err := t.commit(ctx, half); err != nil {
			t.release(half.QueueOffset)
			return t.s.putErrorResponse(req, half.Topic, err)
		}
	}
	t.resolve(ctx, half.QueueOffset, opKind(commit))
	t.s.logger.Debug("transaction resolved", "producerGroup", h.ProducerGroup, "msgId", h.MsgID, "commit", commit,
		"fromCheck", h.FromTransactionCheck)
	return success(req, nil, nil)
}

// commit puts the committed copy of a half message into its real topic:
// REAL_TOPIC, REAL_QID and TRAN_MSG removed, sysflag marked committed, the
// half record's offset kept as preparedTransactionOffset.
func (t *transactionService) commit(ctx context.Context, half *protocol.MessageExt) (store.PutResult, error) {
	topic, ok := protocol.Property(half.Properties, protocol.PropertyRealTopic)
	qid, ok2 := protocol.Property(half.Properties, protocol.PropertyRealQueueID)
	queueID, err := strconv.ParseInt(qid, 10, 32)
	if !ok || !ok2 || err != nil || queueID < 0 {
		return store.PutResult{}, fmt.Errorf("%w: %w", store.ErrIllegalMessage, errNoRealTopic)
	}
	m := &protocol.MessageExt{
		Topic:                     topic,
		QueueID:                   int32(queueID),
		Flag:                      half.Flag,
		SysFlag:                   half.SysFlag&^protocol.SysFlagTransactionMask | protocol.SysFlagTransactionCommit,
		BornTimestamp:             half.BornTimestamp,
		BornHost:                  half.BornHost,
		ReconsumeTimes:            half.ReconsumeTimes,
		PreparedTransactionOffset: half.CommitLogOffset,
		Body:                      half.Body,
		Properties: removeProperties(half.Properties, protocol.PropertyRealTopic, protocol.PropertyRealQueueID,
			protocol.PropertyTransactionPrepared),
	}
	if level := delayLevel(m.Properties); level > 0 && t.s.schedule != nil {
		return t.s.schedule(ctx, m, level)
	}
	return t.s.putMessage(ctx, m)
}

// opKind names an op record's cause (kept in its properties for people
// reading the op topic; recovery needs only the body).
func opKind(commit bool) string {
	if commit {
		return "commit"
	}
	return "rollback"
}

// claim marks a pending half message as being resolved; false when it is
// resolved or being resolved already.
func (t *transactionService) claim(halfOffset int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if halfOffset < t.halfOffset {
		return false
	}
	if _, ok := t.resolved[halfOffset]; ok {
		return false
	}
	t.resolved[halfOffset] = resolution{op: t.s.store.MaxOffset(transOpHalfTopic, 0), pending: true}
	return true
}

// release undoes a claim whose resolution could not be stored.
func (t *transactionService) release(halfOffset int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.resolved[halfOffset].pending {
		delete(t.resolved, halfOffset)
	}
}

// resolve appends the op record of a claimed half message and marks it
// resolved. If the op record cannot be stored the resolution still holds
// in memory; after a restart the message would be checked again.
func (t *transactionService) resolve(ctx context.Context, halfOffset int64, kind string) {
	opOffset := t.s.store.MaxOffset(transOpHalfTopic, 0)
	if _, err := t.s.ensureTopic(newTopicConfig(transOpHalfTopic, 1, protocol.PermReadWrite)); err != nil {
		t.s.logger.Error("creating the transaction op topic", "err", err)
	}
	op := &protocol.MessageExt{
		Topic:         transOpHalfTopic,
		BornTimestamp: wallclock.UnixMilli(),
		BornHost:      t.s.storeHost,
		Body:          []byte(strconv.FormatInt(halfOffset, 10)),
		Properties: protocol.EncodeProperties(map[string]string{
			protocol.PropertyTags: transOpTag, "TRAN_OP": kind,
		}),
	}
	if res, err := t.s.putMessage(ctx, op); err != nil {
		t.s.logger.Error("storing a transaction op record failed; the half message may be checked again after a restart",
			"halfOffset", halfOffset, "err", err)
	} else {
		opOffset = res.QueueOffset
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if halfOffset >= t.halfOffset {
		t.resolved[halfOffset] = resolution{op: opOffset}
	}
	delete(t.checks, halfOffset)
	delete(t.origins, halfOffset)
	t.dirty = true
}
