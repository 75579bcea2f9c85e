package remoting

import (
	"container/list"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Receive-side limits: a budget for the bytes of frames being received
// across all connections of a server, a bounded time to deliver a large
// frame, and a clear answer to a frame over the size limit.
const (
	// DefaultMaxReceivingBytes is ServerOptions.MaxReceivingBytes' default.
	DefaultMaxReceivingBytes = 256 << 20
	// uncountedFrame: frames up to this size skip the budget, so heartbeats,
	// pulls and small sends never wait behind large frames. Their memory is
	// bounded by connections × this.
	uncountedFrame = 64 << 10
	// largeFrameTimeout bounds the delivery of a counted frame once its
	// memory is reserved, so a sender that stops half-way cannot pin it for
	// the whole idle timeout.
	largeFrameTimeout = 30 * time.Second
	// maxRefusedHeader is the largest header decoded to answer an
	// oversized frame.
	maxRefusedHeader = 64 << 10
)

// RecvBudget bounds the bytes of frames being received at once. A read
// loop reserves a frame's length before allocating it and releases it once
// the frame is complete; while the budget is spent, further large frames
// wait unread (TCP pushes back on their senders), first come first served.
// Safe for concurrent use.
type RecvBudget struct {
	mu      sync.Mutex
	total   int64
	avail   int64
	waiters list.List // of *budgetWaiter

	waits atomic.Int64 // reservations that had to wait (for metrics)
}

type budgetWaiter struct {
	n     int64
	ready chan struct{}
}

// NewRecvBudget returns a budget of total bytes.
func NewRecvBudget(total int64) *RecvBudget {
	return &RecvBudget{total: total, avail: total}
}

// acquire reserves n bytes (at most the whole budget), waiting until they
// are free or done closes. It reports whether it reserved them.
func (b *RecvBudget) acquire(n int64, done <-chan struct{}) (int64, bool) {
	n = min(n, b.total)
	b.mu.Lock()
	if b.waiters.Len() == 0 && b.avail >= n {
		b.avail -= n
		b.mu.Unlock()
		return n, true
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	e := b.waiters.PushBack(w)
	b.mu.Unlock()
	b.waits.Add(1)
	select {
	case <-w.ready:
		return n, true
	case <-done:
		b.mu.Lock()
		defer b.mu.Unlock()
		select {
		case <-w.ready: // granted meanwhile: give it back
			b.avail += n
			b.grantLocked()
		default:
			b.waiters.Remove(e)
			b.grantLocked() // a smaller waiter behind may fit now
		}
		return 0, false
	}
}

// release returns n reserved bytes.
func (b *RecvBudget) release(n int64) {
	b.mu.Lock()
	b.avail += n
	b.grantLocked()
	b.mu.Unlock()
}

// grantLocked wakes waiters in order while the first fits. Caller holds mu.
func (b *RecvBudget) grantLocked() {
	for e := b.waiters.Front(); e != nil; e = b.waiters.Front() {
		w := e.Value.(*budgetWaiter)
		if w.n > b.avail {
			return
		}
		b.avail -= w.n
		b.waiters.Remove(e)
		close(w.ready)
	}
}

// InUse returns the bytes reserved now.
func (b *RecvBudget) InUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total - b.avail
}

// Waits returns how many reservations have had to wait so far.
func (b *RecvBudget) Waits() int64 { return b.waits.Load() }

// readFrame reads one frame like ReadFrame, reserving a large frame's
// length in the connection's receive budget before allocating it, and
// answering a frame over the size limit before the connection closes.
func (c *Conn) readFrame() (*Command, error) {
	var lenBuf [4]byte
	if _, err := io.ReadFull(c.reader, lenBuf[:]); err != nil {
		return nil, err
	}
	n := int64(int32(binary.BigEndian.Uint32(lenBuf[:])))
	if n < minFrameLength {
		return nil, &FrameError{Reason: fmt.Sprintf("length field %d is below %d", n, minFrameLength)}
	}
	if n > int64(c.maxFrame) {
		if m := httpMethod(lenBuf); m != "" {
			// "GET " read as a length is 1.2 GB: say what it really is.
			return nil, &FrameError{Reason: fmt.Sprintf("an HTTP %s request arrived on this remoting port: "+
				"a client was given this server's address as an address server URL (--addrsrv wants an address server's http://host:port)", m)}
		}
		c.refuseOversized(n)
		return nil, fmt.Errorf("%w: %d > %d bytes", ErrFrameTooLarge, n, c.maxFrame)
	}
	if c.budget != nil && n > uncountedFrame {
		got, ok := c.budget.acquire(n, c.done)
		if !ok {
			return nil, ErrConnClosed
		}
		defer c.budget.release(got)
		if c.idleTimeout <= 0 || c.idleTimeout > largeFrameTimeout {
			c.netConn.SetReadDeadline(time.Now().Add(largeFrameTimeout))
			// The read loop resets the deadline only before an empty
			// buffer: restore the idle one for what follows this frame.
			defer func() {
				if c.idleTimeout > 0 {
					c.netConn.SetReadDeadline(time.Now().Add(c.idleTimeout))
				} else {
					c.netConn.SetReadDeadline(time.Time{})
				}
			}()
		}
	}
	frame := make([]byte, n)
	if _, err := io.ReadFull(c.reader, frame); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	// Binary ext fields stay undecoded until a receiver needs the map: see
	// Command.ExtMap and where the read loop hands commands on.
	return decodeFrame(frame, true)
}

// refuseOversized answers a request whose frame declares n bytes, more
// than the limit, with SYSTEM_ERROR and a remark that gives both sizes, so
// the client learns why the connection is about to close. It answers only
// when the header has already arrived with the length (as a client writes
// a frame at once): it neither waits for more bytes nor reads the body.
func (c *Conn) refuseOversized(n int64) {
	// Peek blocks for bytes not yet read: look at Buffered first.
	if c.reader.Buffered() < 4 {
		return
	}
	word, err := c.reader.Peek(4)
	if err != nil {
		return
	}
	headerLen := int(binary.BigEndian.Uint32(word) & 0xFFFFFF)
	if int64(headerLen) > n-4 || headerLen > maxRefusedHeader || c.reader.Buffered() < 4+headerLen {
		return
	}
	frame, err := c.reader.Peek(4 + headerLen)
	if err != nil {
		return
	}
	req, err := DecodeFrame(frame)
	if err != nil || req.IsResponse() || req.IsOneway() {
		return
	}
	resp := NewResponse(req, ResponseCodeSystemError,
		fmt.Sprintf("frame of %d bytes exceeds this server's limit of %d bytes; the connection is closed", n, c.maxFrame))
	if err := c.Respond(resp); err != nil {
		c.logger.Debug("answering an oversized frame failed", "err", err)
	}
}

// newServerBudget returns the budget for ServerOptions.MaxReceivingBytes
// (nil when negative: no bound).
func newServerBudget(total int64) *RecvBudget {
	if total < 0 {
		return nil
	}
	return NewRecvBudget(total)
}

// refuseConn closes a connection past ServerOptions.MaxConns, logging the
// first refusal and every 1000th after it.
func (s *Server) refuseConn(nc net.Conn) {
	nc.Close()
	if n := s.refused.Add(1); n%1000 == 1 {
		s.logger.Warn("connection refused: the connection cap is reached", "cap", s.opts.MaxConns, "peer", nc.RemoteAddr().String(), "refusedSoFar", n)
	}
}

// ReceivingBytes returns the bytes of large frames being received now
// (0 without a budget).
func (s *Server) ReceivingBytes() int64 {
	if s.budget == nil {
		return 0
	}
	return s.budget.InUse()
}

// ConnCount returns the open connections.
func (s *Server) ConnCount() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.conns)
}

// httpMethod names the HTTP method a frame's first four bytes start, or "".
func httpMethod(b [4]byte) string {
	methods := map[string]string{"GET ": "GET", "POST": "POST", "HEAD": "HEAD", "PUT ": "PUT",
		"DELE": "DELETE", "OPTI": "OPTIONS", "PATC": "PATCH"}
	return methods[string(b[:])]
}
