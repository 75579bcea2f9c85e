package broker

import (
	"context"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/store"
)

// inlineSends are the plain sends of one connection that arrived in one
// socket read, kept by the inline send batch until its End stores them together
// (store.PutEach: one append-lock acquisition and one commit-log write for
// all). Only the connection's read goroutine touches it.
type inlineSends struct {
	reqs  []*remoting.Command
	msgs  []*protocol.MessageExt
	start []time.Time // when each request was read, for the send latency
	res   []store.PutResult
	errs  []error
}

// maxKeptSends bounds the sends kept before they are stored: a read of
// many tiny sends still goes to the store in bounded groups.
const maxKeptSends = 256

// inlineSendBatch is the InlineBatch of the send codes (see registerSendHandlers).
func (s *Server) inlineSendBatch() *remoting.InlineBatch {
	add := s.gated(s.metrics.instrumentSend(func(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
		return s.serveSend(ctx, c, req, s.keptSends(c))
	}))
	// serveSend, the metrics and the ACL read the header through
	// Command.ExtValue or ExtMap, so its fields may stay in their wire form.
	return &remoting.InlineBatch{Add: add, End: s.storeKeptSends, RawExt: true}
}

// keptSends returns c's inlineSends, creating it on the first send.
func (s *Server) keptSends(c *remoting.Conn) *inlineSends {
	if k, ok := c.ReadLocal().(*inlineSends); ok {
		return k
	}
	k := &inlineSends{}
	c.SetReadLocal(k)
	return k
}

// keep adds a send that is ready to store (checked, routed, encoded as m).
func (s *Server) keep(c *remoting.Conn, k *inlineSends, req *remoting.Command, m *protocol.MessageExt) {
	k.reqs = append(k.reqs, req)
	k.msgs = append(k.msgs, m)
	k.start = append(k.start, time.Now())
	if len(k.reqs) >= maxKeptSends {
		s.storeKeptSends(c)
	}
}

// storeKeptSends stores the sends c kept and queues their answers, with
// what putMessages checks for one message: the shutdown gate, the role and
// lease, and the replicas' acknowledgement.
func (s *Server) storeKeptSends(c *remoting.Conn) {
	k, _ := c.ReadLocal().(*inlineSends)
	if k == nil || len(k.reqs) == 0 {
		return
	}
	n := len(k.reqs)
	k.res = append(k.res[:0], make([]store.PutResult, n)...)
	k.errs = append(k.errs[:0], make([]error, n)...)
	s.putKept(k)
	now := time.Now()
	for i, req := range k.reqs {
		m := k.msgs[i]
		var resp *remoting.Command
		if err := k.errs[i]; err != nil {
			resp = s.putErrorResponse(req, m.Topic, err)
		} else {
			uniq, _ := protocol.Property(m.Properties, protocol.PropertyUniqClientMessageID)
			resp = s.sendResponse(req, k.res[i], k.res[i].MsgID, m.QueueID, uniq)
		}
		s.metrics.sendDone(c, req, resp, now.Sub(k.start[i]))
		if err := c.QueueResponse(req, resp); err != nil {
			s.logger.Debug("queueing a send response failed", "peer", c.RemoteAddr(), "err", err)
		}
	}
	// Drop the references: the requests' bodies must not outlive them.
	clear(k.reqs)
	clear(k.msgs)
	clear(k.res)
	clear(k.errs)
	k.reqs, k.msgs, k.start = k.reqs[:0], k.msgs[:0], k.start[:0]
}

// putKept stores k.msgs, setting k.res and k.errs.
func (s *Server) putKept(k *inlineSends) {
	fail := func(err error) {
		for i := range k.errs {
			k.errs[i] = err
		}
	}
	if !s.gate.enter() {
		fail(store.ErrClosed)
		return
	}
	defer s.gate.leave()
	s.writesInFlight.Add(1)
	defer s.writesInFlight.Add(-1)
	if err := s.repl.checkWritable(); err != nil {
		fail(err)
		return
	}
	ctx := s.remoting.Context()
	s.store.PutEach(ctx, k.msgs, k.res, k.errs)
	var stored, end int64
	for i, err := range k.errs {
		if err == nil {
			stored++
			end = max(end, k.res[i].End)
		}
	}
	if stored == 0 {
		return
	}
	s.putCount.Add(stored)
	if err := s.repl.waitReplicas(ctx, end); err != nil {
		for i := range k.errs {
			if k.errs[i] == nil {
				k.errs[i] = err
			}
		}
	}
}
