package broker

import (
	"context"
	"strconv"

	"github.com/zonemq/zonemq/internal/acl"
	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/store"
)

// handleRecallTimer serves ZONEMQ_RECALL_TIMER: the pending timer message
// at queueOffset of the timer queue, whose client id is uniqKey, is never
// delivered. It is marked delivered, so a restart does not hold it again
// (the mark is in the timer checkpoint, written at most a second later: a
// crash within that second delivers it after all). A timer already
// delivered, or an offset and id that do not match, is QUERY_NOT_FOUND.
func (s *Server) handleRecallTimer(_ context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
	if !s.isMaster() {
		return errorf(req, protocol.ServiceNotAvailable, "broker %s is not its group's master: recall on the master", s.opts.BrokerName)
	}
	off, err := strconv.ParseInt(req.ExtFields["queueOffset"], 10, 64)
	uniq := req.ExtFields["uniqKey"]
	if err != nil || off < 0 || uniq == "" {
		return errorf(req, protocol.InvalidParameter, "%s: queueOffset (an integer >= 0) and uniqKey are required", protocol.RecallTimer)
	}
	res := s.store.GetMessages(protocol.TimerTopic, 0, off, 1, maxPullBytes, nil)
	if res.Status != store.Found || len(res.Messages) == 0 || recordOffset(res.Messages[0]) != off {
		return errorf(req, protocol.QueryNotFound, "no timer message at offset %d on broker %s", off, s.opts.BrokerName)
	}
	m, _, err := protocol.DecodeStoredMessage(res.Messages[0], false, false)
	if got, _ := protocol.Property(m.Properties, protocol.PropertyUniqClientMessageID); err != nil || got != uniq {
		return errorf(req, protocol.QueryNotFound, "the timer message at offset %d is not %s", off, uniq)
	}
	// Recalling drops a message from its topic: only an account that may
	// send there may do it.
	if real, _ := protocol.Property(m.Properties, protocol.PropertyRealTopic); real != "" {
		if resp := s.checkRecordPerm(c, req, acl.Pub, real); resp != nil {
			return resp
		}
	}
	t := s.extra.timers
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.delivered.contains(off) {
		return errorf(req, protocol.QueryNotFound, "timer message %s was delivered (or recalled) already", uniq)
	}
	t.delivered.mark(off)
	t.dirty = true
	s.logger.Debug("timer message recalled", "uniqKey", uniq, "offset", off)
	return success(req, nil, nil)
}
