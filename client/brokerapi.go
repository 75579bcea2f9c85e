package client

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// The broker requests consumers and the admin make. Each goes to one
// address, waits at most timeout, and turns error answers into
// *ResponseError.

// PullStatus is the outcome of a pull.
type PullStatus int

// Pull statuses.
const (
	// PullFound: Messages holds messages.
	PullFound PullStatus = iota
	// PullNoNewMsg: nothing at or after the offset yet.
	PullNoNewMsg
	// PullNoMatchedMsg: messages were there, none matched the expression.
	PullNoMatchedMsg
	// PullOffsetIllegal: the offset is outside the queue; continue at
	// NextBeginOffset.
	PullOffsetIllegal
)

// String names the status as RocketMQ does.
func (s PullStatus) String() string {
	switch s {
	case PullFound:
		return "FOUND"
	case PullNoNewMsg:
		return "NO_NEW_MSG"
	case PullNoMatchedMsg:
		return "NO_MATCHED_MSG"
	case PullOffsetIllegal:
		return "OFFSET_ILLEGAL"
	}
	return "PullStatus(" + strconv.Itoa(int(s)) + ")"
}

// PullResult is the outcome of one pull.
type PullResult struct {
	Status PullStatus
	// NextBeginOffset is where the next pull of the queue starts.
	NextBeginOffset int64
	// MinOffset and MaxOffset bound the queue's stored messages (MaxOffset
	// is the offset the next stored message will get).
	MinOffset int64
	MaxOffset int64
	// Messages are the messages found, already filtered by tag and stamped
	// with their broker.
	Messages []*MessageExt
}

// pullRequest is what a pull needs besides the queue's broker.
type pullRequest struct {
	group        string
	mq           MessageQueue
	offset       int64
	maxNums      int
	commitOffset int64 // < 0: nothing to commit
	suspend      time.Duration
	sub          *subscription
}

func (c *core) pull(ctx context.Context, b *brokerInfo, pr pullRequest, timeout time.Duration) (*PullResult, error) {
	addr := b.readAddr()
	sysFlag := int32(protocol.PullFlagSubscription)
	if pr.commitOffset >= 0 {
		sysFlag |= protocol.PullFlagCommitOffset
	}
	if pr.suspend > 0 {
		sysFlag |= protocol.PullFlagSuspend
	}
	h := protocol.PullMessageRequestHeader{
		ConsumerGroup:        pr.group,
		Topic:                pr.mq.Topic,
		QueueID:              int32(pr.mq.QueueID),
		QueueOffset:          pr.offset,
		MaxMsgNums:           int32(pr.maxNums),
		SysFlag:              sysFlag,
		CommitOffset:         max(pr.commitOffset, 0),
		SuspendTimeoutMillis: pr.suspend.Milliseconds(),
		Subscription:         pr.sub.expr,
		SubVersion:           pr.sub.data.SubVersion,
		ExpressionType:       pr.sub.data.ExpressionType,
		BrokerName:           b.name,
	}
	var req *remoting.Command
	if c.cfg.AccessKey == "" {
		req = request(protocol.PullMessage, nil, nil)
		req.Header = &h // written straight into the frame: no map per pull
	} else {
		req = request(protocol.PullMessage, h.Ext(), nil) // signed over the map
	}
	resp, err := c.invoke(ctx, addr, req, timeout)
	if err != nil {
		return nil, err
	}
	res := &PullResult{}
	var rh protocol.PullMessageResponseHeader
	code := protocol.ResponseCode(resp.Code)
	switch code {
	case protocol.Success:
		res.Status = PullFound
	case protocol.PullNotFound:
		res.Status = PullNoNewMsg
	case protocol.PullRetryImmediately:
		res.Status = PullNoMatchedMsg
	case protocol.PullOffsetMoved:
		res.Status = PullOffsetIllegal
	default:
		return nil, responseError(protocol.PullMessage, addr, resp)
	}
	if err := rh.SetExt(resp.ExtFields); err != nil {
		return nil, fmt.Errorf("zonemq client: PULL_MESSAGE answer from %s: %w", addr, err)
	}
	res.NextBeginOffset, res.MinOffset, res.MaxOffset = rh.NextBeginOffset, rh.MinOffset, rh.MaxOffset
	if res.Status != PullFound {
		return res, nil
	}
	msgs, err := decodeMessages(resp.Body, b)
	if err != nil {
		return nil, fmt.Errorf("zonemq client: PULL_MESSAGE body from %s: %w", addr, err)
	}
	// Brokers filter by tag code; codes can collide, so filter by the tag
	// itself again, as RocketMQ clients do.
	kept := msgs[:0]
	minOff, maxOff := strconv.FormatInt(res.MinOffset, 10), strconv.FormatInt(res.MaxOffset, 10)
	for _, m := range msgs {
		m.Properties[protocol.PropertyMinOffset] = minOff
		m.Properties[protocol.PropertyMaxOffset] = maxOff
		if pr.sub.match(m.Tags) {
			kept = append(kept, m)
		}
	}
	res.Messages = kept
	if len(kept) == 0 {
		res.Status = PullNoMatchedMsg
	}
	return res, nil
}

// consumerList asks a broker for the group's consumers as it sees them.
func (c *core) consumerList(ctx context.Context, addr, group string) ([]string, error) {
	h := protocol.ConsumerGroupRequestHeader{ConsumerGroup: group}
	resp, err := c.invoke(ctx, addr, request(protocol.GetConsumerListByGroup, h.Ext(), nil), c.cfg.RequestTimeout)
	if err != nil {
		return nil, err
	}
	if resp.Code != int32(protocol.Success) {
		if len(resp.Body) == 0 {
			// RocketMQ answers SYSTEM_ERROR for a group it has never seen.
			return nil, nil
		}
	}
	var body protocol.ConsumerListBody
	if len(resp.Body) > 0 {
		if err := json.Unmarshal(resp.Body, &body); err != nil {
			return nil, fmt.Errorf("zonemq client: consumer list from %s: %w", addr, err)
		}
	}
	return body.ConsumerIDList, nil
}

// queryOffset returns the group's committed offset of mq, or ErrNoOffset.
func (c *core) queryOffset(ctx context.Context, addr, group string, mq MessageQueue) (int64, error) {
	h := protocol.QueryConsumerOffsetRequestHeader{ConsumerGroup: group, Topic: mq.Topic, QueueID: int32(mq.QueueID), BrokerName: mq.BrokerName}
	resp, err := c.invoke(ctx, addr, request(protocol.QueryConsumerOffset, h.Ext(), nil), c.cfg.RequestTimeout)
	if err != nil {
		return 0, err
	}
	switch protocol.ResponseCode(resp.Code) {
	case protocol.Success:
	case protocol.QueryNotFound:
		return 0, ErrNoOffset
	default:
		return 0, responseError(protocol.QueryConsumerOffset, addr, resp)
	}
	return offsetOf(protocol.QueryConsumerOffset, addr, resp.ExtFields)
}

// updateOffset commits the group's offset of mq.
func (c *core) updateOffset(ctx context.Context, addr, group string, mq MessageQueue, offset int64) error {
	h := protocol.UpdateConsumerOffsetRequestHeader{ConsumerGroup: group, Topic: mq.Topic, QueueID: int32(mq.QueueID), CommitOffset: offset, BrokerName: mq.BrokerName}
	resp, err := c.invoke(ctx, addr, request(protocol.UpdateConsumerOffset, h.Ext(), nil), c.cfg.RequestTimeout)
	if err != nil {
		return err
	}
	if resp.Code != int32(protocol.Success) {
		return responseError(protocol.UpdateConsumerOffset, addr, resp)
	}
	return nil
}

// queueOffset asks GET_MAX_OFFSET or GET_MIN_OFFSET of mq.
func (c *core) queueOffset(ctx context.Context, code protocol.RequestCode, addr string, mq MessageQueue) (int64, error) {
	h := protocol.QueueRequestHeader{Topic: mq.Topic, QueueID: int32(mq.QueueID), BrokerName: mq.BrokerName}
	resp, err := c.invoke(ctx, addr, request(code, h.Ext(), nil), c.cfg.RequestTimeout)
	if err != nil {
		return 0, err
	}
	if resp.Code != int32(protocol.Success) {
		return 0, responseError(code, addr, resp)
	}
	return offsetOf(code, addr, resp.ExtFields)
}

// searchOffset returns the first offset of mq stored at or after ts.
func (c *core) searchOffset(ctx context.Context, addr string, mq MessageQueue, ts time.Time) (int64, error) {
	h := protocol.SearchOffsetRequestHeader{Topic: mq.Topic, QueueID: int32(mq.QueueID), Timestamp: ts.UnixMilli(), BrokerName: mq.BrokerName}
	resp, err := c.invoke(ctx, addr, request(protocol.SearchOffsetByTimestamp, h.Ext(), nil), c.cfg.RequestTimeout)
	if err != nil {
		return 0, err
	}
	if resp.Code != int32(protocol.Success) {
		return 0, responseError(protocol.SearchOffsetByTimestamp, addr, resp)
	}
	return offsetOf(protocol.SearchOffsetByTimestamp, addr, resp.ExtFields)
}

func offsetOf(code protocol.RequestCode, addr string, ext map[string]string) (int64, error) {
	var h protocol.OffsetResponseHeader
	if err := h.SetExt(ext); err != nil {
		return 0, fmt.Errorf("zonemq client: %s answer from %s: %w", code, addr, err)
	}
	return h.Offset, nil
}

// lockBody is LOCK_BATCH_MQ's and UNLOCK_BATCH_MQ's body.
type lockBody struct {
	ConsumerGroup string                  `json:"consumerGroup"`
	ClientID      string                  `json:"clientId"`
	MQSet         []protocol.MessageQueue `json:"mqSet"`
	// Concurrent tells a zonemq broker the lock is not an orderly
	// consumer's: replicas grant it too (orderly locks only masters).
	Concurrent bool `json:"zmqConcurrent,omitempty"`
}

// lockBatch asks a broker to lock mqs for this client; it returns the
// queues the broker locked.
func (c *core) lockBatch(ctx context.Context, addr, group string, mqs []MessageQueue, concurrent bool) (map[MessageQueue]bool, error) {
	body := lockBody{ConsumerGroup: group, ClientID: c.id(), Concurrent: concurrent}
	for _, mq := range mqs {
		body.MQSet = append(body.MQSet, mq.internal())
	}
	resp, err := c.invoke(ctx, addr, request(protocol.LockBatchMQ, map[string]string{}, mustJSON(&body)), c.cfg.RequestTimeout)
	if err != nil {
		return nil, err
	}
	if resp.Code != int32(protocol.Success) {
		return nil, responseError(protocol.LockBatchMQ, addr, resp)
	}
	var out struct {
		LockOKMQSet []protocol.MessageQueue `json:"lockOKMQSet"`
	}
	if err := json.Unmarshal(resp.Body, &out); err != nil {
		return nil, fmt.Errorf("zonemq client: LOCK_BATCH_MQ answer from %s: %w", addr, err)
	}
	locked := map[MessageQueue]bool{}
	for _, q := range out.LockOKMQSet {
		locked[MessageQueue{Topic: q.Topic, BrokerName: q.BrokerName, QueueID: q.QueueID}] = true
	}
	return locked, nil
}

// unlockBatch releases locks on mqs.
func (c *core) unlockBatch(ctx context.Context, addr, group string, mqs []MessageQueue) error {
	body := lockBody{ConsumerGroup: group, ClientID: c.id()}
	for _, mq := range mqs {
		body.MQSet = append(body.MQSet, mq.internal())
	}
	resp, err := c.invoke(ctx, addr, request(protocol.UnlockBatchMQ, map[string]string{}, mustJSON(&body)), c.cfg.RequestTimeout)
	if err != nil {
		return err
	}
	if resp.Code != int32(protocol.Success) {
		return responseError(protocol.UnlockBatchMQ, addr, resp)
	}
	return nil
}

// heartbeatBroker sends HEART_BEAT with hb to addr.
func (c *core) heartbeatBroker(ctx context.Context, addr string, hb []byte) error {
	resp, err := c.invoke(ctx, addr, request(protocol.HeartBeat, map[string]string{}, hb), c.cfg.RequestTimeout)
	if err != nil {
		return err
	}
	if resp.Code != int32(protocol.Success) {
		return responseError(protocol.HeartBeat, addr, resp)
	}
	return nil
}
