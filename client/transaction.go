package client

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// TransactionState is a local transaction's outcome, for EndTransaction
// and TransactionChecker.
type TransactionState int

// Transaction states (RocketMQ's LocalTransactionState).
const (
	// TransactionUnknown leaves the half message pending: the broker asks
	// the producer group again later.
	TransactionUnknown TransactionState = iota
	TransactionCommit
	TransactionRollback
)

// HalfMessage names a transaction's half message on its broker: what
// EndTransaction needs, from SendHalf's result or from a check.
type HalfMessage struct {
	Topic      string
	BrokerName string
	// BrokerAddr is where it was stored; EndTransaction goes to the broker
	// group's master now, which keeps it at the same offsets.
	BrokerAddr      string
	MsgID           string // the client id (UNIQ_KEY)
	CommitLogOffset int64
	QueueOffset     int64 // in the broker's half-message queue
}

// TransactionChecker answers a broker that asks about a half message left
// pending (RocketMQ's checkLocalTransaction). It runs on its own goroutine;
// TransactionUnknown answers nothing, and the broker asks again later. A
// checker may also return TransactionUnknown and resolve the message later
// with EndTransaction (the gRPC access point forwards checks to RocketMQ 5
// clients that way).
type TransactionChecker func(ctx context.Context, half HalfMessage, m *MessageExt) TransactionState

// SendHalf sends msg as a transaction's half message (TRAN_MSG): stored,
// but invisible to consumers until EndTransaction commits it, and asked
// about (ProducerConfig.TransactionChecker) when left pending. It goes to
// a broker as SendSync would, own IDC first.
func (p *Producer) SendHalf(ctx context.Context, msg *Message) (*SendResult, HalfMessage, error) {
	if err := p.c.running(); err != nil {
		return nil, HalfMessage{}, err
	}
	if msg != nil && (msg.DelayLevel > 0 || !msg.DeliverAt.IsZero()) {
		return nil, HalfMessage{}, fmt.Errorf("%w: a transactional message cannot be delayed", ErrInvalidMessage)
	}
	out, err := p.s.prepare([]*Message{msg})
	if err != nil {
		return nil, HalfMessage{}, err
	}
	props := protocol.ParseProperties(out.header.Properties)
	props[protocol.PropertyTransactionPrepared] = "true"
	props[protocol.PropertyProducerGroup] = p.cfg.Group
	out.header.Properties = protocol.EncodeProperties(props)
	out.header.SysFlag |= protocol.SysFlagTransactionPrep
	res, err := p.s.send(ctx, out, p.s.pickRoundRobin)
	if err != nil {
		return nil, HalfMessage{}, err
	}
	_, clOffset, err := protocol.ParseOffsetMessageID(res.OffsetMsgID)
	if err != nil {
		return res, HalfMessage{}, fmt.Errorf("zonemq client: half message stored, but its id %q names no offset: %w", res.OffsetMsgID, err)
	}
	return res, HalfMessage{Topic: msg.Topic, BrokerName: res.BrokerName, BrokerAddr: res.BrokerAddr, MsgID: res.MsgID,
		CommitLogOffset: clOffset, QueueOffset: res.QueueOffset}, nil
}

// EndTransaction commits or rolls back a half message on its broker
// group's master (END_TRANSACTION). fromCheck says it answers a check.
// TransactionUnknown sends nothing.
func (p *Producer) EndTransaction(ctx context.Context, half HalfMessage, state TransactionState, fromCheck bool) error {
	if err := p.c.running(); err != nil {
		return err
	}
	var flag int32
	switch state {
	case TransactionCommit:
		flag = protocol.SysFlagTransactionCommit
	case TransactionRollback:
		flag = protocol.SysFlagTransactionRollbck
	default:
		return nil
	}
	addr := half.BrokerAddr
	if r, err := p.c.routes.get(ctx, half.Topic); err == nil {
		if b := r.brokers[half.BrokerName]; b != nil && b.master() != "" {
			addr = b.master()
		}
	}
	if addr == "" {
		return fmt.Errorf("%w: broker %s has no master to end the transaction on", ErrNoRoute, half.BrokerName)
	}
	ext := protocol.ExtWriter{}
	ext.Str("producerGroup", p.cfg.Group).Int("tranStateTableOffset", half.QueueOffset).
		Int("commitLogOffset", half.CommitLogOffset).Int("commitOrRollback", int64(flag)).
		Bool("fromTransactionCheck", fromCheck).Str("msgId", half.MsgID).Str("transactionId", half.MsgID)
	resp, err := p.c.invoke(ctx, addr, request(protocol.EndTransaction, ext, nil), p.cfg.RequestTimeout)
	if err != nil {
		return err
	}
	if resp.Code != int32(protocol.Success) {
		return responseError(protocol.EndTransaction, addr, resp)
	}
	return nil
}

// handleCheckTransactionState serves a broker's CHECK_TRANSACTION_STATE
// (one-way): the checker runs on its own goroutine and its answer goes to
// the broker that asked.
func (p *Producer) handleCheckTransactionState(_ context.Context, cn *remoting.Conn, req *remoting.Command) *remoting.Command {
	check := p.cfg.TransactionChecker
	if check == nil {
		return nil
	}
	ms, err := decodeMessages(req.Body, nil)
	if err != nil || len(ms) != 1 {
		p.c.logger.Warn("undecodable transaction check", "peer", cn.RemoteAddr(), "err", errors.Join(err, errors.New("not one message")))
		return nil
	}
	ext := req.ExtFields
	qOff, err1 := strconv.ParseInt(ext["tranStateTableOffset"], 10, 64)
	clOff, err2 := strconv.ParseInt(ext["commitLogOffset"], 10, 64)
	if err1 != nil || err2 != nil {
		p.c.logger.Warn("transaction check without offsets", "peer", cn.RemoteAddr())
		return nil
	}
	m := ms[0]
	m.BrokerAddr = cn.RemoteAddr()
	half := HalfMessage{Topic: m.Topic, BrokerName: ext["bname"], BrokerAddr: cn.RemoteAddr(), MsgID: ext["msgId"],
		CommitLogOffset: clOff, QueueOffset: qOff}
	p.c.goLoop(func(ctx context.Context) {
		state := check(ctx, half, m)
		if err := p.EndTransaction(ctx, half, state, true); err != nil {
			p.c.logger.Warn("answering a transaction check failed; the broker asks again", "msgId", half.MsgID, "err", err)
		}
	})
	return nil
}
