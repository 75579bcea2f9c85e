package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
)

// TopicFlows are a broker's message counters since it started, per topic
// (In: stored from producers) and per topic and consumer group (Out:
// returned to pulls). Two readings give TPS.
type TopicFlows struct {
	// At is the broker's clock when it read them; Start when it started.
	At, Start time.Time
	In, Out   []TopicFlow
}

// TopicFlow is one counter pair; Group is empty for In.
type TopicFlow struct {
	Topic, Group    string
	Messages, Bytes int64
}

// TopicFlows reads the per-topic counters of the broker at addr (zonemq's
// GET_TOPIC_FLOWS; `zonemq admin topic stats`); topic "" means all.
func (a *Client) TopicFlows(ctx context.Context, addr, topic string) (*TopicFlows, error) {
	if err := a.conn.Running(); err != nil {
		return nil, err
	}
	var ext map[string]string
	if topic != "" {
		ext = map[string]string{"topic": topic}
	}
	resp, err := a.conn.Call(ctx, addr, req(protocol.GetTopicFlows, ext, nil))
	if err != nil {
		return nil, err
	}
	var body protocol.TopicFlows
	if err := json.Unmarshal(resp.Body, &body); err != nil {
		return nil, fmt.Errorf("zonemq client: topic flows of %s: %w", addr, err)
	}
	out := &TopicFlows{At: time.UnixMilli(body.AtMillis), Start: time.UnixMilli(body.StartMillis)}
	for _, f := range body.In {
		out.In = append(out.In, TopicFlow{Topic: f.Topic, Messages: f.Messages, Bytes: f.Bytes})
	}
	for _, f := range body.Out {
		out.Out = append(out.Out, TopicFlow{Topic: f.Topic, Group: f.Group, Messages: f.Messages, Bytes: f.Bytes})
	}
	return out, nil
}
