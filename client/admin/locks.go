package admin

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/internal/protocol"
)

// QueueLock is one queue locked for orderly consumption on a broker, and
// the client id of the consumer that holds it.
type QueueLock struct {
	Queue    client.MessageQueue
	ClientID string
}

// QueueLockTable is one broker's lock table for a consumer group.
type QueueLockTable struct {
	// Master tells whether the broker is its group's master (a replica
	// grants locks to the consumers that read from it).
	Master bool
	Locks  []QueueLock
}

// QueueLocks asks the broker at addr which queues of group are locked now
// for orderly consumption, and by whom (ZONEMQ_QUERY_QUEUE_LOCKS, a zonemq
// broker only: docs/protocol.md). It is the brokers' own view of queue
// ownership; a queue never has two owners on one broker, and a drill that
// asks every broker checks that no queue has two across them either.
func (a *Client) QueueLocks(ctx context.Context, addr, group string) (*QueueLockTable, error) {
	if err := a.conn.Running(); err != nil {
		return nil, err
	}
	if err := protocol.ValidateGroup(group); err != nil {
		return nil, &client.ConfigError{Field: "group", Reason: err.Error()}
	}
	h := protocol.ConsumerGroupRequestHeader{ConsumerGroup: group}
	resp, err := a.conn.Call(ctx, addr, req(protocol.QueryQueueLocks, h.Ext(), nil))
	if err != nil {
		return nil, err
	}
	var body protocol.QueueLocksBody
	if err := json.Unmarshal(resp.Body, &body); err != nil {
		return nil, fmt.Errorf("zonemq client: queue locks from %s: %w", addr, err)
	}
	out := &QueueLockTable{Master: body.Master, Locks: make([]QueueLock, len(body.Locks))}
	for i, l := range body.Locks {
		out.Locks[i] = QueueLock{Queue: client.MessageQueue{Topic: l.Queue.Topic, BrokerName: l.Queue.BrokerName, QueueID: l.Queue.QueueID}, ClientID: l.ClientID}
	}
	return out, nil
}
