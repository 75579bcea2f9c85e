package client

import (
	"context"

	"github.com/zonemq/zonemq/internal/protocol"
)

// SendToRetry sends a message read from a broker (a dead-lettered one, say)
// again, to group's retry topic (%RETRY%group), so that group — and only
// group — consumes it once more, with its reconsume count reset. The copy
// is a new message (a fresh client id); RETRY_TOPIC keeps the topic the
// group's consumers see, ORIGIN_MESSAGE_ID and RESEND_FROM_DLQ say where
// it came from. admin.ResendFromDLQ is built on it.
func (p *Producer) SendToRetry(ctx context.Context, group string, m *MessageExt) (*SendResult, error) {
	if err := p.c.running(); err != nil {
		return nil, err
	}
	props := map[string]string{}
	for k, v := range m.Properties {
		props[k] = v
	}
	// RETRY_TOPIC tells the group's consumers which topic the message
	// belongs to; a fresh UNIQ_KEY makes it a new message, ORIGIN_MESSAGE_ID
	// and RESEND_FROM_DLQ say where it came from.
	if props[protocol.PropertyRetryTopic] == "" {
		props[protocol.PropertyRetryTopic] = m.Topic
	}
	if props[protocol.PropertyOriginMessageID] == "" {
		props[protocol.PropertyOriginMessageID] = m.MsgID
	}
	for _, k := range []string{protocol.PropertyMinOffset, protocol.PropertyMaxOffset, protocol.PropertyDelayLevel} {
		delete(props, k)
	}
	msgID := processUniqKeys.next()
	props[protocol.PropertyUniqClientMessageID] = msgID
	props["RESEND_FROM_DLQ"] = m.OffsetMsgID
	topic := protocol.RetryTopic(group)
	out := &outgoing{
		topic: topic,
		code:  protocol.SendMessage,
		msgID: msgID,
		body:  m.Body, // decompressed when it was read
		header: protocol.SendMessageRequestHeader{
			ProducerGroup:         p.s.group,
			Topic:                 topic,
			DefaultTopic:          protocol.AutoCreateTopicKey,
			DefaultTopicQueueNums: 4,
			Flag:                  m.Flag,
			Properties:            protocol.EncodeProperties(props),
			MaxReconsumeTimes:     int32(DefaultMaxReconsumeTimes),
		},
	}
	return p.s.send(ctx, out, p.s.pickRoundRobin)
}
