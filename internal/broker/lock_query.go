package broker

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// handleQueryQueueLocks serves ZONEMQ_QUERY_QUEUE_LOCKS: the queues of a
// consumer group locked on this broker now, with each owner's client id.
// It reads the table as LOCK_BATCH_MQ would judge it at this moment, so a
// drill that asks every broker can tell whether a queue has two owners.
func (s *Server) handleQueryQueueLocks(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	group := req.ExtFields["consumerGroup"]
	if err := protocol.ValidateGroup(group); err != nil {
		return errorf(req, protocol.InvalidParameter, "%s: consumerGroup: %v", protocol.QueryQueueLocks, err)
	}
	body := protocol.QueueLocksBody{ConsumerGroup: group, Master: s.isMaster(), Locks: []protocol.QueueLock{}}
	for mq, owner := range s.QueueLockOwners(group) {
		body.Locks = append(body.Locks, protocol.QueueLock{Queue: mq, ClientID: owner})
	}
	slices.SortFunc(body.Locks, func(a, b protocol.QueueLock) int {
		return cmp.Or(cmp.Compare(a.Queue.Topic, b.Queue.Topic), cmp.Compare(a.Queue.BrokerName, b.Queue.BrokerName),
			cmp.Compare(a.Queue.QueueID, b.Queue.QueueID))
	})
	out, err := json.Marshal(body)
	if err != nil {
		return errorf(req, protocol.SystemError, "%s: %v", protocol.QueryQueueLocks, err)
	}
	resp := remoting.NewResponse(req, int32(protocol.Success), "")
	resp.Body = out
	return resp
}
