package broker

import (
	"context"
	"strings"
	"time"

	"github.com/zonemq/zonemq/internal/filter"
	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/store"
)

// Limits of one pull answer. rocketmq-client-go asks for 32 messages; the
// byte cap keeps an answer well inside the clients' 16 MiB frame limit while
// still carrying one maximal message.
const (
	maxPullMessages = 256
	maxPullBytes    = 8 << 20
)

// pullRequest is one PULL_MESSAGE, kept whole so that a parked request can
// be read again and answered later.
type pullRequest struct {
	conn     *remoting.Conn
	req      *remoting.Command
	header   protocol.PullMessageRequestHeader
	deadline time.Time // when a parked request is answered regardless; zero until parked
}

// handlePullMessage serves PULL_MESSAGE. With no message to return and the
// suspend bit set, the request is parked (nil is returned) and answered
// through conn.Respond when a message arrives or the hold time passes.
func (s *Server) handlePullMessage(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
	p := &pullRequest{conn: c, req: req}
	if err := p.header.SetExt(req.ExtFields); err != nil {
		return badHeader(req, err)
	}
	s.pullCount.Add(1)
	gate, ok := s.enterPullGate(c)
	if !ok {
		return nil // the connection closed while it waited
	}
	defer gate.leave()
	return s.servePull(p, true, true)
}

// servePull checks and runs one pull. first is false when a parked request
// is read again (the offset was committed already); mayPark allows parking
// when nothing is found.
func (s *Server) servePull(p *pullRequest, first, mayPark bool) *remoting.Command {
	h, req := &p.header, p.req
	if err := protocol.ValidateGroup(h.ConsumerGroup); err != nil {
		return errorf(req, protocol.InvalidParameter, "PULL_MESSAGE: consumerGroup: %v", err)
	}
	group := s.groups.getOrCreate(h.ConsumerGroup)
	if !group.ConsumeEnable {
		return errorf(req, protocol.NoPermission, "the consumer group %s may not consume from broker %s", h.ConsumerGroup, s.opts.BrokerName)
	}
	cfg, ok := s.readableTopic(h.Topic)
	if !ok {
		return errorf(req, protocol.TopicNotExist, "topic[%s] not exist on broker %s, apply first please!", h.Topic, s.opts.BrokerName)
	}
	if !protocol.Readable(cfg.Perm) {
		return errorf(req, protocol.NoPermission, "the topic %s on broker %s is not readable (perm %d)", h.Topic, s.opts.BrokerName, cfg.Perm)
	}
	if h.QueueID < 0 || int(h.QueueID) >= cfg.ReadQueueNums {
		return errorf(req, protocol.InvalidParameter, "queueId[%d] is illegal: topic %s has %d read queues on broker %s",
			h.QueueID, h.Topic, cfg.ReadQueueNums, s.opts.BrokerName)
	}
	tags, sql, resp := s.pullFilter(req, h)
	if resp != nil {
		return resp
	}
	if first && h.SysFlag&protocol.PullFlagCommitOffset != 0 && h.CommitOffset >= 0 {
		// A pull-carried commit only moves the offset forward: a pull sent
		// before the consumer's final UPDATE_CONSUMER_OFFSET (or by a
		// previous owner of the queue) may arrive after it, and must not
		// take the committed offset back and cause redelivery. Explicit
		// UPDATE_CONSUMER_OFFSET requests still set any value (resets).
		if cur, ok := s.store.QueryOffset(h.ConsumerGroup, h.Topic, h.QueueID); !ok || h.CommitOffset > cur {
			s.store.CommitOffset(h.ConsumerGroup, h.Topic, h.QueueID, h.CommitOffset)
			s.noteOffsetCommit(h.ConsumerGroup, h.Topic, h.QueueID)
		}
	}
	n := int(h.MaxMsgNums)
	if n <= 0 {
		// rocketmq-client-go's pull consumer asks for 0; Java still returns
		// one message, and the client depends on it.
		n = 1
	}
	n = min(n, maxPullMessages)
	maxBytes := maxPullBytes
	if h.MaxMsgBytes > 0 {
		maxBytes = min(maxBytes, int(h.MaxMsgBytes))
	}
	buf := getPullBuffer()
	// Consumers read only confirmed records (store.GetVisible): one the
	// group may still cut must not move their offsets.
	res := filterBySQL(s.store.GetVisible(*buf, h.Topic, h.QueueID, h.QueueOffset, n, maxBytes, tags), sql)
	if res.Status != store.Found {
		putPullBuffer(buf) // no body to send from it
		buf = nil
	}
	if res.Status == store.MessageCorrupt {
		return corruptPullResponse(req, h, res)
	}
	code := pullCode(res.Status, h.QueueOffset)
	if code == protocol.PullNotFound && mayPark && h.SysFlag&protocol.PullFlagSuspend != 0 && h.SuspendTimeoutMillis > 0 {
		if p.deadline.IsZero() {
			hold := min(time.Duration(h.SuspendTimeoutMillis)*time.Millisecond, s.opts.LongPollingMax)
			p.deadline = time.Now().Add(hold)
		}
		if time.Now().Before(p.deadline) {
			switch s.pulls.park(p, res.MaxOffset, res.FencedAt) {
			case parked:
				return nil
			case parkFull:
				// The client backs off on an error code; PULL_NOT_FOUND
				// would have it pull again at once, a busy loop.
				return errorf(req, protocol.SystemBusy, "broker %s holds as many long polls as it allows (%d, %d per connection); pull again later",
					s.opts.BrokerName, s.opts.Hardening.MaxParkedPulls, s.opts.Hardening.MaxParkedPullsPerConn)
			}
		}
	}
	s.metrics.pulled(p, code, res)
	answer := pullResponse(req, code, &res)
	if buf != nil && answer.Body != nil {
		*buf = answer.Body
		answer.Encoded = func() { putPullBuffer(buf) }
	}
	return answer
}

// pullFilter resolves the subscription that filters the pull: the request's
// own when the subscription bit is set, else the one the group's heartbeat
// reported. It returns a tag-code filter (nil for "every tag") or, for a
// SQL92 subscription (sqlfilter.go), the compiled expression.
func (s *Server) pullFilter(req *remoting.Command, h *protocol.PullMessageRequestHeader) (func(int64) bool, *filter.Expression, *remoting.Command) {
	var sub protocol.SubscriptionData
	if h.SysFlag&protocol.PullFlagSubscription != 0 {
		sub.SubString, sub.ExpressionType = h.Subscription, h.ExpressionType
		sub.TagsSet, sub.CodeSet = protocol.ParseSubscription(h.Subscription)
		sub = s.heartbeatExpressionType(h.ConsumerGroup, h.Topic, sub) // sqlfilter.go
	} else {
		sd, groupOnline, ok := s.registry.subscription(h.ConsumerGroup, h.Topic)
		switch {
		case !groupOnline:
			return nil, nil, errorf(req, protocol.SubscriptionNotExist, "the consumer group %s has sent broker %s no heartbeat", h.ConsumerGroup, s.opts.BrokerName)
		case !ok:
			return nil, nil, errorf(req, protocol.SubscriptionNotExist, "the consumer group %s is not subscribed to topic %s", h.ConsumerGroup, h.Topic)
		case sd.SubVersion < h.SubVersion:
			return nil, nil, errorf(req, protocol.SubscriptionNotLatest, "the subscription of group %s to topic %s is older than the pull's", h.ConsumerGroup, h.Topic)
		}
		sub = sd
	}
	if isSQL92(sub.ExpressionType) {
		sub.Topic = h.Topic
		expr, resp := s.sqlFilter(req, sub)
		return nil, expr, resp
	}
	if sub.ExpressionType != "" && !strings.EqualFold(sub.ExpressionType, protocol.ExpressionTypeTag) {
		return nil, nil, errorf(req, protocol.SubscriptionParseFailed, "expression type %s is not supported; zonemq filters by TAG or SQL92", sub.ExpressionType)
	}
	return tagFilter(sub), nil, nil
}

// tagFilter matches consume-queue tag codes against a subscription. nil
// means every message matches.
func tagFilter(sub protocol.SubscriptionData) func(int64) bool {
	expr := strings.TrimSpace(sub.SubString)
	if expr == "" || expr == protocol.SubscribeAll {
		return nil
	}
	codes := map[int64]struct{}{}
	for _, t := range sub.TagsSet {
		codes[protocol.TagsHashCode(t)] = struct{}{}
	}
	if len(codes) == 0 {
		for _, c := range sub.CodeSet {
			codes[c] = struct{}{}
		}
	}
	if len(codes) == 0 {
		_, parsed := protocol.ParseSubscription(expr)
		for _, c := range parsed {
			codes[c] = struct{}{}
		}
	}
	return func(code int64) bool {
		_, ok := codes[code]
		return ok
	}
}

// pullCode maps the store's read status to the pull answer's code, as the
// Java broker does.
func pullCode(st store.GetStatus, offset int64) protocol.ResponseCode {
	switch st {
	case store.Found:
		return protocol.Success
	case store.NoMatchedMessage, store.MessageWasRemoving:
		return protocol.PullRetryImmediately
	case store.NoMessageInQueue:
		if offset != 0 {
			return protocol.PullOffsetMoved
		}
		return protocol.PullNotFound
	case store.OffsetFoundNull, store.OffsetOverflowOne:
		return protocol.PullNotFound
	case store.OffsetOverflowBadly, store.OffsetTooSmall:
		return protocol.PullOffsetMoved
	}
	return protocol.PullRetryImmediately
}

// pullResponse builds a pull answer: the four offsets always, the store
// status as remark, and on SUCCESS the stored records back to back (the
// buffer the store read them into, when nothing was filtered out after).
func pullResponse(req *remoting.Command, code protocol.ResponseCode, res *store.GetResult) *remoting.Command {
	resp := remoting.NewResponse(req, int32(code), res.Status.String())
	resp.Header = &protocol.PullMessageResponseHeader{
		SuggestWhichBrokerID: protocol.MasterID,
		NextBeginOffset:      res.NextBeginOffset,
		MinOffset:            res.MinOffset,
		MaxOffset:            res.MaxOffset,
	}
	if code == protocol.Success {
		resp.Body = res.Body()
	}
	return resp
}
