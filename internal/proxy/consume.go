package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/internal/acl"
	"github.com/zonemq/zonemq/internal/idc"
	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/rmqpb"
)

// Consumption through the access point: the brokers keep each group's POP
// state (which messages are handed out, invisible until when, acked), so
// the access points of every IDC can serve one group together.
const (
	// maxBatch bounds the messages of one ReceiveMessage.
	maxBatch = 32
	// defaultInvisible is the invisible time of a receive that names none
	// and asks for no renewal, as Apache RocketMQ's proxy.
	defaultInvisible = 60 * time.Second
	// maxPoll bounds how long a receive waits for a message.
	maxPoll = 20 * time.Second
	// pollInterval is how often a waiting receive asks the brokers again.
	pollInterval = 200 * time.Millisecond
	// consumerAttempts is the deliveries a message gets before the
	// dead-letter queue when its group's config says nothing
	// (RocketMQ's default retryMaxTimes 16, + 1); the brokers apply the
	// group's own.
	consumerAttempts = 17
	// handleSep separates the broker's name from its own handle in a
	// receipt handle the clients see.
	handleSep = "/"
)

// consumerSettings answers a consumer's settings: its subscriptions as it
// sent them, a batch of up to 32, long polling up to 20 s, FIFO when the
// group is orderly, and the retry policy: the group's retryMaxTimes + 1
// deliveries (17 by default), then the dead-letter queue, back-off 1 s
// doubling to 60 s between them.
func (s *Server) consumerSettings(ctx context.Context, in *rmqpb.Settings, out *rmqpb.Settings) {
	sub := in.GetSubscription()
	lpt := sub.GetLongPollingTimeout()
	if lpt == nil || lpt.AsDuration() <= 0 || lpt.AsDuration() > maxPoll {
		lpt = durationpb.New(maxPoll)
	}
	orderly, attempts := s.groupConfig(ctx, sub)
	out.BackoffPolicy = &rmqpb.RetryPolicy{
		MaxAttempts: int32(attempts),
		Strategy: &rmqpb.RetryPolicy_ExponentialBackoff{ExponentialBackoff: &rmqpb.ExponentialBackoff{
			Initial: durationpb.New(time.Second), Max: durationpb.New(time.Minute), Multiplier: 2,
		}},
	}
	batch := int32(maxBatch)
	out.PubSub = &rmqpb.Settings_Subscription{Subscription: &rmqpb.Subscription{
		Group: sub.GetGroup(), Subscriptions: sub.GetSubscriptions(), Fifo: &orderly, ReceiveBatchSize: &batch,
		LongPollingTimeout: lpt,
	}}
}

// groupConfig reads the consumer group's config from a master of its
// first topic: whether it is orderly and how many deliveries it allows.
// Unknown (a new group, no broker) is RocketMQ's default: not orderly, 17.
func (s *Server) groupConfig(ctx context.Context, sub *rmqpb.Subscription) (orderly bool, attempts int) {
	attempts = consumerAttempts
	if len(sub.GetSubscriptions()) == 0 {
		return false, attempts
	}
	r, err := s.conn.CachedRoute(ctx, sub.GetSubscriptions()[0].GetTopic().GetName())
	if err != nil {
		return false, attempts
	}
	for _, b := range r.Brokers {
		if b.Master() == "" {
			continue
		}
		resp, err := s.conn.Call(ctx, b.Master(), client.Request{Code: int32(protocol.GetAllSubscriptionGroupConfig)})
		if err != nil {
			continue
		}
		var w protocol.SubscriptionGroupWrapper
		if json.Unmarshal(resp.Body, &w) != nil {
			continue
		}
		if g, ok := w.SubscriptionGroupTable[sub.GetGroup().GetName()]; ok {
			return g.ConsumeMessageOrderly, g.RetryMaxTimes + 1
		}
		return false, attempts
	}
	return false, attempts
}

// QueryAssignment gives a push consumer one queue to receive from: the
// access point itself, which picks the brokers (own IDC's first).
func (s *Server) QueryAssignment(ctx context.Context, req *rmqpb.QueryAssignmentRequest) (*rmqpb.QueryAssignmentResponse, error) {
	topic := req.GetTopic().GetName()
	if err := protocol.ValidateTopic(topic); err != nil {
		return &rmqpb.QueryAssignmentResponse{Status: status(rmqpb.Code_ILLEGAL_TOPIC, "%v", err)}, nil
	}
	if err := protocol.ValidateGroup(req.GetGroup().GetName()); err != nil {
		return &rmqpb.QueryAssignmentResponse{Status: status(rmqpb.Code_ILLEGAL_CONSUMER_GROUP, "%v", err)}, nil
	}
	if st := s.authorize(ctx, "QueryAssignment", topicRes(topic, acl.Sub), groupRes(req.GetGroup().GetName())); st != nil {
		return &rmqpb.QueryAssignmentResponse{Status: st}, nil
	}
	if _, err := s.conn.CachedRoute(ctx, topic); err != nil {
		if errors.Is(err, &client.ResponseError{Code: client.CodeTopicNotExist}) {
			return &rmqpb.QueryAssignmentResponse{Status: status(rmqpb.Code_TOPIC_NOT_FOUND, "topic %s does not exist", topic)}, nil
		}
		return &rmqpb.QueryAssignmentResponse{Status: status(rmqpb.Code_INTERNAL_SERVER_ERROR, "route of %s: %v", topic, err)}, nil
	}
	endpoints := req.GetEndpoints()
	if len(endpoints.GetAddresses()) == 0 {
		endpoints = s.endpoints()
	}
	return &rmqpb.QueryAssignmentResponse{Status: statusOK, Assignments: []*rmqpb.Assignment{{MessageQueue: &rmqpb.MessageQueue{
		Topic: req.GetTopic(), Id: -1, Permission: rmqpb.Permission_READ_WRITE,
		Broker:             &rmqpb.Broker{Name: "zonemq-" + s.cfg.IDC, Id: 0, Endpoints: endpoints},
		AcceptMessageTypes: acceptAll,
	}}}}, nil
}

// ReceiveMessage hands out messages of the request's topic to its group,
// from this IDC's brokers first and from another IDC's when this one's have
// none (or are down), waiting up to the poll time for one to arrive. The
// stream is the status, the messages, then the delivery time.
func (s *Server) ReceiveMessage(req *rmqpb.ReceiveMessageRequest, stream rmqpb.MessagingService_ReceiveMessageServer) error {
	ctx := stream.Context()
	reply := func(st *rmqpb.Status) error {
		return stream.Send(&rmqpb.ReceiveMessageResponse{Content: &rmqpb.ReceiveMessageResponse_Status{Status: st}})
	}
	group, topic := req.GetGroup().GetName(), req.GetMessageQueue().GetTopic().GetName()
	if clientID(ctx) == "" {
		return reply(status(rmqpb.Code_CLIENT_ID_REQUIRED, "x-mq-client-id is missing"))
	}
	if err := protocol.ValidateGroup(group); err != nil {
		return reply(status(rmqpb.Code_ILLEGAL_CONSUMER_GROUP, "%v", err))
	}
	if err := protocol.ValidateTopic(topic); err != nil {
		return reply(status(rmqpb.Code_ILLEGAL_TOPIC, "%v", err))
	}
	if st := s.authorize(ctx, "ReceiveMessage", topicRes(topic, acl.Sub), groupRes(group)); st != nil {
		return reply(st)
	}
	invisible := defaultInvisible
	renew := req.GetAutoRenew() && req.GetInvisibleDuration() == nil
	if renew {
		invisible = renewInvisible
	}
	if d := req.GetInvisibleDuration(); d != nil {
		invisible = d.AsDuration()
		if invisible < time.Second || invisible > 12*time.Hour {
			return reply(status(rmqpb.Code_ILLEGAL_INVISIBLE_TIME, "invisible duration %v is outside 1s..12h", invisible))
		}
	}
	expr := req.GetFilterExpression()
	exprType := "TAG"
	if expr.GetType() == rmqpb.FilterType_SQL {
		exprType = "SQL92"
	}
	batch := int(req.GetBatchSize())
	if batch <= 0 || batch > maxBatch {
		batch = maxBatch
	}
	poll := maxPoll
	if d := req.GetLongPollingTimeout(); d != nil && d.AsDuration() < poll {
		poll = d.AsDuration()
	}
	if dl, ok := ctx.Deadline(); ok {
		poll = min(poll, time.Until(dl)-time.Second)
	}
	p := popArgs{group: group, topic: topic, expr: expr.GetExpression(), exprType: exprType, max: batch, invisible: invisible}
	deadline := time.Now().Add(poll)
	for {
		msgs, err := s.pop(ctx, p)
		if err != nil {
			if errors.Is(err, &client.ResponseError{Code: client.CodeTopicNotExist}) {
				return reply(status(rmqpb.Code_TOPIC_NOT_FOUND, "topic %s does not exist", topic))
			}
			if errors.Is(err, &client.ResponseError{Code: client.ResponseCode(protocol.SubscriptionParseFailed)}) {
				return reply(status(rmqpb.Code_ILLEGAL_FILTER_EXPRESSION, "%v", err))
			}
			return reply(status(rmqpb.Code_INTERNAL_SERVER_ERROR, "%v", err))
		}
		if len(msgs) > 0 {
			if renew {
				id, now := clientID(ctx), time.Now()
				for _, m := range msgs {
					h := m.GetSystemProperties().GetReceiptHandle()
					if broker, bh, ok := splitHandle(h); ok {
						s.renewals.add(h, renewal{clientID: id, group: group, topic: topic, broker: broker, brokerHandle: bh, since: now})
					}
				}
			}
			if err := reply(statusOK); err != nil {
				return err
			}
			for _, m := range msgs {
				if err := stream.Send(&rmqpb.ReceiveMessageResponse{Content: &rmqpb.ReceiveMessageResponse_Message{Message: m}}); err != nil {
					return err
				}
			}
			return stream.Send(&rmqpb.ReceiveMessageResponse{Content: &rmqpb.ReceiveMessageResponse_DeliveryTimestamp{
				DeliveryTimestamp: timestamppb.Now()}})
		}
		wait := min(pollInterval, time.Until(deadline))
		if wait <= 0 {
			return reply(status(rmqpb.Code_MESSAGE_NOT_FOUND, "no new message"))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.closing:
			return reply(status(rmqpb.Code_MESSAGE_NOT_FOUND, "the access point is stopping"))
		case <-time.After(wait):
		}
	}
}

type popArgs struct {
	group, topic, expr, exprType string
	max                          int
	invisible                    time.Duration
}

// pop asks the topic's masters for messages, this IDC's first (in random
// order, so no broker starves), then the others'.
func (s *Server) pop(ctx context.Context, p popArgs) ([]*rmqpb.Message, error) {
	r, err := s.conn.CachedRoute(ctx, p.topic)
	if err != nil {
		return nil, err
	}
	brokers := make([]client.BrokerRoute, 0, len(r.Brokers))
	for _, b := range r.Brokers {
		if b.Master() != "" && b.Readable() {
			brokers = append(brokers, b)
		}
	}
	rand.Shuffle(len(brokers), func(i, j int) { brokers[i], brokers[j] = brokers[j], brokers[i] })
	own := 0
	for i, b := range brokers {
		if idc.Same(b.IDC, s.cfg.IDC) {
			brokers[own], brokers[i] = brokers[i], brokers[own]
			own++
		}
	}
	var out []*rmqpb.Message
	for _, b := range brokers {
		if len(out) >= p.max {
			break
		}
		ext := map[string]string{"consumerGroup": p.group, "topic": p.topic, "queueId": "-1",
			"maxMsgNums": strconv.Itoa(p.max - len(out)), "invisibleTime": strconv.FormatInt(p.invisible.Milliseconds(), 10),
			"expression": p.expr, "expressionType": p.exprType}
		resp, err := s.conn.Call(ctx, b.Master(), client.Request{Code: int32(protocol.PopMessages), Ext: ext})
		if errors.Is(err, &client.ResponseError{Code: client.ResponseCode(protocol.SubscriptionParseFailed)}) {
			return nil, err // the filter is wrong: no broker will take it
		}
		if err != nil {
			if !errors.Is(err, &client.ResponseError{Code: client.CodePullNotFound}) {
				s.logger.Debug("pop failed; trying the next broker", "broker", b.Name, "err", err)
			}
			continue
		}
		msgs, err := client.DecodeMessages(resp.Body, &b)
		if err != nil {
			s.logger.Warn("pop answer undecodable", "broker", b.Name, "err", err)
			continue
		}
		handles := strings.Split(resp.Ext[protocol.ExtPopHandles], ";")
		attempts := strings.Split(resp.Ext["zonemqPopAttempts"], ",")
		if len(handles) != len(msgs) || len(attempts) != len(msgs) {
			s.logger.Warn("pop answer with handles not matching its messages", "broker", b.Name)
			continue
		}
		for i, m := range msgs {
			attempt, _ := strconv.Atoi(attempts[i])
			out = append(out, toV5(m, b.Name+handleSep+handles[i], int32(max(attempt, 1))))
		}
	}
	return out, nil
}

// toV5 is a stored message as the RocketMQ 5 clients read it.
func toV5(m *client.MessageExt, handle string, attempt int32) *rmqpb.Message {
	digest := strings.ToUpper(strconv.FormatUint(uint64(crc32.ChecksumIEEE(m.Body)), 16))
	sp := &rmqpb.SystemProperties{
		MessageId:       m.MsgID,
		Keys:            m.Keys,
		BodyDigest:      &rmqpb.Digest{Type: rmqpb.DigestType_CRC32, Checksum: digest},
		BodyEncoding:    rmqpb.Encoding_IDENTITY,
		MessageType:     rmqpb.MessageType_NORMAL,
		BornTimestamp:   timestamppb.New(m.BornTimestamp),
		BornHost:        m.BornHost,
		StoreTimestamp:  timestamppb.New(m.StoreTimestamp),
		StoreHost:       m.StoreHost,
		ReceiptHandle:   &handle,
		QueueId:         int32(m.QueueID),
		QueueOffset:     &m.QueueOffset,
		DeliveryAttempt: &attempt,
	}
	if m.Tags != "" {
		sp.Tag = &m.Tags
	}
	user := map[string]string{}
	for k, v := range m.Properties {
		switch k {
		case propShardingKey:
			g := v
			sp.MessageGroup = &g
			sp.MessageType = rmqpb.MessageType_FIFO
		case propTraceContext:
			tc := v
			sp.TraceContext = &tc
		case protocol.PropertyTimerDeliverMS:
			if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
				sp.DeliveryTimestamp = timestamppb.New(time.UnixMilli(ms))
				sp.MessageType = rmqpb.MessageType_DELAY
			}
		default:
			if !protocol.IsSystemProperty(k) {
				user[k] = v
			}
		}
	}
	return &rmqpb.Message{Topic: &rmqpb.Resource{Name: m.Topic}, UserProperties: user, SystemProperties: sp, Body: m.Body}
}

// splitHandle parses a receipt handle the access point issued.
func splitHandle(h string) (broker, brokerHandle string, ok bool) {
	broker, brokerHandle, ok = strings.Cut(h, handleSep)
	return broker, brokerHandle, ok && broker != "" && brokerHandle != ""
}

// masterOf is the master address of broker name in topic's route.
func (s *Server) masterOf(ctx context.Context, topic, name string) (string, error) {
	r, err := s.conn.CachedRoute(ctx, topic)
	if err != nil {
		return "", err
	}
	for _, b := range r.Brokers {
		if b.Name == name && b.Master() != "" {
			return b.Master(), nil
		}
	}
	return "", errors.New("broker " + name + " has no master in the route of " + topic)
}

// AckMessage acks received messages on the brokers that handed them out.
// A handle that names no message in flight (acked already, or its
// invisible time ran out and it was handed out again) is
// INVALID_RECEIPT_HANDLE.
func (s *Server) AckMessage(ctx context.Context, req *rmqpb.AckMessageRequest) (*rmqpb.AckMessageResponse, error) {
	group, topic := req.GetGroup().GetName(), req.GetTopic().GetName()
	if st := s.authorize(ctx, "AckMessage", topicRes(topic, acl.Sub), groupRes(group)); st != nil {
		return &rmqpb.AckMessageResponse{Status: st}, nil
	}
	resp := &rmqpb.AckMessageResponse{Status: statusOK}
	for _, e := range req.GetEntries() {
		s.renewals.remove(e.GetReceiptHandle())
		st := s.ack(ctx, group, topic, e.GetReceiptHandle())
		resp.Entries = append(resp.Entries, &rmqpb.AckMessageResultEntry{MessageId: e.GetMessageId(), ReceiptHandle: e.GetReceiptHandle(), Status: st})
		if st.Code != rmqpb.Code_OK {
			resp.Status = st
		}
	}
	return resp, nil
}

func (s *Server) ack(ctx context.Context, group, topic, handle string) *rmqpb.Status {
	broker, bh, ok := splitHandle(handle)
	if !ok {
		return status(rmqpb.Code_INVALID_RECEIPT_HANDLE, "receipt handle %q was not issued by zonemq", handle)
	}
	addr, err := s.masterOf(ctx, topic, broker)
	if err != nil {
		return status(rmqpb.Code_INVALID_RECEIPT_HANDLE, "%v: its messages come again from the group's new master", err)
	}
	_, err = s.conn.Call(ctx, addr, client.Request{Code: int32(protocol.AckPopMessages),
		Ext: map[string]string{"consumerGroup": group, "topic": topic, "handles": bh}})
	return handleStatus(err)
}

// handleStatus maps a broker's answer about a handle.
func handleStatus(err error) *rmqpb.Status {
	switch {
	case err == nil:
		return statusOK
	case errors.Is(err, &client.ResponseError{Code: client.CodeQueryNotFound}):
		return status(rmqpb.Code_INVALID_RECEIPT_HANDLE, "%v", err)
	}
	return status(rmqpb.Code_INTERNAL_SERVER_ERROR, "%v", err)
}

// ChangeInvisibleDuration makes a received message invisible for longer
// (or visible again, with 0) and answers its new handle; on failure the old
// one, which the clients keep using.
func (s *Server) ChangeInvisibleDuration(ctx context.Context, req *rmqpb.ChangeInvisibleDurationRequest) (*rmqpb.ChangeInvisibleDurationResponse, error) {
	old := req.GetReceiptHandle()
	s.renewals.remove(old) // the client decides its invisible time from here on
	fail := func(st *rmqpb.Status) (*rmqpb.ChangeInvisibleDurationResponse, error) {
		return &rmqpb.ChangeInvisibleDurationResponse{Status: st, ReceiptHandle: old}, nil
	}
	d := req.GetInvisibleDuration().AsDuration()
	if d < 0 || d > 12*time.Hour {
		return fail(status(rmqpb.Code_ILLEGAL_INVISIBLE_TIME, "invisible duration %v is outside 0..12h", d))
	}
	broker, bh, ok := splitHandle(old)
	if !ok {
		return fail(status(rmqpb.Code_INVALID_RECEIPT_HANDLE, "receipt handle %q was not issued by zonemq", old))
	}
	topic := req.GetTopic().GetName()
	if st := s.authorize(ctx, "ChangeInvisibleDuration", topicRes(topic, acl.Sub), groupRes(req.GetGroup().GetName())); st != nil {
		return fail(st)
	}
	addr, err := s.masterOf(ctx, topic, broker)
	if err != nil {
		return fail(status(rmqpb.Code_INVALID_RECEIPT_HANDLE, "%v", err))
	}
	resp, err := s.conn.Call(ctx, addr, client.Request{Code: int32(protocol.ChangePopInvisibleTime), Ext: map[string]string{
		"consumerGroup": req.GetGroup().GetName(), "topic": topic, "handle": bh, "invisibleTime": strconv.FormatInt(d.Milliseconds(), 10)}})
	if err != nil {
		return fail(handleStatus(err))
	}
	return &rmqpb.ChangeInvisibleDurationResponse{Status: statusOK, ReceiptHandle: broker + handleSep + resp.Ext["handle"]}, nil
}

// ForwardMessageToDeadLetterQueue moves a received message to its group's
// dead-letter queue and acks it (a FIFO push consumer's last resort).
func (s *Server) ForwardMessageToDeadLetterQueue(ctx context.Context, req *rmqpb.ForwardMessageToDeadLetterQueueRequest) (*rmqpb.ForwardMessageToDeadLetterQueueResponse, error) {
	group, topic := req.GetGroup().GetName(), req.GetTopic().GetName()
	if st := s.authorize(ctx, "ForwardMessageToDeadLetterQueue", topicRes(topic, acl.Sub), groupRes(group)); st != nil {
		return &rmqpb.ForwardMessageToDeadLetterQueueResponse{Status: st}, nil
	}
	s.renewals.remove(req.GetReceiptHandle())
	broker, bh, ok := splitHandle(req.GetReceiptHandle())
	if !ok {
		return &rmqpb.ForwardMessageToDeadLetterQueueResponse{Status: status(rmqpb.Code_INVALID_RECEIPT_HANDLE,
			"receipt handle %q was not issued by zonemq", req.GetReceiptHandle())}, nil
	}
	addr, err := s.masterOf(ctx, topic, broker)
	if err != nil {
		return &rmqpb.ForwardMessageToDeadLetterQueueResponse{Status: status(rmqpb.Code_INVALID_RECEIPT_HANDLE, "%v", err)}, nil
	}
	_, err = s.conn.Call(ctx, addr, client.Request{Code: int32(protocol.AckPopMessages),
		Ext: map[string]string{"consumerGroup": group, "topic": topic, "handles": bh, "toDLQ": "true"}})
	return &rmqpb.ForwardMessageToDeadLetterQueueResponse{Status: handleStatus(err)}, nil
}
