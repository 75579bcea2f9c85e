package client

import (
	"fmt"
	"strings"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
)

// subscription is one topic a consumer reads, with its tag filter.
type subscription struct {
	topic   string
	expr    string
	tags    map[string]bool // nil: every tag
	handler Handler         // nil for the retry topic: messages go to their origin topic's handler
	data    protocol.SubscriptionData
}

// newSubscription parses a TAG expression: "*" (or "") for every tag, or
// "A || B" for messages tagged A or B.
func newSubscription(topic, expr string, h Handler) (*subscription, error) {
	if err := protocol.ValidateTopic(topic); err != nil {
		return nil, &ConfigError{"Subscribe topic", err.Error()}
	}
	expr = strings.TrimSpace(expr)
	if expr == "" {
		expr = protocol.SubscribeAll
	}
	tags, codes := protocol.ParseSubscription(expr)
	if expr != protocol.SubscribeAll && len(tags) == 0 {
		return nil, &ConfigError{"Subscribe expression", fmt.Sprintf("%q names no tag", expr)}
	}
	s := &subscription{topic: topic, expr: expr, handler: h}
	if len(tags) > 0 {
		s.tags = map[string]bool{}
		for _, t := range tags {
			s.tags[t] = true
		}
	}
	if tags == nil {
		tags = []string{}
	}
	if codes == nil {
		codes = protocol.TagCodes{}
	}
	s.data = protocol.SubscriptionData{
		Topic:          topic,
		SubString:      expr,
		TagsSet:        tags,
		CodeSet:        codes,
		SubVersion:     time.Now().UnixNano(),
		ExpressionType: protocol.ExpressionTypeTag,
	}
	return s, nil
}

// match reports whether a message tagged tag passes the filter.
func (s *subscription) match(tag string) bool {
	return s.tags == nil || s.tags[tag]
}
