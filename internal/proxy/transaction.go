package proxy

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/internal/acl"
	"github.com/zonemq/zonemq/internal/rmqpb"
)

// Transactions through the access point: a 5.x client's transactional send
// is a half message sent by the access point's SDK producer, whose group
// (proxyGroup) every access point shares, so the brokers may ask any of
// them about a half message left pending. An access point forwards such a
// check to a 5.x producer of the topic on its Telemetry stream
// (RecoverOrphanedTransactionCommand); that client's EndTransaction comes
// back through an access point, which ends the transaction on the broker.

// proxyGroup is the producer group of every access point's sends.
const proxyGroup = "zonemq-proxy"

// txSep separates the parts of a transaction id the access point issues:
// broker name, commit-log offset, queue offset in the half queue, and the
// message's client id.
const txSep = "/"

func txID(h client.HalfMessage) string {
	return strings.Join([]string{h.BrokerName, strconv.FormatInt(h.CommitLogOffset, 10), strconv.FormatInt(h.QueueOffset, 10), h.MsgID}, txSep)
}

func parseTxID(topic, id string) (client.HalfMessage, bool) {
	parts := strings.Split(id, txSep)
	if len(parts) != 4 || parts[0] == "" {
		return client.HalfMessage{}, false
	}
	cl, err1 := strconv.ParseInt(parts[1], 10, 64)
	q, err2 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil || cl < 0 || q < 0 {
		return client.HalfMessage{}, false
	}
	return client.HalfMessage{Topic: topic, BrokerName: parts[0], CommitLogOffset: cl, QueueOffset: q, MsgID: parts[3]}, true
}

// session is one client's Telemetry stream.
type session struct {
	clientID string
	mu       sync.Mutex // serializes sends on stream
	stream   rmqpb.MessagingService_TelemetryServer

	topicsMu sync.Mutex
	topics   []string // a producer's topics, from its settings
}

func (ss *session) send(cmd *rmqpb.TelemetryCommand) error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.stream.Send(cmd)
}

// sessions are the Telemetry streams open on this access point.
type sessions struct {
	mu   sync.Mutex
	open map[*session]bool
}

func (t *sessions) add(ss *session) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.open == nil {
		t.open = map[*session]bool{}
	}
	t.open[ss] = true
}

func (t *sessions) remove(ss *session) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.open, ss)
}

// connected reports whether clientID has a Telemetry stream open here.
func (t *sessions) connected(clientID string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for ss := range t.open {
		if ss.clientID == clientID {
			return true
		}
	}
	return false
}

// producerOf picks a session of a producer publishing topic at random.
func (t *sessions) producerOf(topic string) *session {
	t.mu.Lock()
	defer t.mu.Unlock()
	var found []*session
	for ss := range t.open {
		ss.topicsMu.Lock()
		if slices.Contains(ss.topics, topic) {
			found = append(found, ss)
		}
		ss.topicsMu.Unlock()
	}
	if len(found) == 0 {
		return nil
	}
	return found[rand.IntN(len(found))]
}

// checkTransaction is the SDK producer's TransactionChecker: it forwards a
// broker's check to a 5.x producer of the topic and answers "unknown"; the
// client's EndTransaction resolves the message. With no such producer
// here, the broker asks again later (maybe another access point).
func (s *Server) checkTransaction(_ context.Context, half client.HalfMessage, m *client.MessageExt) client.TransactionState {
	ss := s.sessions.producerOf(m.Topic)
	if ss == nil {
		s.logger.Debug("no 5.x producer of the topic to check a transaction", "topic", m.Topic, "msgId", half.MsgID)
		return client.TransactionUnknown
	}
	cmd := &rmqpb.TelemetryCommand{Command: &rmqpb.TelemetryCommand_RecoverOrphanedTransactionCommand{
		RecoverOrphanedTransactionCommand: &rmqpb.RecoverOrphanedTransactionCommand{
			Message: toV5(m, "", 1), TransactionId: txID(half)}}}
	cmd.GetRecoverOrphanedTransactionCommand().Message.SystemProperties.MessageType = rmqpb.MessageType_TRANSACTION
	if err := ss.send(cmd); err != nil {
		s.logger.Debug("forwarding a transaction check failed", "client", ss.clientID, "err", err)
	}
	return client.TransactionUnknown
}

// EndTransaction commits or rolls back a transactional message on its
// broker group's master.
func (s *Server) EndTransaction(ctx context.Context, req *rmqpb.EndTransactionRequest) (*rmqpb.EndTransactionResponse, error) {
	topic := req.GetTopic().GetName()
	if st := s.authorize(ctx, "EndTransaction", topicRes(topic, acl.Pub)); st != nil {
		return &rmqpb.EndTransactionResponse{Status: st}, nil
	}
	half, ok := parseTxID(topic, req.GetTransactionId())
	if !ok {
		return &rmqpb.EndTransactionResponse{Status: status(rmqpb.Code_INVALID_TRANSACTION_ID,
			"transaction id %q was not issued by zonemq", req.GetTransactionId())}, nil
	}
	state := client.TransactionUnknown
	switch req.GetResolution() {
	case rmqpb.TransactionResolution_COMMIT:
		state = client.TransactionCommit
	case rmqpb.TransactionResolution_ROLLBACK:
		state = client.TransactionRollback
	default:
		return &rmqpb.EndTransactionResponse{Status: status(rmqpb.Code_BAD_REQUEST, "resolution %v is neither COMMIT nor ROLLBACK",
			req.GetResolution())}, nil
	}
	fromCheck := req.GetSource() == rmqpb.TransactionSource_SOURCE_SERVER_CHECK
	if err := s.producer.EndTransaction(ctx, half, state, fromCheck); err != nil {
		return &rmqpb.EndTransactionResponse{Status: status(rmqpb.Code_INTERNAL_SERVER_ERROR, "%v", err)}, nil
	}
	return &rmqpb.EndTransactionResponse{Status: statusOK}, nil
}

// sendHalf sends a 5.x transactional message as a half message.
func (s *Server) sendHalf(ctx context.Context, m *client.Message) *rmqpb.SendResultEntry {
	res, half, err := s.producer.SendHalf(ctx, m)
	if err != nil {
		return &rmqpb.SendResultEntry{Status: sendStatus(err)}
	}
	return &rmqpb.SendResultEntry{Status: statusOK, MessageId: m.ID, TransactionId: txID(half), Offset: res.QueueOffset}
}
