package broker

import (
	"context"
	"fmt"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// checkQueue refuses a request about an unknown topic or a queue id outside
// the topic's queues.
func (s *Server) checkQueue(req *remoting.Command, topic string, queueID int32) *remoting.Command {
	cfg, ok := s.readableTopic(topic)
	if !ok {
		return errorf(req, protocol.TopicNotExist, "topic[%s] not exist on broker %s", topic, s.opts.BrokerName)
	}
	if queueID < 0 || int(queueID) >= max(cfg.ReadQueueNums, cfg.WriteQueueNums) {
		return errorf(req, protocol.InvalidParameter, "queueId[%d] is illegal: topic %s has %d queues on broker %s",
			queueID, topic, max(cfg.ReadQueueNums, cfg.WriteQueueNums), s.opts.BrokerName)
	}
	return nil
}

// offsetResponse answers with ext "offset".
func offsetResponse(req *remoting.Command, offset int64) *remoting.Command {
	return success(req, (&protocol.OffsetResponseHeader{Offset: offset}).Ext(), nil)
}

// handleQueryConsumerOffset serves QUERY_CONSUMER_OFFSET: the group's
// committed offset, or QUERY_NOT_FOUND so the client applies its
// consumeFromWhere. setZeroIfNotFound=true answers 0 instead when the queue
// still starts at 0.
func (s *Server) handleQueryConsumerOffset(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.QueryConsumerOffsetRequestHeader
	if err := h.SetExt(req.ExtFields); err != nil {
		return badHeader(req, err)
	}
	if resp := s.checkQueue(req, h.Topic, h.QueueID); resp != nil {
		return resp
	}
	if off, ok := s.store.QueryOffset(h.ConsumerGroup, h.Topic, h.QueueID); ok {
		return offsetResponse(req, off)
	}
	if h.SetZeroIfNotFound != nil && *h.SetZeroIfNotFound && s.store.MinOffset(h.Topic, h.QueueID) <= 0 {
		return offsetResponse(req, 0)
	}
	return errorf(req, protocol.QueryNotFound, "no offset committed by group %s for %s queue %d", h.ConsumerGroup, h.Topic, h.QueueID)
}

// handleUpdateConsumerOffset serves UPDATE_CONSUMER_OFFSET (the Go client
// sends it every 5 s and ignores the answer).
func (s *Server) handleUpdateConsumerOffset(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.UpdateConsumerOffsetRequestHeader
	if err := h.SetExt(req.ExtFields); err != nil {
		return badHeader(req, err)
	}
	if err := protocol.ValidateGroup(h.ConsumerGroup); err != nil {
		return errorf(req, protocol.InvalidParameter, "UPDATE_CONSUMER_OFFSET: consumerGroup: %v", err)
	}
	if resp := s.checkQueue(req, h.Topic, h.QueueID); resp != nil {
		return resp
	}
	if h.CommitOffset < 0 {
		return errorf(req, protocol.InvalidParameter, "UPDATE_CONSUMER_OFFSET: commitOffset %d is negative", h.CommitOffset)
	}
	s.store.CommitOffset(h.ConsumerGroup, h.Topic, h.QueueID, h.CommitOffset)
	s.noteOffsetCommit(h.ConsumerGroup, h.Topic, h.QueueID)
	return success(req, nil, nil)
}

// handleGetMaxOffset serves GET_MAX_OFFSET: the next offset to be written,
// as consumers see it (store.VisibleMaxOffset: a consumer starting "from the
// last offset" must not start past a record the group may still cut).
func (s *Server) handleGetMaxOffset(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.QueueRequestHeader
	if err := h.SetExt(req.ExtFields); err != nil {
		return badHeader(req, err)
	}
	if resp := s.checkQueue(req, h.Topic, h.QueueID); resp != nil {
		return resp
	}
	return offsetResponse(req, s.store.VisibleMaxOffset(h.Topic, h.QueueID))
}

// handleGetMinOffset serves GET_MIN_OFFSET: the oldest offset still stored.
func (s *Server) handleGetMinOffset(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.QueueRequestHeader
	if err := h.SetExt(req.ExtFields); err != nil {
		return badHeader(req, err)
	}
	if resp := s.checkQueue(req, h.Topic, h.QueueID); resp != nil {
		return resp
	}
	return offsetResponse(req, s.store.MinOffset(h.Topic, h.QueueID))
}

// handleSearchOffsetByTimestamp serves SEARCH_OFFSET_BY_TIMESTAMP.
func (s *Server) handleSearchOffsetByTimestamp(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.SearchOffsetRequestHeader
	if err := h.SetExt(req.ExtFields); err != nil {
		return badHeader(req, err)
	}
	if resp := s.checkQueue(req, h.Topic, h.QueueID); resp != nil {
		return resp
	}
	return offsetResponse(req, s.store.OffsetByTimestamp(h.Topic, h.QueueID, h.Timestamp))
}

// handleGetEarliestMsgStoretime serves GET_EARLIEST_MSG_STORETIME: the store
// time of the oldest message of the queue.
func (s *Server) handleGetEarliestMsgStoretime(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.QueueRequestHeader
	if err := h.SetExt(req.ExtFields); err != nil {
		return badHeader(req, err)
	}
	if resp := s.checkQueue(req, h.Topic, h.QueueID); resp != nil {
		return resp
	}
	ts, err := s.store.StoreTimeAt(h.Topic, h.QueueID, s.store.MinOffset(h.Topic, h.QueueID))
	if err != nil {
		return errorf(req, protocol.SystemError, "no message stored in %s queue %d", h.Topic, h.QueueID)
	}
	return success(req, (&protocol.TimestampResponseHeader{Timestamp: ts}).Ext(), nil)
}

// handleGetAllConsumerOffset serves GET_ALL_CONSUMER_OFFSET: every known
// group's committed offsets keyed "topic@group".
func (s *Server) handleGetAllConsumerOffset(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
	w := protocol.ConsumerOffsetWrapper{OffsetTable: map[string]map[int32]int64{}}
	for _, g := range s.groups.names() {
		for topic, qs := range s.store.GroupOffsets(g) {
			w.OffsetTable[fmt.Sprintf("%s@%s", topic, g)] = qs
		}
	}
	return successJSON(req, w)
}
