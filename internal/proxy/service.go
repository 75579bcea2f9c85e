package proxy

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strconv"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/internal/acl"
	"github.com/zonemq/zonemq/internal/idc"
	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/rmqpb"
)

// Message properties the RocketMQ 5 fields map to, as Apache RocketMQ's
// proxy stores them, so remoting consumers read them too.
const (
	propShardingKey  = "__SHARDINGKEY" // message group
	propTraceContext = "TRACE_CONTEXT"
)

// sendAttempts is the producers' retry budget the access point hands out
// in Settings: each attempt goes to another queue of the route.
const sendAttempts = 3

// acceptAll is every message type a zonemq topic takes (topics are not
// typed: RocketMQ 5's MIXED).
var acceptAll = []rmqpb.MessageType{rmqpb.MessageType_NORMAL, rmqpb.MessageType_FIFO, rmqpb.MessageType_DELAY,
	rmqpb.MessageType_TRANSACTION}

func status(code rmqpb.Code, format string, args ...any) *rmqpb.Status {
	return &rmqpb.Status{Code: code, Message: fmt.Sprintf(format, args...)}
}

var statusOK = &rmqpb.Status{Code: rmqpb.Code_OK, Message: "OK"}

// clientID is the caller's x-mq-client-id ("" if it sent none).
func clientID(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get("x-mq-client-id"); len(v) > 0 {
		return v[0]
	}
	return ""
}

// QueryRoute answers a topic's queues, each naming the endpoints the
// client asked through (so it keeps using the access points it was
// configured with), or this access point.
func (s *Server) QueryRoute(ctx context.Context, req *rmqpb.QueryRouteRequest) (*rmqpb.QueryRouteResponse, error) {
	topic := req.GetTopic().GetName()
	if err := protocol.ValidateTopic(topic); err != nil {
		return &rmqpb.QueryRouteResponse{Status: status(rmqpb.Code_ILLEGAL_TOPIC, "%v", err)}, nil
	}
	if st := s.authorize(ctx, "QueryRoute", topicRes(topic, acl.Any)); st != nil {
		return &rmqpb.QueryRouteResponse{Status: st}, nil
	}
	r, err := s.conn.Route(ctx, topic)
	if errors.Is(err, &client.ResponseError{Code: client.CodeTopicNotExist}) {
		return &rmqpb.QueryRouteResponse{Status: status(rmqpb.Code_TOPIC_NOT_FOUND, "topic %s does not exist", topic)}, nil
	}
	if err != nil {
		return &rmqpb.QueryRouteResponse{Status: status(rmqpb.Code_INTERNAL_SERVER_ERROR, "route of %s: %v", topic, err)}, nil
	}
	endpoints := req.GetEndpoints()
	if len(endpoints.GetAddresses()) == 0 {
		endpoints = s.endpoints()
	}
	brokers := append([]client.BrokerRoute(nil), r.Brokers...)
	sort.SliceStable(brokers, func(i, j int) bool {
		return idc.Same(brokers[i].IDC, s.cfg.IDC) && !idc.Same(brokers[j].IDC, s.cfg.IDC)
	})
	resp := &rmqpb.QueryRouteResponse{Status: statusOK}
	for _, b := range brokers {
		if b.Master() == "" && !b.Readable() {
			continue
		}
		n := max(b.ReadQueues, b.WriteQueues)
		for q := 0; q < n; q++ {
			resp.MessageQueues = append(resp.MessageQueues, &rmqpb.MessageQueue{
				Topic:              &rmqpb.Resource{Name: topic, ResourceNamespace: req.GetTopic().GetResourceNamespace()},
				Id:                 int32(q),
				Permission:         permission(b, q),
				Broker:             &rmqpb.Broker{Name: b.Name, Id: 0, Endpoints: endpoints},
				AcceptMessageTypes: acceptAll,
			})
		}
	}
	if len(resp.MessageQueues) == 0 {
		return &rmqpb.QueryRouteResponse{Status: status(rmqpb.Code_TOPIC_NOT_FOUND, "topic %s has no live broker", topic)}, nil
	}
	return resp, nil
}

// permission is queue q's permission on broker b: its group's permission
// within the read and write queue counts, and no writes while the group
// has no master.
func permission(b client.BrokerRoute, q int) rmqpb.Permission {
	read := protocol.Readable(b.Perm) && q < b.ReadQueues && b.Readable()
	write := protocol.Writeable(b.Perm) && q < b.WriteQueues && b.Master() != ""
	switch {
	case read && write:
		return rmqpb.Permission_READ_WRITE
	case read:
		return rmqpb.Permission_READ
	case write:
		return rmqpb.Permission_WRITE
	}
	return rmqpb.Permission_NONE
}

// endpoints names this access point.
func (s *Server) endpoints() *rmqpb.Endpoints {
	host, port, _ := net.SplitHostPort(s.cfg.Advertise)
	p, _ := strconv.Atoi(port)
	scheme := rmqpb.AddressScheme_DOMAIN_NAME
	if ip := net.ParseIP(host); ip != nil {
		scheme = rmqpb.AddressScheme_IPv4
		if ip.To4() == nil {
			scheme = rmqpb.AddressScheme_IPv6
		}
	}
	return &rmqpb.Endpoints{Scheme: scheme, Addresses: []*rmqpb.Address{{Host: host, Port: int32(p)}}}
}

// Heartbeat keeps a client known. Producers need nothing more.
func (s *Server) Heartbeat(ctx context.Context, req *rmqpb.HeartbeatRequest) (*rmqpb.HeartbeatResponse, error) {
	if clientID(ctx) == "" {
		return &rmqpb.HeartbeatResponse{Status: status(rmqpb.Code_CLIENT_ID_REQUIRED, "x-mq-client-id is missing")}, nil
	}
	if st := s.authorize(ctx, "Heartbeat"); st != nil {
		return &rmqpb.HeartbeatResponse{Status: st}, nil
	}
	return &rmqpb.HeartbeatResponse{Status: statusOK}, nil
}

// NotifyClientTermination acknowledges a client's goodbye and stops
// renewing what it received.
func (s *Server) NotifyClientTermination(ctx context.Context, req *rmqpb.NotifyClientTerminationRequest) (*rmqpb.NotifyClientTerminationResponse, error) {
	if id := clientID(ctx); id != "" {
		s.renewals.dropClient(id)
	}
	return &rmqpb.NotifyClientTerminationResponse{Status: statusOK}, nil
}

// SendMessage stores the request's messages (one topic; several make a
// batch) through the SDK producer: own IDC's brokers first, another IDC's
// at once when they fail. A message group sends to the group's queue,
// hashed over the route, as an ordered send.
func (s *Server) SendMessage(ctx context.Context, req *rmqpb.SendMessageRequest) (*rmqpb.SendMessageResponse, error) {
	pbs := req.GetMessages()
	if len(pbs) == 0 {
		return &rmqpb.SendMessageResponse{Status: status(rmqpb.Code_BAD_REQUEST, "no message")}, nil
	}
	msgs := make([]*client.Message, len(pbs))
	group := ""
	for i, pb := range pbs {
		m, st := convertMessage(pb)
		if st != nil {
			return &rmqpb.SendMessageResponse{Status: st}, nil
		}
		if i > 0 && m.Topic != msgs[0].Topic {
			return &rmqpb.SendMessageResponse{Status: status(rmqpb.Code_BAD_REQUEST, "a batch must have one topic")}, nil
		}
		msgs[i] = m
		group = pb.GetSystemProperties().GetMessageGroup()
	}
	if len(msgs) == 1 {
		msgs[0].Resent = s.sent.note(msgs[0].ID)
	}
	if st := s.authorize(ctx, "SendMessage", topicRes(msgs[0].Topic, acl.Pub)); st != nil {
		return &rmqpb.SendMessageResponse{Status: st}, nil
	}
	if pbs[0].GetSystemProperties().GetMessageType() == rmqpb.MessageType_TRANSACTION {
		if len(msgs) != 1 {
			return &rmqpb.SendMessageResponse{Status: status(rmqpb.Code_BAD_REQUEST, "a transactional message is sent alone")}, nil
		}
		e := s.sendHalf(ctx, msgs[0])
		return &rmqpb.SendMessageResponse{Status: e.Status, Entries: []*rmqpb.SendResultEntry{e}}, nil
	}
	entries := make([]*rmqpb.SendResultEntry, len(pbs))
	fail := func(i int, err error) *rmqpb.SendMessageResponse {
		st := sendStatus(err)
		for ; i < len(entries); i++ {
			entries[i] = &rmqpb.SendResultEntry{Status: st}
		}
		return &rmqpb.SendMessageResponse{Status: st, Entries: entries}
	}
	if group != "" {
		// One message group: each in turn to the group's queue.
		for i, m := range msgs {
			res, err := s.producer.SendOrderly(ctx, m, client.HashSelector{}, group)
			if err != nil {
				return fail(i, err), nil
			}
			entries[i] = &rmqpb.SendResultEntry{Status: statusOK, MessageId: m.ID, Offset: res.QueueOffset}
		}
		return &rmqpb.SendMessageResponse{Status: statusOK, Entries: entries}, nil
	}
	res, err := s.producer.SendSync(ctx, msgs...)
	if err != nil {
		return fail(0, err), nil
	}
	for i, m := range msgs {
		entries[i] = &rmqpb.SendResultEntry{Status: statusOK, MessageId: m.ID, Offset: res.QueueOffset + int64(i)}
		if !m.DeliverAt.IsZero() && len(msgs) == 1 {
			// A timer message: its offset is in the broker's timer queue.
			entries[i].RecallHandle = recallHandle(res.BrokerName, res.QueueOffset, m.ID)
		}
	}
	return &rmqpb.SendMessageResponse{Status: statusOK, Entries: entries}, nil
}

// convertMessage maps a RocketMQ 5 message to the SDK's, or says why not.
func convertMessage(pb *rmqpb.Message) (*client.Message, *rmqpb.Status) {
	sp := pb.GetSystemProperties()
	topic := pb.GetTopic().GetName()
	if err := protocol.ValidateTopic(topic); err != nil {
		return nil, status(rmqpb.Code_ILLEGAL_TOPIC, "%v", err)
	}
	if sp.GetMessageId() == "" {
		return nil, status(rmqpb.Code_ILLEGAL_MESSAGE_ID, "message id is missing")
	}
	body := pb.GetBody()
	if sp.GetBodyEncoding() == rmqpb.Encoding_GZIP {
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return nil, status(rmqpb.Code_MESSAGE_CORRUPTED, "gzip body: %v", err)
		}
		if body, err = io.ReadAll(io.LimitReader(zr, MaxBodySize+1)); err != nil {
			return nil, status(rmqpb.Code_MESSAGE_CORRUPTED, "gzip body: %v", err)
		}
	}
	switch {
	case len(body) == 0:
		return nil, status(rmqpb.Code_MESSAGE_BODY_EMPTY, "empty body")
	case len(body) > MaxBodySize:
		return nil, status(rmqpb.Code_MESSAGE_BODY_TOO_LARGE, "body of %d bytes is over the limit of %d", len(body), MaxBodySize)
	}
	m := &client.Message{Topic: topic, Body: body, Keys: sp.GetKeys(), Tags: sp.GetTag(), ID: sp.GetMessageId()}
	if len(pb.GetUserProperties()) > 0 {
		m.Properties = make(map[string]string, len(pb.GetUserProperties())+2)
		for k, v := range pb.GetUserProperties() {
			m.Properties[k] = v
		}
	}
	setProp := func(k, v string) {
		if m.Properties == nil {
			m.Properties = map[string]string{}
		}
		m.Properties[k] = v
	}
	if g := sp.GetMessageGroup(); g != "" {
		setProp(propShardingKey, g)
	}
	if tc := sp.GetTraceContext(); tc != "" {
		setProp(propTraceContext, tc)
	}
	if ts := sp.GetDeliveryTimestamp(); ts != nil {
		m.DeliverAt = ts.AsTime()
		if time.Until(m.DeliverAt) <= 0 {
			m.DeliverAt = time.Time{}
		}
	}
	return m, nil
}

// sendStatus maps a failed send to the protocol's code: bad messages are
// the client's to fix, anything else may succeed on a retry.
func sendStatus(err error) *rmqpb.Status {
	var re *client.ResponseError
	switch {
	case errors.Is(err, client.ErrInvalidMessage):
		return status(rmqpb.Code_BAD_REQUEST, "%v", err)
	case errors.Is(err, client.ErrNoRoute):
		return status(rmqpb.Code_TOPIC_NOT_FOUND, "%v", err)
	case errors.As(err, &re) && re.Code == client.CodeNoPermission:
		return status(rmqpb.Code_FORBIDDEN, "%v", err)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, client.ErrTimeout):
		return status(rmqpb.Code_PROXY_TIMEOUT, "%v", err)
	}
	return status(rmqpb.Code_INTERNAL_SERVER_ERROR, "%v", err)
}

// Telemetry is the client's settings stream: each Settings the client
// sends is answered with the effective settings (the clients wait for that
// answer at start-up); the stream also carries the brokers' transaction
// checks to producers (transaction.go). Other commands are read and
// ignored.
func (s *Server) Telemetry(stream rmqpb.MessagingService_TelemetryServer) error {
	if clientID(stream.Context()) == "" {
		return stream.Send(&rmqpb.TelemetryCommand{Status: status(rmqpb.Code_CLIENT_ID_REQUIRED, "x-mq-client-id is missing")})
	}
	if st := s.authorize(stream.Context(), "Telemetry"); st != nil {
		return stream.Send(&rmqpb.TelemetryCommand{Status: st})
	}
	ss := &session{clientID: clientID(stream.Context()), stream: stream}
	s.sessions.add(ss)
	defer s.sessions.remove(ss)
	for {
		cmd, err := stream.Recv()
		if err != nil {
			return nil // the client closed or went away
		}
		settings := cmd.GetSettings()
		if settings == nil {
			continue
		}
		if settings.GetClientType() == rmqpb.ClientType_PRODUCER {
			var topics []string
			for _, r := range settings.GetPublishing().GetTopics() {
				topics = append(topics, r.GetName())
			}
			ss.topicsMu.Lock()
			ss.topics = topics
			ss.topicsMu.Unlock()
		}
		reply, st := s.effectiveSettings(stream.Context(), settings)
		if err := ss.send(&rmqpb.TelemetryCommand{Status: st, Command: &rmqpb.TelemetryCommand_Settings{Settings: reply}}); err != nil {
			return nil
		}
	}
}

// effectiveSettings answers a client's settings: the access point's
// publishing limits and retry policy for a producer.
func (s *Server) effectiveSettings(ctx context.Context, in *rmqpb.Settings) (*rmqpb.Settings, *rmqpb.Status) {
	out := &rmqpb.Settings{
		ClientType:     in.ClientType,
		AccessPoint:    in.AccessPoint,
		RequestTimeout: durationpb.New(3 * time.Second),
		UserAgent:      in.UserAgent,
		Metric:         &rmqpb.Metric{On: false},
	}
	switch in.GetClientType() {
	case rmqpb.ClientType_PRODUCER, rmqpb.ClientType_CLIENT_TYPE_UNSPECIFIED:
		out.BackoffPolicy = &rmqpb.RetryPolicy{
			MaxAttempts: sendAttempts,
			Strategy: &rmqpb.RetryPolicy_ExponentialBackoff{ExponentialBackoff: &rmqpb.ExponentialBackoff{
				Initial: durationpb.New(10 * time.Millisecond), Max: durationpb.New(time.Second), Multiplier: 2,
			}},
		}
		out.PubSub = &rmqpb.Settings_Publishing{Publishing: &rmqpb.Publishing{
			Topics: in.GetPublishing().GetTopics(), MaxBodySize: MaxBodySize, ValidateMessageType: true,
		}}
		return out, statusOK
	}
	s.consumerSettings(ctx, in, out)
	return out, statusOK
}
