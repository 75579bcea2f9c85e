package broker

import (
	"context"
	"encoding/json"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// lockBatchBody is the body of LOCK_BATCH_MQ and UNLOCK_BATCH_MQ.
type lockBatchBody struct {
	ConsumerGroup string `json:"consumerGroup"`
	ClientID      string `json:"clientId"`
	// OnlyThisBroker is RocketMQ 5's flag against forwarding the lock to the
	// other replicas; zonemq runs masters only, so it changes nothing.
	OnlyThisBroker bool                    `json:"onlyThisBroker,omitempty"`
	MQSet          []protocol.MessageQueue `json:"mqSet"`
	// Concurrent (zonemq, "zmqConcurrent") marks the locks of a consumer
	// that does not consume in order (the zonemq SDK locks every queue it
	// holds). Without it a lock is an orderly consumer's, which only a
	// master grants (see handleLockBatchMQ).
	Concurrent bool `json:"zmqConcurrent,omitempty"`
}

// lockBatchResponseBody is LOCK_BATCH_MQ's answer: the queues the client
// owns now.
type lockBatchResponseBody struct {
	LockOKMQSet []protocol.MessageQueue `json:"lockOKMQSet"`
}

// decodeLockBody parses and checks a lock or unlock body.
func decodeLockBody(req *remoting.Command) (lockBatchBody, *remoting.Command) {
	var b lockBatchBody
	if err := json.Unmarshal(req.Body, &b); err != nil {
		return b, errorf(req, protocol.InvalidParameter, "%s: the body is not a lock request: %v", protocol.RequestCode(req.Code), err)
	}
	if err := protocol.ValidateGroup(b.ConsumerGroup); err != nil {
		return b, errorf(req, protocol.InvalidParameter, "%s: consumerGroup: %v", protocol.RequestCode(req.Code), err)
	}
	if b.ClientID == "" {
		return b, errorf(req, protocol.InvalidParameter, "%s: the body has no clientId", protocol.RequestCode(req.Code))
	}
	return b, nil
}

// handleLockBatchMQ serves LOCK_BATCH_MQ: an orderly consumer locks (or
// renews) the queues it was assigned before it consumes them. Queues owned
// by another live member of the group are left out of the answer.
func (s *Server) handleLockBatchMQ(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
	b, resp := decodeLockBody(req)
	if resp != nil {
		return resp
	}
	if !b.Concurrent && !s.isMaster() {
		// An orderly consumer's lock is its right to consume a queue alone,
		// in order. Only the group's master decides it: a replica reached
		// from the far side of a partition would grant a second owner
		// while the master's lock holder consumes on. Such queues wait for
		// their master (or a new one the controller elects).
		s.logger.Debug("orderly lock refused: this broker is a replica", "group", b.ConsumerGroup, "client", b.ClientID,
			"asked", len(b.MQSet))
		return successJSON(req, lockBatchResponseBody{LockOKMQSet: []protocol.MessageQueue{}})
	}
	locks := s.extra.locks
	locked := locks.tryLock(b.ConsumerGroup, b.ClientID, b.MQSet, s.groupMembers(b.ConsumerGroup))
	if len(locked) < len(b.MQSet) {
		s.logger.Debug("some queues are locked by another client", "group", b.ConsumerGroup, "client", b.ClientID,
			"asked", len(b.MQSet), "locked", len(locked))
	}
	return successJSON(req, lockBatchResponseBody{LockOKMQSet: locked})
}

// handleUnlockBatchMQ serves UNLOCK_BATCH_MQ: the client releases the
// queues it owns; queues owned by others are left alone.
func (s *Server) handleUnlockBatchMQ(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
	b, resp := decodeLockBody(req)
	if resp != nil {
		return resp
	}
	released := s.extra.locks.unlock(b.ConsumerGroup, b.ClientID, b.MQSet)
	if len(released) < len(b.MQSet) {
		s.logger.Debug("unlock of queues the client does not own ignored", "group", b.ConsumerGroup, "client", b.ClientID,
			"asked", len(b.MQSet), "released", len(released))
	}
	return success(req, nil, nil)
}

// groupMembers reads the membership of a consumer group for lock checks.
func (s *Server) groupMembers(group string) members {
	at := s.extra.locks.now()
	ids := s.registry.consumerIDs(group)
	ms := members{ids: make(map[string]bool, len(ids)), at: at}
	for _, id := range ids {
		ms.ids[id] = true
	}
	return ms
}

// lockSweepLoop drops lapsed locks every half lease (at most every minute).
func (s *Server) lockSweepLoop(ctx context.Context) {
	locks := s.extra.locks
	t := time.NewTicker(min(max(locks.lease/2, 10*time.Millisecond), time.Minute))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			locks.sweep(s.groupMembers)
		}
	}
}

// QueueLockOwners returns the queues of a consumer group that are locked
// for orderly consumption on this broker, with the client id of each owner.
func (s *Server) QueueLockOwners(group string) map[protocol.MessageQueue]string {
	return s.extra.locks.owners(group, s.groupMembers(group))
}
