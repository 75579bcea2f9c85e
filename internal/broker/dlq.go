package broker

import (
	"context"
	"fmt"
	"strings"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/store"
)

// A consumer group's dead-letter topic, %DLQ%<group>, has one queue
// (RocketMQ's DLQ_NUMS_PER_GROUP). RocketMQ 4.x creates it write-only, so
// reading it takes an admin's perm change; zonemq makes it readable and
// writable (perm 6) so the dead letters can be pulled at once.
const (
	dlqQueueNums = 1
	dlqTopicPerm = protocol.PermReadWrite
)

// putDLQ stores m in the group's dead-letter topic (created if missing).
// DELAY is dropped: a dead letter is never delayed.
func (s *Server) putDLQ(ctx context.Context, group string, m *protocol.MessageExt) (store.PutResult, error) {
	if err := s.toDLQ(group, m); err != nil {
		return store.PutResult{}, err
	}
	return s.putMessage(ctx, m)
}

// toDLQ rewrites m to go to the group's dead-letter topic and creates the
// topic if needed. DLQ_ORIGIN_TOPIC (the topic the message was first sent
// to) and DLQ_ORIGIN_MESSAGE_ID are set once, as RocketMQ 5 does.
func (s *Server) toDLQ(group string, m *protocol.MessageExt) error {
	cfg, err := s.ensureTopic(newTopicConfig(protocol.DLQTopic(group), dlqQueueNums, dlqTopicPerm))
	if err != nil {
		return err
	}
	origin, ok := protocol.Property(m.Properties, protocol.PropertyRetryTopic)
	if !ok {
		origin = m.Topic
	}
	originID, ok := protocol.Property(m.Properties, protocol.PropertyOriginMessageID)
	if !ok {
		originID, _ = protocol.Property(m.Properties, protocol.PropertyUniqClientMessageID)
	}
	props := removeProperties(m.Properties, protocol.PropertyDelayLevel)
	if origin != "" {
		props = setPropertyIfAbsent(props, protocol.PropertyDLQOriginTopic, origin)
	}
	if originID != "" {
		props = setPropertyIfAbsent(props, protocol.PropertyDLQOriginMessageID, originID)
	}
	m.Properties = props
	m.Topic = cfg.TopicName
	m.QueueID = 0
	return nil
}

// retryToDLQ is the s.beforeRetryStore hook. A client whose
// CONSUMER_SEND_MSG_BACK failed sends the message itself to
// %RETRY%<group> with reconsumeTimes already increased; once that passes
// the maximum the message goes to %DLQ%<group> instead, as RocketMQ's send
// path does.
//
// The maximum follows Java 5 (SendMessageProcessor.handleRetryAndDLQ): the
// header's maxReconsumeTimes when the request carries it — 0 included —
// else the group's retryMaxTimes. rocketmq-client-go carries the field on
// every send: its fallback sends the consumer's real maximum, its ordinary
// producer sends "0" with reconsumeTimes 0, which never passes any maximum,
// so an ordinary send to a retry topic is never made a dead letter. Java
// clients leave the field out unless the message has MAX_RECONSUME_TIMES.
func (s *Server) retryToDLQ(ctx context.Context, h *protocol.SendMessageRequestHeader, m *protocol.MessageExt) error {
	group, ok := strings.CutPrefix(h.Topic, protocol.RetryGroupPrefix)
	if !ok || protocol.ValidateGroup(group) != nil {
		return nil
	}
	maxTimes := int32(s.groups.getOrCreate(group).RetryMaxTimes)
	if h.HasMaxReconsumeTimes() {
		maxTimes = h.MaxReconsumeTimes
	}
	if h.ReconsumeTimes <= maxTimes {
		return nil
	}
	if err := s.toDLQ(group, m); err != nil {
		return fmt.Errorf("moving the message to %s: %w", protocol.DLQTopic(group), err)
	}
	s.logger.Debug("retry message past its maximum; stored as a dead letter", "group", group,
		"reconsumeTimes", h.ReconsumeTimes, "max", maxTimes)
	return nil
}
