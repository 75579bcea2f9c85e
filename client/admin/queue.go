package admin

import (
	"context"
	"fmt"
	"sort"

	"github.com/zonemq/zonemq/client"
)

// ToolsConsumerGroup is the group the admin reads queues as (RocketMQ's
// TOOLS_CONSUMER). Reading never commits an offset.
const ToolsConsumerGroup = "TOOLS_CONSUMER"

// MessageAt returns the message at offset of one queue of topic
// (`mqadmin queryMsgByOffset`): queue queueID of broker brokerName, which
// may be empty when the topic lives on one broker only. It pulls one
// message as ToolsConsumerGroup without committing. An offset outside the
// queue, or one whose message is gone, is ErrNotFound with the queue's
// bounds in the message.
func (a *Client) MessageAt(ctx context.Context, topic, brokerName string, queueID int, offset int64) (*client.MessageExt, error) {
	if err := a.conn.Running(); err != nil {
		return nil, err
	}
	if offset < 0 || queueID < 0 {
		return nil, fmt.Errorf("zonemq client: queue %d offset %d: both must be >= 0", queueID, offset)
	}
	_, rbs, err := a.readBrokers(ctx, topic)
	if err != nil {
		return nil, err
	}
	var (
		chosen *client.BrokerRoute
		names  []string
	)
	for _, rb := range rbs {
		names = append(names, rb.Name)
		if brokerName == "" || rb.Name == brokerName {
			if chosen != nil {
				chosen = nil
				break
			}
			chosen = &rb
		}
	}
	sort.Strings(names)
	switch {
	case chosen == nil && brokerName == "" && len(names) > 1:
		return nil, fmt.Errorf("zonemq client: topic %s is on brokers %v: name one", topic, names)
	case chosen == nil:
		return nil, fmt.Errorf("zonemq client: topic %s has no readable queues on broker %q (brokers: %v)", topic, brokerName, names)
	case queueID >= chosen.ReadQueues:
		return nil, fmt.Errorf("zonemq client: topic %s has %d read queues on %s, no queue %d", topic, chosen.ReadQueues, chosen.Name, queueID)
	}
	res, err := a.conn.Pull(ctx, *chosen, topic, queueID, ToolsConsumerGroup, offset, 1)
	if err != nil {
		return nil, err
	}
	if res.Status != client.PullFound || len(res.Messages) == 0 || res.Messages[0].QueueOffset != offset {
		return nil, fmt.Errorf("%w: %s queue %d has offsets %d..%d (pull: %s)", ErrNotFound, chosen.Name, queueID,
			res.MinOffset, res.MaxOffset-1, res.Status)
	}
	m := res.Messages[0]
	if m.BrokerAddr == "" {
		m.BrokerAddr = chosen.ReadAddr()
	}
	return m, nil
}
