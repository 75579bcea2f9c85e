package broker

import (
	"context"
	"strings"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// topicsChanged registers the new topic table with every name server at
// once instead of at the next periodic registration.
func (s *Server) topicsChanged() { s.namesrvs.kickAll() }

// handleUpdateAndCreateTopic serves UPDATE_AND_CREATE_TOPIC from admin
// tools: it creates or replaces the topic and re-registers.
func (s *Server) handleUpdateAndCreateTopic(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.CreateTopicRequestHeader
	if err := h.SetExt(req.ExtFields); err != nil {
		return badHeader(req, err)
	}
	if err := protocol.ValidateTopic(h.Topic); err != nil {
		return errorf(req, protocol.InvalidParameter, "UPDATE_AND_CREATE_TOPIC: %v", err)
	}
	if protocol.IsSystemTopic(h.Topic) || h.Topic == s.opts.BrokerName {
		return errorf(req, protocol.InvalidParameter, "UPDATE_AND_CREATE_TOPIC: %s is a system topic of broker %s", h.Topic, s.opts.BrokerName)
	}
	if h.ReadQueueNums < 1 || h.ReadQueueNums > maxQueueNums || h.WriteQueueNums < 1 || h.WriteQueueNums > maxQueueNums {
		return errorf(req, protocol.InvalidParameter, "UPDATE_AND_CREATE_TOPIC: readQueueNums %d and writeQueueNums %d must be within 1..%d",
			h.ReadQueueNums, h.WriteQueueNums, maxQueueNums)
	}
	if h.Perm < 0 || h.Perm > protocol.PermPriority|protocol.PermReadWrite|protocol.PermInherit {
		return errorf(req, protocol.InvalidParameter, "UPDATE_AND_CREATE_TOPIC: perm %d is not a permission (0..15)", h.Perm)
	}
	filterType := h.TopicFilterType
	if filterType == "" {
		filterType = topicFilterSingleTag
	}
	cfg := protocol.TopicConfig{
		TopicName: h.Topic, ReadQueueNums: int(h.ReadQueueNums), WriteQueueNums: int(h.WriteQueueNums), Perm: int(h.Perm),
		TopicFilterType: filterType, TopicSysFlag: int(h.TopicSysFlag), Order: h.Order, Attributes: parseTopicAttributes(h.Attributes),
	}
	if _, exists := s.topics.get(h.Topic); !exists {
		if resp := s.refuseTopicOnFullDisk(req, h.Topic); resp != nil {
			return resp
		}
	}
	changed, err := s.topics.put(cfg)
	if resp := s.diskFullResponse(req, err, "creating topic "+h.Topic); resp != nil {
		return resp
	}
	if err != nil {
		return s.topicCreateError(req, h.Topic, err)
	}
	if changed {
		s.logger.Info("topic created or updated", "topic", h.Topic, "read", cfg.ReadQueueNums, "write", cfg.WriteQueueNums, "perm", cfg.Perm, "peer", c.RemoteAddr())
		s.topicsChanged()
	}
	return success(req, nil, nil)
}

// parseTopicAttributes reads RocketMQ 5's "+key=value,+key2=value2".
func parseTopicAttributes(s string) map[string]string {
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		kv = strings.TrimPrefix(strings.TrimSpace(kv), "+")
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			out[k] = v
		}
	}
	return out
}

// handleDeleteTopicInBroker serves DELETE_TOPIC_IN_BROKER: it removes the
// topic's config and its stored queues, then re-registers.
func (s *Server) handleDeleteTopicInBroker(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.TopicRequestHeader
	if err := h.SetExt(req.ExtFields); err != nil {
		return badHeader(req, err)
	}
	if protocol.IsSystemTopic(h.Topic) || h.Topic == s.opts.BrokerName {
		return errorf(req, protocol.InvalidParameter, "DELETE_TOPIC_IN_BROKER: %s is a system topic of broker %s", h.Topic, s.opts.BrokerName)
	}
	// Queues first: a crash between the two steps then leaves a config
	// without queues (harmless) rather than queues without a config, which
	// the start-up check reads as a damaged topics.json.
	if err := s.store.DeleteTopic(h.Topic); err != nil {
		s.logger.Error("deleting a topic's queues", "topic", h.Topic, "err", err)
		return errorf(req, protocol.SystemError, "deleting the queues of topic %s failed", h.Topic)
	}
	existed, err := s.topics.remove(h.Topic)
	if err != nil {
		s.logger.Error("deleting a topic", "topic", h.Topic, "err", err)
		return errorf(req, protocol.SystemError, "deleting topic %s failed", h.Topic)
	}
	if existed {
		s.logger.Info("topic deleted", "topic", h.Topic, "peer", c.RemoteAddr())
		s.topicsChanged()
	}
	return success(req, nil, nil)
}

// handleGetAllTopicConfig serves GET_ALL_TOPIC_CONFIG.
func (s *Server) handleGetAllTopicConfig(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
	return successJSON(req, s.topics.snapshot())
}

// handleGetTopicStatsInfo serves GET_TOPIC_STATS_INFO: per queue the min and
// max offsets and the store time of the newest message.
func (s *Server) handleGetTopicStatsInfo(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.TopicRequestHeader
	if err := h.SetExt(req.ExtFields); err != nil {
		return badHeader(req, err)
	}
	cfg, ok := s.topics.get(h.Topic)
	if !ok {
		return errorf(req, protocol.TopicNotExist, "topic[%s] not exist on broker %s", h.Topic, s.opts.BrokerName)
	}
	t := protocol.TopicStatsTable{OffsetTable: map[protocol.MessageQueue]protocol.TopicOffset{}}
	for q := 0; q < cfg.WriteQueueNums; q++ {
		qid := int32(q)
		to := protocol.TopicOffset{MinOffset: s.store.MinOffset(h.Topic, qid), MaxOffset: s.store.MaxOffset(h.Topic, qid)}
		if to.MaxOffset > 0 {
			to.LastUpdateTimestamp, _ = s.store.StoreTimeAt(h.Topic, qid, to.MaxOffset-1)
		}
		t.OffsetTable[protocol.MessageQueue{Topic: h.Topic, BrokerName: s.opts.BrokerName, QueueID: q}] = to
	}
	return success(req, nil, t.Encode())
}
