package client

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/zonemq/zonemq/internal/protocol"
)

// BrowseDLQ returns up to max messages of group's dead-letter topic
// (%DLQ%group), oldest queue offsets first on each broker, without
// consuming or committing anything. It returns an empty slice when the
// group has no dead-letter topic yet.
func (a *Admin) BrowseDLQ(ctx context.Context, group string, max int) ([]*MessageExt, error) {
	if err := a.c.running(); err != nil {
		return nil, err
	}
	if max <= 0 {
		max = 32
	}
	topic := protocol.DLQTopic(group)
	r, err := a.c.routes.fetch(ctx, topic)
	if err != nil {
		return nil, err
	}
	if r.notFound {
		return []*MessageExt{}, nil
	}
	sub, err := newSubscription(topic, "*", nil)
	if err != nil {
		return nil, err
	}
	var out []*MessageExt
	var errs []error
	for _, rb := range r.readBrokers() {
		for q := 0; q < rb.queues && len(out) < max; q++ {
			mq := MessageQueue{Topic: topic, BrokerName: rb.broker.name, QueueID: q}
			offset, err := a.c.queueOffset(ctx, protocol.GetMinOffset, rb.broker.master(), mq)
			if err != nil {
				errs = append(errs, fmt.Errorf("broker %s: %w", rb.broker.name, err))
				continue
			}
			for len(out) < max {
				res, err := a.c.pull(ctx, rb.broker, pullRequest{group: group, mq: mq, offset: offset,
					maxNums: min(32, max-len(out)), commitOffset: -1, sub: sub}, a.c.cfg.RequestTimeout)
				if err != nil {
					errs = append(errs, fmt.Errorf("broker %s: %w", rb.broker.name, err))
					break
				}
				if res.Status != PullFound || res.NextBeginOffset <= offset {
					break
				}
				out = append(out, res.Messages...)
				offset = res.NextBeginOffset
			}
		}
	}
	if len(out) == 0 && len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].StoreTimestamp.Before(out[j].StoreTimestamp) })
	if len(out) > max {
		out = out[:max]
	}
	return out, nil
}

// ResendFromDLQ sends a dead-lettered message of group again through
// producer, to group's retry topic (%RETRY%group), so that group — and only
// group — consumes it once more, with its reconsume count reset. id is the
// message's broker (offset) id as BrowseDLQ shows it. It returns the send
// result. The dead-letter copy stays where it is (RocketMQ's DLQ is
// append-only too).
func (a *Admin) ResendFromDLQ(ctx context.Context, producer *Producer, group, id string) (*SendResult, error) {
	m, err := a.ViewMessage(ctx, "", id)
	if err != nil {
		return nil, err
	}
	if m.Topic != protocol.DLQTopic(group) {
		return nil, fmt.Errorf("zonemq client: message %s is in topic %s, not %s", id, m.Topic, protocol.DLQTopic(group))
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
			ProducerGroup:         producer.s.group,
			Topic:                 topic,
			DefaultTopic:          protocol.AutoCreateTopicKey,
			DefaultTopicQueueNums: 4,
			Flag:                  m.Flag,
			Properties:            protocol.EncodeProperties(props),
			MaxReconsumeTimes:     int32(DefaultMaxReconsumeTimes),
		},
	}
	return producer.s.send(ctx, out, producer.s.pickRoundRobin)
}
