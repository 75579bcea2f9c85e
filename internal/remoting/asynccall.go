package remoting

import (
	"fmt"
	"sync"
	"time"
)

// Waiter receives the outcome of an asynchronous request (Conn.Send).
type Waiter interface {
	// Answered is called exactly once, with the response or with an error
	// (ErrTimeout, ErrConnClosed, …), never on the read loop. The
	// response's ext fields may still be in their wire form: read them with
	// Ext or ExtValue, or call ExtMap before using ExtFields. The answers
	// one read of the socket brought are told one after another on one
	// goroutine: a waiter that blocks delays the others of its batch, so
	// it should hand long work (a retry, a user callback that may block)
	// to a goroutine of its own.
	Answered(resp *Command, err error)
	// Slow is called at most once, on a goroutine of its own, when the
	// request has had no answer slowAfter after Send (only with slowAfter >
	// 0). Answered may come while Slow runs.
	Slow()
}

// funcWaiter adapts an InvokeAsync callback, which may read ExtFields: the
// response's fields are decoded into the map first.
type funcWaiter func(*Command, error)

func (f funcWaiter) Answered(resp *Command, err error) {
	if resp != nil {
		resp.ExtMap()
	}
	f(resp, err)
}
func (funcWaiter) Slow() {}

// answer is a response waiting to be told to its waiter.
type answer struct {
	w    Waiter
	resp *Command
}

// answerBatches recycles the slices tellAnswered hands over.
var answerBatches = sync.Pool{New: func() any { return new([]answer) }}

// Send writes req and tells w its outcome: the response, ErrTimeout at
// deadline, or the connection's failure. With a non-zero slowAt (before
// deadline) w.Slow runs if no answer has come by then. It returns without
// waiting for the write; a failed write closes the connection, which fails
// the call. The caller passes the times so that one clock reading serves
// a whole send (the clock is not free on every machine).
//
// Nothing per request is started: no goroutine, no timer. The read loop
// collects the answers of each batch of frames it reads and tells them on
// one goroutine (tellAnswered), and one timer per connection, armed for
// the earliest deadline, keeps every asynchronous call's timeout and slow
// mark (sweepCalls). Under load a connection thus spends a goroutine per
// read and a timer wake-up per suspicion period instead of a goroutine and
// two timers per request.
func (c *Conn) Send(req *Command, deadline, slowAt time.Time, w Waiter) {
	cl := &call{w: w, code: req.Code, deadline: deadline}
	if slowAt.Before(deadline) {
		cl.slowAt = slowAt
	}
	if err := c.register(req, cl); err != nil {
		go w.Answered(nil, err)
		return
	}
	// Written behind the caller (flushBehind): one goroutine issuing many
	// asynchronous requests gets them written in batches.
	if err := c.enqueue(req); err != nil {
		if c.forget(req.Opaque) {
			go w.Answered(nil, err)
		}
		return
	}
	c.flushBehind()
}

// nextEvent is when the sweep must next look at cl.
func (cl *call) nextEvent() time.Time {
	if !cl.slowAt.IsZero() {
		return cl.slowAt
	}
	return cl.deadline
}

// armSweepLocked makes the sweep run at at, unless it is already due
// earlier. c.mu is held.
func (c *Conn) armSweepLocked(at time.Time) {
	if !c.sweepAt.IsZero() && !at.Before(c.sweepAt) {
		return
	}
	c.sweepAt = at
	if c.sweep == nil {
		c.sweep = time.AfterFunc(time.Until(at), c.sweepCalls)
		return
	}
	c.sweep.Reset(time.Until(at))
}

// sweepCalls fails the asynchronous calls past their deadline, marks the
// slow ones, and re-arms itself for the earliest event left.
func (c *Conn) sweepCalls() {
	now := time.Now()
	var expired []*call
	var slow []Waiter
	c.mu.Lock()
	c.sweepAt = time.Time{}
	if c.closed {
		c.mu.Unlock()
		return
	}
	var next time.Time
	for opaque, cl := range c.pending {
		if cl.w == nil {
			continue // a synchronous Invoke: its context bounds it
		}
		if !now.Before(cl.deadline) {
			delete(c.pending, opaque)
			expired = append(expired, cl)
			continue
		}
		if !cl.slowAt.IsZero() && !now.Before(cl.slowAt) {
			slow = append(slow, cl.w)
			cl.slowAt = time.Time{}
		}
		if at := cl.nextEvent(); next.IsZero() || at.Before(next) {
			next = at
		}
	}
	if !next.IsZero() {
		c.armSweepLocked(next)
	}
	c.mu.Unlock()
	for _, cl := range expired {
		go cl.w.Answered(nil, fmt.Errorf("%w: code %d to %s", ErrTimeout, cl.code, c.RemoteAddr()))
	}
	for _, w := range slow {
		go w.Slow()
	}
}

// tellAnswered hands the answers this read batch collected to one
// goroutine that tells their waiters in the order they arrived; read
// goroutine only.
func (c *Conn) tellAnswered() {
	if len(c.answered) == 0 {
		return
	}
	batch := c.answered
	next := answerBatches.Get().(*[]answer)
	c.answered = (*next)[:0]
	go tellAll(batch, next)
}

// tellAll tells each waiter of batch its answer, then returns batch's
// array to the pool in holder (the pool's element tellAnswered took in
// its place, so recycling allocates nothing).
func tellAll(batch []answer, holder *[]answer) {
	for i, a := range batch {
		a.w.Answered(a.resp, nil)
		batch[i] = answer{}
	}
	*holder = batch[:0]
	answerBatches.Put(holder)
}
