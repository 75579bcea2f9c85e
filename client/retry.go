package client

import (
	"context"
	"strconv"

	"github.com/zonemq/zonemq/internal/protocol"
)

// sendBack returns a message the handler could not consume to the broker
// for redelivery: CONSUMER_SEND_MSG_BACK to the broker that holds it (the
// broker moves it to the group's retry topic with a delay, or to the
// dead-letter queue after maxReconsumeTimes; delayLevel -1 means the
// dead-letter queue now). If that broker cannot, a copy is sent to
// %RETRY%<group> through any broker, own IDC first, like
// rocketmq-client-go's fallback.
func (pc *PushConsumer) sendBack(ctx context.Context, pq *processQueue, m *MessageExt, delayLevel int) error {
	addr := pq.broker.readAddr()
	ext := protocol.ExtWriter{}
	ext.Str("group", pc.cfg.Group).Int("offset", m.CommitLogOffset).Int("delayLevel", int64(delayLevel)).
		Str("originMsgId", m.MsgID).Str("originTopic", m.Topic).Bool("unitMode", false).
		Int("maxReconsumeTimes", int64(pc.cfg.MaxReconsumeTimes)).Str("bname", pq.broker.name)
	resp, err := pc.c.invoke(ctx, addr, request(protocol.ConsumerSendMsgBack, ext, nil), pc.cfg.RequestTimeout)
	if err == nil && resp.Code == int32(protocol.Success) {
		return nil
	}
	if err == nil {
		err = responseError(protocol.ConsumerSendMsgBack, addr, resp)
	}
	pc.c.logger.Debug("CONSUMER_SEND_MSG_BACK failed; sending the retry as a message", "msgId", m.MsgID, "err", err)
	return pc.sendRetryMessage(ctx, m, delayLevel)
}

// sendRetryMessage sends a copy of m to the group's retry topic with its
// reconsume count raised; the broker routes it to the dead-letter queue
// once the count passes maxReconsumeTimes.
func (pc *PushConsumer) sendRetryMessage(ctx context.Context, m *MessageExt, delayLevel int) error {
	props := make(map[string]string, len(m.Properties)+3)
	for k, v := range m.Properties {
		props[k] = v
	}
	delete(props, protocol.PropertyMinOffset)
	delete(props, protocol.PropertyMaxOffset)
	if _, ok := props[protocol.PropertyRetryTopic]; !ok {
		props[protocol.PropertyRetryTopic] = m.Topic
	}
	if _, ok := props[protocol.PropertyOriginMessageID]; !ok {
		props[protocol.PropertyOriginMessageID] = m.MsgID
	}
	delete(props, protocol.PropertyDelayLevel)
	reconsume := m.ReconsumeTimes + 1
	maxTimes := pc.cfg.MaxReconsumeTimes
	switch {
	case delayLevel < 0:
		// Straight to the dead-letter queue: make the broker see the count
		// exhausted.
		reconsume = maxTimes + 1
	case delayLevel == 0:
		props[protocol.PropertyDelayLevel] = strconv.Itoa(3 + m.ReconsumeTimes)
	default:
		props[protocol.PropertyDelayLevel] = strconv.Itoa(delayLevel)
	}
	topic := protocol.RetryTopic(pc.cfg.Group)
	out := &outgoing{
		topic: topic,
		code:  protocol.SendMessage,
		msgID: m.MsgID,
		body:  m.Body,
		header: protocol.SendMessageRequestHeader{
			ProducerGroup:         pc.s.group,
			Topic:                 topic,
			DefaultTopic:          protocol.AutoCreateTopicKey,
			DefaultTopicQueueNums: 4,
			Flag:                  m.Flag,
			Properties:            protocol.EncodeProperties(props),
			ReconsumeTimes:        int32(reconsume),
			MaxReconsumeTimes:     int32(maxTimes),
		},
	}
	_, err := pc.s.send(ctx, out, pc.s.pickRoundRobin)
	return err
}
