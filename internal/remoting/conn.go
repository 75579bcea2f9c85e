package remoting

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// ErrConnClosed is returned for requests on a connection that has closed.
var ErrConnClosed = errors.New("remoting: connection closed")

// ErrTimeout is returned when a request's deadline passes before its response.
var ErrTimeout = errors.New("remoting: request timed out")

// Handler serves one request arriving on conn. It returns the response, or
// nil to send none (the request was oneway, or the handler answered later
// through conn.Respond).
type Handler func(ctx context.Context, conn *Conn, req *Command) *Command

// opaqueSeq numbers requests process-wide, like the RocketMQ clients.
var opaqueSeq atomic.Int32

func nextOpaque() int32 {
	for {
		if v := opaqueSeq.Add(1); v > 0 {
			return v
		}
		opaqueSeq.CompareAndSwap(opaqueSeq.Load(), 0)
	}
}

// Conn is one remoting connection. Either side may send requests on it: a
// broker pushes NOTIFY_CONSUMER_IDS_CHANGED down a client's connection. One
// goroutine reads; outgoing frames are queued and written in batches (see
// outQueue). Conn is safe for concurrent use.
type Conn struct {
	netConn      net.Conn
	remoteAddr   string // netConn.RemoteAddr().String(), formatted once: handlers ask per request
	reader       *bufio.Reader
	maxFrame     int
	maxUnsent    int // read loop pauses while more response bytes are unsent; 0: never
	writeTimeout time.Duration
	idleTimeout  time.Duration
	logger       *slog.Logger
	dispatch     func(*Conn, *Command) // requests arriving on this conn
	budget       *RecvBudget           // nil: large frames are not counted (recvlimits.go)

	out outQueue

	// batch is the InlineBatch whose End is still due (see endBatch); read
	// goroutine only.
	batch *InlineBatch
	// readLocal is the inline handlers' state (ReadLocal); read goroutine
	// only.
	readLocal any

	// answered are the asynchronous calls this read batch answered, told
	// together once the batch is read (see tellAnswered); read goroutine
	// only.
	answered []answer

	mu      sync.Mutex
	pending map[int32]*call
	closed  bool
	err     error
	done    chan struct{}
	// sweep is the timer of the asynchronous calls' deadlines, due at
	// sweepAt (zero: not armed); see asynccall.go. Guarded by mu.
	sweep   *time.Timer
	sweepAt time.Time

	onCloseMu sync.Mutex
	onClose   []func(*Conn)

	// Values lets owners hang state on the connection (a broker's client
	// registry keys on it). Guarded by mu.
	values map[any]any
}

// call is a request waiting for its response: a synchronous Invoke waits
// on resp; an asynchronous one (Send, InvokeAsync) is told through w, and
// its deadlines are kept by the connection's sweep (asynccall.go) instead
// of a timer per request.
type call struct {
	resp chan *Command
	w    Waiter
	code int32 // the request's code, for the timeout error
	// deadline is when an asynchronous call fails with ErrTimeout; slowAt,
	// when set, is when w.Slow runs if no answer has come (zero once it
	// ran). Guarded by Conn.mu.
	deadline time.Time
	slowAt   time.Time
}

// connConfig carries the settings a Conn needs from its owner.
type connConfig struct {
	maxFrame     int
	maxUnsent    int
	writeTimeout time.Duration
	idleTimeout  time.Duration
	logger       *slog.Logger
	dispatch     func(*Conn, *Command)
	budget       *RecvBudget
}

func newConn(nc net.Conn, cfg connConfig) *Conn {
	if cfg.maxFrame <= 0 {
		cfg.maxFrame = DefaultMaxFrameSize
	}
	if cfg.writeTimeout <= 0 {
		cfg.writeTimeout = 10 * time.Second
	}
	if cfg.logger == nil {
		cfg.logger = slog.New(slog.DiscardHandler)
	}
	remote := nc.RemoteAddr().String()
	c := &Conn{
		netConn:      nc,
		remoteAddr:   remote,
		reader:       bufio.NewReaderSize(nc, 64<<10),
		maxFrame:     cfg.maxFrame,
		maxUnsent:    cfg.maxUnsent,
		writeTimeout: cfg.writeTimeout,
		idleTimeout:  cfg.idleTimeout,
		logger:       cfg.logger.With("peer", remote),
		dispatch:     cfg.dispatch,
		budget:       cfg.budget,
		pending:      make(map[int32]*call),
		done:         make(chan struct{}),
	}
	c.out.drained.L = &c.out.mu
	return c
}

// RemoteAddr is the peer's address as "ip:port".
func (c *Conn) RemoteAddr() string { return c.remoteAddr }

// LocalAddr is this side's address as "ip:port".
func (c *Conn) LocalAddr() string { return c.netConn.LocalAddr().String() }

// Done is closed when the connection has closed.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err is why the connection closed, or nil while it is open.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// OnClose registers fn to run once after the connection closes. If it has
// closed already, fn runs at once.
func (c *Conn) OnClose(fn func(*Conn)) {
	c.onCloseMu.Lock()
	select {
	case <-c.done:
		c.onCloseMu.Unlock()
		fn(c)
		return
	default:
	}
	c.onClose = append(c.onClose, fn)
	c.onCloseMu.Unlock()
}

// SetValue stores v under k on the connection.
func (c *Conn) SetValue(k, v any) {
	c.mu.Lock()
	if c.values == nil {
		c.values = make(map[any]any)
	}
	c.values[k] = v
	c.mu.Unlock()
}

// ReadLocal returns what SetReadLocal stored: state of the connection's
// inline handlers (an InlineBatch's kept requests), which only its read
// goroutine touches, so it needs no lock. Call it only from inline handlers
// and InlineBatch.End.
func (c *Conn) ReadLocal() any { return c.readLocal }

// SetReadLocal stores v for ReadLocal; inline handlers and
// InlineBatch.End only.
func (c *Conn) SetReadLocal(v any) { c.readLocal = v }

// Value returns what SetValue stored under k.
func (c *Conn) Value(k any) any {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.values[k]
}

// readLoop reads frames until the connection fails. Responses complete their
// pending call; requests go to dispatch. Every complete frame one read
// returned is handled before the responses queued meanwhile (by inline
// handlers) are flushed, so they leave in one write.
func (c *Conn) readLoop() {
	var err error
	for {
		if !c.frameBuffered() {
			if err = c.sendQueued(); err != nil {
				break
			}
			// Only before a read that may reach the socket: the deadline
			// is per connection, resetting it per frame costs a timer
			// update each time.
			if c.idleTimeout > 0 && c.reader.Buffered() == 0 {
				c.netConn.SetReadDeadline(time.Now().Add(c.idleTimeout))
			}
		} else if c.maxUnsent > 0 && c.UnsentBytes() > c.maxUnsent {
			// Frames are buffered, but the peer has not read what it was
			// sent: answer nothing more until it does, however many
			// requests it pipelined in one write (issue 22: 150 pulls in
			// one write took a broker to 5.4 GB).
			if err = c.sendQueued(); err != nil {
				break
			}
		}
		var cmd *Command
		cmd, err = c.readFrame()
		if err != nil {
			var fe *FrameError
			if errors.As(err, &fe) || errors.Is(err, ErrFrameTooLarge) {
				c.logger.Warn("closing connection after a malformed frame", "err", err)
			} else if errors.Is(err, io.ErrUnexpectedEOF) {
				c.logger.Info("peer closed the connection in the middle of a frame")
			}
			break
		}
		if cmd.IsResponse() {
			c.complete(cmd)
			continue
		}
		if c.dispatch == nil {
			c.logger.Debug("dropping request: no handlers on this side", "code", cmd.Code)
			continue
		}
		c.dispatch(c, cmd)
	}
	c.endBatch()
	c.tellAnswered()
	c.closeWith(err)
}

// sendQueued ends the open batch, tells the answered calls, flushes what
// the read loop queued and waits while more than maxUnsent bytes are
// unsent; read goroutine only.
func (c *Conn) sendQueued() error {
	c.endBatch()
	c.tellAnswered()
	// No yield: the read loop has just queued all it had.
	if err := c.flush(false); err != nil {
		return err
	}
	if !c.waitUnsentBelow(c.maxUnsent) {
		return ErrConnClosed
	}
	return nil
}

// complete hands resp to the call waiting for it; read goroutine only.
func (c *Conn) complete(resp *Command) {
	c.mu.Lock()
	cl, ok := c.pending[resp.Opaque]
	if ok {
		delete(c.pending, resp.Opaque)
	}
	c.mu.Unlock()
	if !ok {
		c.logger.Debug("response for an unknown or expired request", "opaque", resp.Opaque, "code", resp.Code)
		return
	}
	if cl.w != nil {
		c.answered = append(c.answered, answer{w: cl.w, resp: resp})
		return
	}
	resp.ExtMap()
	cl.resp <- resp
}

// fail ends cl with err, off the read loop.
func (cl *call) fail(err error) {
	if cl.w != nil {
		// Never in the read loop: a waiter that invokes again on this
		// connection would wait for a response only the read loop reads.
		go cl.w.Answered(nil, err)
		return
	}
	close(cl.resp)
}

// Close closes the connection; pending requests fail with ErrConnClosed.
func (c *Conn) Close() error {
	c.closeWith(ErrConnClosed)
	return nil
}

func (c *Conn) closeWith(err error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	if err == nil {
		err = ErrConnClosed
	}
	c.err = err
	pending := c.pending
	c.pending = nil
	sweep := c.sweep
	c.mu.Unlock()

	c.netConn.Close()
	c.failOut(err)
	if sweep != nil {
		sweep.Stop()
	}
	for _, cl := range pending {
		cl.fail(fmt.Errorf("%w: %v", ErrConnClosed, err))
	}
	c.onCloseMu.Lock()
	close(c.done)
	hooks := c.onClose
	c.onClose = nil
	c.onCloseMu.Unlock()
	for _, fn := range hooks {
		fn(c)
	}
}

// Write sends cmd as one frame. Frames from many goroutines are queued and
// written together (see outQueue); a nil error means cmd was written or
// queued behind a write in progress. A write that fails closes the
// connection, which fails every pending call.
func (c *Conn) Write(cmd *Command) error {
	if err := c.enqueue(cmd); err != nil {
		return err
	}
	return c.flush(true)
}

// frameBuffered reports whether a whole frame is already in the read
// buffer, so the next ReadFrame will not touch the socket.
func (c *Conn) frameBuffered() bool {
	n := c.reader.Buffered()
	if n < 4 {
		return false
	}
	b, _ := c.reader.Peek(4) // cannot block: 4 bytes are buffered
	l := int64(int32(binary.BigEndian.Uint32(b)))
	return l >= 0 && l <= int64(n-4)
}

// Respond writes resp, the answer to a request that a handler deferred.
func (c *Conn) Respond(resp *Command) error {
	resp.Flag |= FlagResponse
	return c.Write(resp)
}

func (c *Conn) register(req *Command, cl *call) error {
	req.Opaque = nextOpaque()
	req.Flag &^= FlagResponse
	c.mu.Lock()
	if c.closed {
		err := c.err
		c.mu.Unlock()
		return fmt.Errorf("%w: %v", ErrConnClosed, err)
	}
	c.pending[req.Opaque] = cl
	if cl.w != nil {
		c.armSweepLocked(cl.nextEvent())
	}
	c.mu.Unlock()
	return nil
}

func (c *Conn) forget(opaque int32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.pending[opaque]; !ok {
		return false
	}
	delete(c.pending, opaque)
	return true
}

// Invoke sends req and waits for its response until ctx ends.
func (c *Conn) Invoke(ctx context.Context, req *Command) (*Command, error) {
	cl := &call{resp: make(chan *Command, 1)}
	if err := c.register(req, cl); err != nil {
		return nil, err
	}
	if err := c.Write(req); err != nil {
		c.forget(req.Opaque)
		return nil, err
	}
	select {
	case resp, ok := <-cl.resp:
		if !ok {
			return nil, fmt.Errorf("%w: %v", ErrConnClosed, c.Err())
		}
		return resp, nil
	case <-ctx.Done():
		c.forget(req.Opaque)
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("%w: code %d to %s", ErrTimeout, req.Code, c.RemoteAddr())
		}
		return nil, ctx.Err()
	}
}

// InvokeAsync sends req and calls cb exactly once, from another goroutine,
// with the response or an error (ErrTimeout after timeout). It returns
// without waiting for the write: a failed write closes the connection,
// which fails the call. Callbacks of responses read together run one after
// another on one goroutine (see Send): cb should not block for long.
func (c *Conn) InvokeAsync(req *Command, timeout time.Duration, cb func(*Command, error)) {
	c.Send(req, time.Now().Add(timeout), time.Time{}, funcWaiter(cb))
}

// InvokeOneway sends req flagged oneway; no response is awaited.
func (c *Conn) InvokeOneway(req *Command) error {
	req.Opaque = nextOpaque()
	req.Flag = (req.Flag &^ FlagResponse) | FlagOneway
	return c.Write(req)
}
