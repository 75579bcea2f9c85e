package broker

import (
	"context"
	"encoding/json"
	"strings"
	"sync"

	"github.com/zonemq/zonemq/internal/filter"
	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/store"
)

// maxCachedFilters bounds the compiled-expression cache. Consumers reuse
// a handful of expressions, so the cache is simply emptied when full: a
// client cycling through fresh expressions costs recompiles, not memory.
const maxCachedFilters = 1024

// sqlFilterCache holds compiled SQL92 expressions (or the error that
// refused them) by source text, so a pull does not parse again.
type sqlFilterCache struct {
	mu sync.Mutex
	m  map[string]compiledFilter // guarded by mu
}

type compiledFilter struct {
	expr *filter.Expression
	err  error
}

func newSQLFilterCache() *sqlFilterCache {
	return &sqlFilterCache{m: map[string]compiledFilter{}}
}

// compile returns the expression compiled from src, from the cache when it
// was seen before.
func (c *sqlFilterCache) compile(src string) (*filter.Expression, error) {
	c.mu.Lock()
	got, ok := c.m[src]
	c.mu.Unlock()
	if ok {
		return got.expr, got.err
	}
	expr, err := filter.Parse(src)
	c.mu.Lock()
	if len(c.m) >= maxCachedFilters {
		clear(c.m)
	}
	c.m[src] = compiledFilter{expr, err}
	c.mu.Unlock()
	return expr, err
}

// isSQL92 reports whether an expression type asks for a property filter.
func isSQL92(expressionType string) bool {
	return strings.EqualFold(expressionType, protocol.ExpressionTypeSQL92)
}

// sqlFilter compiles a SQL92 subscription for a pull or a client check.
// A refusal is the answer to send: SYSTEM_ERROR while enablePropertyFilter
// is off (RocketMQ's answer), SUBSCRIPTION_PARSE_FAILED with the parser's
// message for a bad expression.
func (s *Server) sqlFilter(req *remoting.Command, sub protocol.SubscriptionData) (*filter.Expression, *remoting.Command) {
	if !s.opts.EnablePropertyFilter {
		return nil, errorf(req, protocol.SystemError,
			"The broker does not support consumer to filter message by SQL92 (broker %s runs with enablePropertyFilter=false)", s.opts.BrokerName)
	}
	expr, err := s.extra.sql.compile(sub.SubString)
	if err != nil {
		return nil, errorf(req, protocol.SubscriptionParseFailed,
			"the SQL92 subscription of topic %s cannot be parsed: %v", sub.Topic, err)
	}
	return expr, nil
}

// heartbeatExpressionType corrects a pull that carries its subscription
// but calls it TAG while the group's heartbeat registered the same text as
// SQL92: rocketmq-client-go's pull consumer (and its push consumer with
// PostSubscriptionWhenPull) always say TAG in the pull header.
func (s *Server) heartbeatExpressionType(group, topic string, sub protocol.SubscriptionData) protocol.SubscriptionData {
	if sub.ExpressionType != "" && !strings.EqualFold(sub.ExpressionType, protocol.ExpressionTypeTag) {
		return sub
	}
	if sd, _, ok := s.registry.subscription(group, topic); ok && isSQL92(sd.ExpressionType) && sd.SubString == sub.SubString {
		sub.ExpressionType = sd.ExpressionType
	}
	return sub
}

// filterBySQL drops from a pull result the messages expr does not match.
// Their offsets are consumed all the same (NextBeginOffset is unchanged),
// and when none is left the answer says so (NO_MATCHED_MESSAGE, which the
// clients take as "continue at NextBeginOffset at once").
func filterBySQL(res store.GetResult, expr *filter.Expression) store.GetResult {
	if expr == nil || res.Status != store.Found {
		return res
	}
	kept := res.Messages[:0]
	for _, raw := range res.Messages {
		props, err := protocol.StoredProperties(raw)
		if err != nil {
			continue // the store hands out whole records; a bad one cannot match
		}
		if expr.Match(func(name string) (string, bool) { return protocol.Property(props, name) }) {
			kept = append(kept, raw)
		}
	}
	res.Messages = kept
	if len(kept) == 0 {
		res.Messages = nil
		res.Status = store.NoMatchedMessage
	}
	return res
}

// checkClientConfigBody is CHECK_CLIENT_CONFIG's body (RocketMQ's
// CheckClientRequestBody): the subscription a Java consumer is about to
// use, sent before it starts so a bad expression fails start().
type checkClientConfigBody struct {
	ClientID         string                     `json:"clientId"`
	Group            string                     `json:"group"`
	SubscriptionData *protocol.SubscriptionData `json:"subscriptionData"`
}

// handleCheckClientConfig serves CHECK_CLIENT_CONFIG: a TAG subscription
// always passes; a SQL92 one passes when property filters are on and the
// expression compiles.
func (s *Server) handleCheckClientConfig(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
	var body checkClientConfigBody
	if err := json.Unmarshal(req.Body, &body); err != nil {
		return errorf(req, protocol.InvalidParameter, "CHECK_CLIENT_CONFIG: the body is not a client check: %v", err)
	}
	if body.SubscriptionData == nil || !isSQL92(body.SubscriptionData.ExpressionType) {
		return success(req, nil, nil)
	}
	if _, resp := s.sqlFilter(req, *body.SubscriptionData); resp != nil {
		return resp
	}
	return success(req, nil, nil)
}
