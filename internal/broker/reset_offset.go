package broker

import (
	"context"
	"strconv"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// handleInvokeBrokerToResetOffset serves INVOKE_BROKER_TO_RESET_OFFSET
// (`mqadmin resetOffsetByTime`, `zonemq admin offset reset`): it moves the
// group's committed offset of every read queue of the topic to the first
// message stored at or after the timestamp (-1: the end), then tells every
// consumer of the group connected here (RESET_CONSUMER_CLIENT_OFFSET, one
// way, as a Java broker does) so a running consumer restarts its queues
// from there instead of committing the offset it held over the reset.
//
// Unlike RocketMQ 4's broker, which leaves the committing to the consumers
// and answers CONSUMER_NOT_ONLINE when there are none, the offsets are
// committed here first: the reset holds for a group that is not running,
// and for a consumer that ignores the notice and restarts later.
func (s *Server) handleInvokeBrokerToResetOffset(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.ResetOffsetRequestHeader
	if err := h.SetExt(req.ExtFields); err != nil {
		return badHeader(req, err)
	}
	if err := protocol.ValidateGroup(h.Group); err != nil {
		return errorf(req, protocol.InvalidParameter, "INVOKE_BROKER_TO_RESET_OFFSET: group: %v", err)
	}
	if h.Timestamp < protocol.ResetOffsetLatest {
		return errorf(req, protocol.InvalidParameter, "INVOKE_BROKER_TO_RESET_OFFSET: timestamp %d: want Unix milliseconds or -1 (latest)", h.Timestamp)
	}
	cfg, ok := s.readableTopic(h.Topic)
	if !ok {
		return errorf(req, protocol.TopicNotExist, "[reset-offset] topic[%s] not exist on broker %s", h.Topic, s.opts.BrokerName)
	}
	body := protocol.ResetOffsetBody{OffsetTable: map[protocol.MessageQueue]int64{}}
	for q := int32(0); q < int32(cfg.ReadQueueNums); q++ {
		var off int64
		if h.Timestamp == protocol.ResetOffsetLatest {
			off = s.store.VisibleMaxOffset(h.Topic, q)
		} else {
			off = s.store.OffsetByTimestamp(h.Topic, q, h.Timestamp)
		}
		if committed, ok := s.store.QueryOffset(h.Group, h.Topic, q); ok && !h.IsForce && off >= committed {
			off = committed // without force a queue only moves back
		}
		s.store.CommitOffset(h.Group, h.Topic, q, off)
		s.noteOffsetCommit(h.Group, h.Topic, q)
		body.OffsetTable[protocol.MessageQueue{Topic: h.Topic, BrokerName: s.opts.BrokerName, QueueID: int(q)}] = off
	}
	encoded := body.Encode()
	notified := 0
	for _, ch := range s.registry.consumerChannels(h.Group) {
		notice := remoting.NewRequest(int32(protocol.ResetConsumerClientOffset), h.Ext(), encoded)
		if err := ch.conn.InvokeOneway(notice); err != nil {
			s.logger.Warn("reset-offset notice not sent", "group", h.Group, "client", ch.clientID, "err", err)
			continue
		}
		notified++
	}
	s.logger.Info("consumer offsets reset", "group", h.Group, "topic", h.Topic, "timestamp", h.Timestamp,
		"force", h.IsForce, "consumersNotified", notified)
	return success(req, map[string]string{"zonemqConsumersNotified": strconv.Itoa(notified)}, encoded)
}
