package broker

import (
	"context"
	"errors"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/store"
)

// maxQueryMessages caps one QUERY_MESSAGE answer (RocketMQ's
// maxMsgsNumBatch default).
const maxQueryMessages = 64

// handleQueryMessage serves QUERY_MESSAGE: messages of a topic carrying a key
// (KEYS or UNIQ_KEY) stored within a time range, as stored records.
func (s *Server) handleQueryMessage(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.QueryMessageRequestHeader
	if err := h.SetExt(req.ExtFields); err != nil {
		return badHeader(req, err)
	}
	if err := protocol.ValidateTopic(h.Topic); err != nil {
		return errorf(req, protocol.InvalidParameter, "QUERY_MESSAGE: %v", err)
	}
	n := int(h.MaxNum)
	if n <= 0 || n > maxQueryMessages {
		n = maxQueryMessages
	}
	ms, err := s.store.QueryByKey(h.Topic, h.Key, n, h.BeginTimestamp, h.EndTimestamp)
	if errors.Is(err, store.ErrCorruptRecord) {
		return errorf(req, protocol.SystemError, "the message of topic %s with key %s is stored on broker %s but its bytes on disk are damaged "+
			"(its checksum does not match its bytes); it is not served", h.Topic, h.Key, s.opts.BrokerName)
	}
	if err != nil {
		s.logger.Warn("querying messages by key", "topic", h.Topic, "key", h.Key, "err", err)
		return errorf(req, protocol.SystemError, "querying topic %s by key failed", h.Topic)
	}
	if len(ms) == 0 {
		return errorf(req, protocol.QueryNotFound, "no message of topic %s has key %s", h.Topic, h.Key)
	}
	var body []byte
	for _, m := range ms {
		// The ACL checked SUB on h.Topic: never hand out a record of
		// another topic, whatever the key index says.
		if m.Topic == h.Topic {
			body = protocol.AppendStoredMessage(body, m)
		}
	}
	if len(body) == 0 {
		return errorf(req, protocol.QueryNotFound, "no message of topic %s has key %s", h.Topic, h.Key)
	}
	rh := protocol.QueryMessageResponseHeader{IndexLastUpdatePhyoffset: s.store.CommitLogMaxOffset()}
	return success(req, rh.Ext(), body)
}

// handleViewMessageByID serves VIEW_MESSAGE_BY_ID: the record at a commit-log
// offset (decoded by the client from an offset message id).
func (s *Server) handleViewMessageByID(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.ViewMessageRequestHeader
	if err := h.SetExt(req.ExtFields); err != nil {
		return badHeader(req, err)
	}
	if h.Offset < 0 {
		return errorf(req, protocol.InvalidParameter, "VIEW_MESSAGE_BY_ID: offset %d is negative", h.Offset)
	}
	m, err := s.store.MessageAt(h.Offset)
	if errors.Is(err, store.ErrCorruptRecord) {
		return errorf(req, protocol.SystemError, "the message at commit-log offset %d on broker %s is damaged on disk "+
			"(its checksum does not match its bytes); it is not served", h.Offset, s.opts.BrokerName)
	}
	if err != nil {
		return errorf(req, protocol.SystemError, "no message at commit-log offset %d on broker %s", h.Offset, s.opts.BrokerName)
	}
	if resp := s.checkRecordSub(c, req, m); resp != nil {
		return resp
	}
	return success(req, nil, protocol.AppendStoredMessage(nil, m))
}
