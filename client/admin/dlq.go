package admin

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/internal/protocol"
)

// BrowseDLQ returns up to max messages of group's dead-letter topic
// (%DLQ%group), oldest queue offsets first on each broker, without
// consuming or committing anything. It returns an empty slice when the
// group has no dead-letter topic yet.
func (a *Client) BrowseDLQ(ctx context.Context, group string, max int) ([]*client.MessageExt, error) {
	if err := a.conn.Running(); err != nil {
		return nil, err
	}
	if max <= 0 {
		max = 32
	}
	topic := protocol.DLQTopic(group)
	_, rbs, err := a.readBrokers(ctx, topic)
	if err != nil {
		return nil, err
	}
	out := []*client.MessageExt{}
	var errs []error
	for _, rb := range rbs {
		for q := 0; q < rb.ReadQueues && len(out) < max; q++ {
			mq := client.MessageQueue{Topic: topic, BrokerName: rb.Name, QueueID: q}
			offset, err := a.conn.MinOffset(ctx, rb.Master(), mq)
			if err != nil {
				errs = append(errs, fmt.Errorf("broker %s: %w", rb.Name, err))
				continue
			}
			for len(out) < max {
				res, err := a.conn.Pull(ctx, rb, topic, q, group, offset, min(32, max-len(out)))
				if err != nil {
					errs = append(errs, fmt.Errorf("broker %s: %w", rb.Name, err))
					break
				}
				if res.Status != client.PullFound || res.NextBeginOffset <= offset {
					break
				}
				out = append(out, res.Messages...)
				offset = res.NextBeginOffset
			}
		}
	}
	if len(out) == 0 && len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].StoreTimestamp.Before(out[j].StoreTimestamp) })
	if len(out) > max {
		out = out[:max]
	}
	return out, nil
}

// ResendFromDLQ sends a dead-lettered message of group again through
// producer, to group's retry topic (%RETRY%group), so that group — and only
// group — consumes it once more, with its reconsume count reset. id is the
// message's broker (offset) id as BrowseDLQ shows it. It returns the send
// result. The dead-letter copy stays where it is (RocketMQ's DLQ is
// append-only too).
func (a *Client) ResendFromDLQ(ctx context.Context, producer *client.Producer, group, id string) (*client.SendResult, error) {
	m, err := a.ViewMessage(ctx, "", id)
	if err != nil {
		return nil, err
	}
	if m.Topic != protocol.DLQTopic(group) {
		return nil, fmt.Errorf("zonemq client: message %s is in topic %s, not %s", id, m.Topic, protocol.DLQTopic(group))
	}
	return producer.SendToRetry(ctx, group, m)
}
