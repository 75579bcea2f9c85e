package remoting

import (
	"fmt"
	"runtime/debug"
)

// InlineBatch serves request codes whose requests a connection collects and
// completes together, on its read goroutine: Add takes each request as it is
// read, End completes all those Add kept. A broker uses it to store all the
// sends one socket read brought with one append (one lock acquisition and one
// commit-log write) instead of one each.
type InlineBatch struct {
	// Add serves one request, like an inline Handler: it returns the
	// response, or nil when it has kept the request for End to answer (or
	// the request was oneway). It must not block.
	Add Handler
	// End answers every request Add kept since the last End, with
	// Conn.QueueResponse. It runs on the read goroutine once the frames one
	// read returned are handled (before their responses are written),
	// before a request that this batch does not serve is dispatched, and
	// when the connection closes; so a connection's requests still take
	// effect in arrival order. It must not block for long.
	End func(c *Conn)
	// RawExt says Add and End read the requests' ext fields only through
	// Command.Ext, ExtValue or ExtMap, so a binary header's fields are not
	// decoded into a map for them (most of a send header's decoding cost).
	RawExt bool
}

// HandleInlineBatch registers b for every code in codes: their requests run
// inline (see HandleInline) and are completed in groups by b.End. Register
// handlers before Serve.
func (s *Server) HandleInlineBatch(codes []int32, b *InlineBatch) {
	s.mu.Lock()
	for _, code := range codes {
		s.handlers[code] = b.Add
		s.inline[code] = true
		s.batches[code] = b
	}
	s.mu.Unlock()
}

// QueueResponse queues resp as the answer to req without writing it: for an
// InlineBatch's End, whose responses the read loop writes right after (one
// write for the whole batch). Nothing is queued for a oneway request.
func (c *Conn) QueueResponse(req, resp *Command) error {
	if req.IsOneway() {
		return nil
	}
	prepareResponse(req, resp)
	return c.enqueue(resp)
}

// prepareResponse marks resp as the answer to req.
func prepareResponse(req, resp *Command) {
	resp.Opaque = req.Opaque
	resp.Flag |= FlagResponse
	resp.Serialize = req.Serialize
}

// endBatch runs the End of the connection's open batch, if any. A panic in
// End closes the connection: the requests it held cannot be answered one by
// one any more, and their clients see the connection fail instead of
// waiting for their timeouts. Read goroutine only.
func (c *Conn) endBatch() {
	b := c.batch
	if b == nil {
		return
	}
	c.batch = nil
	defer func() {
		if r := recover(); r != nil {
			c.logger.Error("batch handler panicked; closing the connection", "panic", r, "stack", string(debug.Stack()))
			c.closeWith(fmt.Errorf("remoting: batch handler panicked: %v", r))
		}
	}()
	b.End(c)
}

// FlushQueued writes the responses queued with QueueResponse outside the
// read goroutine (which writes what it queued itself): for a server that
// answers requests of many connections together, such as the sends one
// fsync made durable, with one write per connection.
func (c *Conn) FlushQueued() error { return c.flush(false) }
