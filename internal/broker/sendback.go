package broker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/store"
)

// retryBaseDelayLevel is the delay level of a first retry when the consumer
// leaves the level to the broker (delayLevel 0): level 3 + reconsumeTimes,
// so 10 s, 30 s, 1 m, 2 m … with the default table.
const retryBaseDelayLevel = 3

// consumerSendMsgBackHeader is CONSUMER_SEND_MSG_BACK's header.
type consumerSendMsgBackHeader struct {
	Group       string
	Offset      int64 // commit-log offset of the message consumed
	DelayLevel  int32 // 0: the broker chooses; < 0: straight to the DLQ
	OriginMsgID string
	OriginTopic string
	UnitMode    bool
	// MaxReconsumeTimes is the consumer's limit; HasMaxReconsumeTimes is
	// false when the field is absent and the group's retryMaxTimes applies.
	MaxReconsumeTimes    int32
	HasMaxReconsumeTimes bool
	BrokerName           string
}

// ext renders the header (tests build requests with it).
func (h *consumerSendMsgBackHeader) ext() map[string]string {
	w := protocol.ExtWriter{}
	w.Str("group", h.Group).Int("offset", h.Offset).Int("delayLevel", int64(h.DelayLevel)).
		Str("originMsgId", h.OriginMsgID).Str("originTopic", h.OriginTopic).Bool("unitMode", h.UnitMode).
		OptStr("bname", h.BrokerName)
	if h.HasMaxReconsumeTimes {
		w.Int("maxReconsumeTimes", int64(h.MaxReconsumeTimes))
	}
	return w
}

// setExt reads the header; group, offset and delayLevel are required.
func (h *consumerSendMsgBackHeader) setExt(ext map[string]string) error {
	r := protocol.NewExtReader(ext)
	h.Group = r.String("group")
	h.Offset = r.Int64("offset")
	h.DelayLevel = r.Int32("delayLevel")
	h.OriginMsgID = r.OptString("originMsgId")
	h.OriginTopic = r.OptString("originTopic")
	h.UnitMode = r.OptBool("unitMode", false)
	_, h.HasMaxReconsumeTimes = ext["maxReconsumeTimes"]
	h.MaxReconsumeTimes = r.OptInt32("maxReconsumeTimes", 0)
	h.BrokerName = r.OptString("bname")
	return r.Err()
}

// handleConsumerSendMsgBack serves CONSUMER_SEND_MSG_BACK: a consumer could
// not consume the message at commit-log offset `offset` and hands it back.
// A copy with reconsumeTimes+1 goes to %RETRY%<group> after a delay (level
// delayLevel, or 3 + reconsumeTimes when 0), or to %DLQ%<group> once the
// copy would exceed maxReconsumeTimes or when delayLevel < 0.
func (s *Server) handleConsumerSendMsgBack(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h consumerSendMsgBackHeader
	if err := h.setExt(req.ExtFields); err != nil {
		return badHeader(req, err)
	}
	if err := protocol.ValidateGroup(h.Group); err != nil {
		return errorf(req, protocol.InvalidParameter, "CONSUMER_SEND_MSG_BACK: group: %v", err)
	}
	group := s.groups.getOrCreate(h.Group)
	if group.RetryQueueNums <= 0 {
		// The group does not retry: the message is dropped, as in RocketMQ.
		return success(req, nil, nil)
	}
	orig, err := s.store.MessageAt(h.Offset)
	if err == nil && isInternalTopic(orig.Topic) {
		err = fmt.Errorf("the record at %d belongs to the internal topic %s", h.Offset, orig.Topic)
	}
	if err != nil {
		s.logger.Warn("CONSUMER_SEND_MSG_BACK for an unreadable offset", "group", h.Group, "offset", h.Offset, "peer", c.RemoteAddr(), "err", err)
		return errorf(req, protocol.SystemError, "look message by offset failed: no message at commit-log offset %d on broker %s", h.Offset, s.opts.BrokerName)
	}
	// The copy lands in the caller's retry topic, readable by the caller:
	// it must be allowed to read the original.
	if resp := s.checkRecordSub(c, req, orig); resp != nil {
		return resp
	}
	maxTimes := int32(group.RetryMaxTimes)
	if h.HasMaxReconsumeTimes {
		maxTimes = h.MaxReconsumeTimes
	}
	m := s.retryCopy(orig, h.OriginMsgID)
	var topic string
	var res store.PutResult
	if orig.ReconsumeTimes >= maxTimes || h.DelayLevel < 0 {
		topic = protocol.DLQTopic(h.Group)
		res, err = s.putDLQ(ctx, h.Group, m)
	} else {
		topic = protocol.RetryTopic(h.Group)
		level := int(h.DelayLevel)
		if level == 0 {
			level = retryBaseDelayLevel + int(orig.ReconsumeTimes)
		}
		res, err = s.putRetry(ctx, group, m, level)
	}
	if err != nil {
		return s.putErrorResponse(req, topic, err)
	}
	s.logger.Debug("message sent back", "group", h.Group, "topic", topic, "reconsumeTimes", m.ReconsumeTimes, "offset", res.CommitLogOffset)
	return success(req, nil, nil)
}

// retryCopy returns the message to store again for a consumer that failed
// orig: same body, flag, sysflag, born host and time, reconsumeTimes+1, and
// the properties RETRY_TOPIC (the first topic, set once), ORIGIN_MESSAGE_ID
// (set once: the consumer's id for it, else its UNIQ_KEY, else its offset
// id) and RECONSUME_TIME. Topic and queue are left to the caller.
func (s *Server) retryCopy(orig *protocol.MessageExt, originMsgID string) *protocol.MessageExt {
	props := setPropertyIfAbsent(orig.Properties, protocol.PropertyRetryTopic, orig.Topic)
	if originMsgID == "" {
		originMsgID, _ = protocol.Property(orig.Properties, protocol.PropertyUniqClientMessageID)
	}
	if originMsgID == "" {
		originMsgID = protocol.OffsetMessageID(orig.StoreHost, orig.CommitLogOffset)
	}
	props = setPropertyIfAbsent(props, protocol.PropertyOriginMessageID, originMsgID)
	props = setProperty(props, protocol.PropertyReconsumeTime, strconv.Itoa(int(orig.ReconsumeTimes)+1))
	return &protocol.MessageExt{
		Flag:           orig.Flag,
		SysFlag:        orig.SysFlag,
		BornTimestamp:  orig.BornTimestamp,
		BornHost:       orig.BornHost,
		ReconsumeTimes: orig.ReconsumeTimes + 1,
		Body:           orig.Body,
		Properties:     props,
	}
}

// isInternalTopic reports whether topic holds the broker's own records
// (delayed or half messages, transaction op records), which are never handed
// to consumers and so never come back.
func isInternalTopic(topic string) bool {
	return topic == protocol.ScheduleTopic || topic == transHalfTopic || topic == transOpHalfTopic
}

// putRetry stores m in the group's retry topic (created if missing) through
// the schedule service at delay level `level`.
func (s *Server) putRetry(ctx context.Context, group protocol.SubscriptionGroupConfig, m *protocol.MessageExt, level int) (store.PutResult, error) {
	cfg, err := s.ensureTopic(newTopicConfig(protocol.RetryTopic(group.GroupName), max(group.RetryQueueNums, 1), retryTopicPerm))
	if err != nil {
		return store.PutResult{}, err
	}
	m.Topic = cfg.TopicName
	m.QueueID = rand.Int32N(int32(max(cfg.WriteQueueNums, 1)))
	m.Properties = removeProperties(m.Properties, protocol.PropertyDelayLevel)
	if s.schedule == nil || level <= 0 {
		return s.putMessage(ctx, m)
	}
	return s.schedule(ctx, m, level)
}
