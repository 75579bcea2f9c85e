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
	// tokens, with --flush sync or --replication sync, holds a token per
	// send of this connection kept or waiting (syncacks.go): at maxPendingSends the
	// read goroutine waits, as it waited for a free handler goroutine
	// before, so a client that never stops sending cannot pile up requests
	// in the broker. nil when sends are answered once stored.
	tokens chan struct{}
}

// maxPendingSends bounds the sends of one connection waiting for their
// fsync or replicas; remoting's default MaxInflight, the bound of a
// connection's requests served on goroutines.
const maxPendingSends = 1024

// takeToken takes a pending-send token for c, storing what k keeps first
// when none is free (so the groups holding them can be answered), and
// waiting then; it gives up once c is closed.
func (s *Server) takeToken(c *remoting.Conn, k *inlineSends) {
	select {
	case k.tokens <- struct{}{}:
		return
	default:
	}
	s.storeKeptSends(c)
	select {
	case k.tokens <- struct{}{}:
	case <-c.Done():
	}
}

// returnTokens returns n tokens (fewer when the connection closed while
// some could not be taken).
func (k *inlineSends) returnTokens(n int) {
	if k.tokens == nil {
		return
	}
	for range n {
		select {
		case <-k.tokens:
		default:
			return
		}
	}
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
	if s.deferSendAcks() {
		k.tokens = make(chan struct{}, maxPendingSends)
	}
	c.SetReadLocal(k)
	return k
}

// deferSendAcks reports whether plain sends are answered by syncAcks once
// their wait is over rather than when stored: with --flush sync or
// --replication sync.
func (s *Server) deferSendAcks() bool { return s.syncAcks != nil }

// keep adds a send that is ready to store (checked, routed, encoded as m).
func (s *Server) keep(c *remoting.Conn, k *inlineSends, req *remoting.Command, m *protocol.MessageExt) {
	if k.tokens != nil {
		s.takeToken(c, k)
	}
	k.reqs = append(k.reqs, req)
	k.msgs = append(k.msgs, m)
	k.start = append(k.start, time.Now())
	if len(k.reqs) >= maxKeptSends {
		s.storeKeptSends(c)
	}
}

// storeKeptSends stores the sends c kept and queues their answers, with
// what putMessages checks for one message: the shutdown gate, the role and
// lease, and the replicas' acknowledgement. With --flush sync or
// --replication sync the answers of the sends stored wait in syncAcks.
func (s *Server) storeKeptSends(c *remoting.Conn) {
	k, _ := c.ReadLocal().(*inlineSends)
	if k == nil || len(k.reqs) == 0 {
		return
	}
	n := len(k.reqs)
	k.res = append(k.res[:0], make([]store.PutResult, n)...)
	k.errs = append(k.errs[:0], make([]error, n)...)
	var g *ackGroup
	if end := s.putKept(k); end > 0 {
		g = s.syncAcks.group(c, k, end) // holds putKept's gate entry and write in flight
	}
	now := time.Now()
	for i, req := range k.reqs {
		m := k.msgs[i]
		var resp *remoting.Command
		if err := k.errs[i]; err != nil {
			resp = s.putErrorResponse(req, m.Topic, err)
		} else {
			uniq, _ := protocol.Property(m.Properties, protocol.PropertyUniqClientMessageID)
			resp = s.sendResponse(req, k.res[i], k.res[i].MsgID, m.QueueID, uniq)
			if g != nil {
				g.reqs = append(g.reqs, req)
				g.resps = append(g.resps, resp)
				g.start = append(g.start, k.start[i])
				continue
			}
		}
		k.returnTokens(1)
		s.metrics.sendDone(c, req, resp, now.Sub(k.start[i]))
		if err := c.QueueResponse(req, resp); err != nil {
			s.logger.Debug("queueing a send response failed", "peer", c.RemoteAddr(), "err", err)
		}
	}
	if g != nil {
		s.syncAcks.add(g)
	}
	// Drop the references: the requests' bodies must not outlive them.
	clear(k.reqs)
	clear(k.msgs)
	clear(k.res)
	clear(k.errs)
	k.reqs, k.msgs, k.start = k.reqs[:0], k.msgs[:0], k.start[:0]
}

// putKept stores k.msgs, setting k.res and k.errs. With deferSendAcks it
// does not wait: it returns the commit-log offset that must be durable (and
// replicated) before the stored sends may be answered, and leaves its entry
// of the shutdown gate to the caller, who hands it to their ackGroup (0 and
// no gate entry when nothing was stored).
func (s *Server) putKept(k *inlineSends) (flushTo int64) {
	fail := func(err error) {
		for i := range k.errs {
			k.errs[i] = err
		}
	}
	if !s.gate.enter() {
		fail(store.ErrClosed)
		return 0
	}
	// The write stays in flight until it is answered, so a switchover
	// (waitCaughtUp) waits for the answers as it did for waitReplicas.
	s.writesInFlight.Add(1)
	defer func() {
		if flushTo == 0 {
			s.writesInFlight.Add(-1)
			s.gate.leave()
		}
	}()
	if err := s.repl.checkWritable(); err != nil {
		fail(err)
		return 0
	}
	ctx := s.remoting.Context()
	var end int64
	if s.deferSendAcks() {
		end = s.store.AppendEach(k.msgs, k.res, k.errs)
	} else {
		s.store.PutEach(ctx, k.msgs, k.res, k.errs)
	}
	var stored int64
	for i, err := range k.errs {
		if err == nil {
			stored++
			end = max(end, k.res[i].End)
		}
	}
	if stored == 0 {
		return 0
	}
	s.putCount.Add(stored)
	if s.deferSendAcks() {
		return end // syncAcks asks the replicas and the lease when it answers
	}
	if err := s.repl.waitReplicas(ctx, end); err != nil {
		for i := range k.errs {
			if k.errs[i] == nil {
				k.errs[i] = err
			}
		}
	}
	return 0
}
