package client

import (
	"errors"
	"time"

	"github.com/zonemq/zonemq/internal/filter"
	"github.com/zonemq/zonemq/internal/protocol"
)

// SubscribeSQL registers h for the messages of topic whose properties
// match the SQL92 expression expr, e.g. "region = 'eu' AND amount > 100",
// as RocketMQ's MessageSelector.bySql: comparisons, BETWEEN, IN, IS [NOT]
// NULL, AND/OR/NOT, string and numeric literals, TRUE and FALSE, evaluated
// against the string properties set with Message.Properties. A message
// without a property the expression needs does not match. The broker
// filters (it must run with enablePropertyFilter, the zonemq default); an
// expression the grammar refuses is a *ConfigError here, before anything is
// sent. Call it before Start; a topic has one subscription, the last
// Subscribe or SubscribeSQL.
func (pc *PushConsumer) SubscribeSQL(topic, expr string, h Handler) error {
	if h == nil {
		return &ConfigError{"SubscribeSQL handler", "nil"}
	}
	if err := pc.c.running(); !errors.Is(err, ErrNotStarted) {
		return errors.New("zonemq client: SubscribeSQL after Start")
	}
	sub, err := newSQLSubscription(topic, expr, h)
	if err != nil {
		return err
	}
	return pc.subscribe(sub)
}

// newSQLSubscription checks expr with the broker's own grammar and builds
// the SQL92 subscription the heartbeat and every pull carry.
func newSQLSubscription(topic, expr string, h Handler) (*subscription, error) {
	if err := protocol.ValidateTopic(topic); err != nil {
		return nil, &ConfigError{"SubscribeSQL topic", err.Error()}
	}
	if _, err := filter.Parse(expr); err != nil {
		return nil, &ConfigError{"SubscribeSQL expression", err.Error()}
	}
	return &subscription{topic: topic, expr: expr, handler: h, data: protocol.SubscriptionData{
		Topic:          topic,
		SubString:      expr,
		TagsSet:        []string{},
		CodeSet:        protocol.TagCodes{},
		SubVersion:     time.Now().UnixNano(),
		ExpressionType: protocol.ExpressionTypeSQL92,
	}}, nil
}
