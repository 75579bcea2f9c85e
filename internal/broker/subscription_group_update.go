package broker

import (
	"context"
	"encoding/json"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// handleUpdateAndCreateSubscriptionGroup serves
// UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (`mqadmin updateSubGroup`): the body
// is the group's config as JSON; fields it leaves out keep RocketMQ's
// defaults. consumeMessageOrderly makes the group FIFO for POP consumers
// (docs/grpc.md); retryMaxTimes sets their deliveries (+1).
func (s *Server) handleUpdateAndCreateSubscriptionGroup(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	var named struct {
		GroupName string `json:"groupName"`
	}
	if err := json.Unmarshal(req.Body, &named); err != nil {
		return errorf(req, protocol.InvalidParameter, "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: the body is not a group config: %v", err)
	}
	if err := protocol.ValidateGroup(named.GroupName); err != nil {
		return errorf(req, protocol.InvalidParameter, "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: groupName: %v", err)
	}
	g := protocol.NewSubscriptionGroupConfig(named.GroupName)
	if err := json.Unmarshal(req.Body, &g); err != nil {
		return errorf(req, protocol.InvalidParameter, "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: %v", err)
	}
	if g.RetryMaxTimes < 0 || g.RetryMaxTimes > 64 {
		return errorf(req, protocol.InvalidParameter, "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: retryMaxTimes %d is outside 0..64", g.RetryMaxTimes)
	}
	if err := s.groups.put(g); err != nil {
		return errorf(req, protocol.SystemError, "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: persisting: %v", err)
	}
	s.logger.Info("subscription group updated", "group", g.GroupName, "orderly", g.ConsumeMessageOrderly, "retryMaxTimes", g.RetryMaxTimes)
	return success(req, nil, nil)
}
