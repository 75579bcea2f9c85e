package remoting

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// ResponseCodeSystemError and ResponseCodeNotSupported are the two response
// codes the transport itself produces (RocketMQ's SYSTEM_ERROR and
// REQUEST_CODE_NOT_SUPPORTED).
const (
	ResponseCodeSystemError  int32 = 1
	ResponseCodeNotSupported int32 = 3
)

// ServerOptions configures a Server.
type ServerOptions struct {
	// Listen is the TCP address to bind, e.g. "127.0.1.1:9876".
	Listen string
	// MaxFrameSize caps an incoming frame; 0 means DefaultMaxFrameSize.
	MaxFrameSize int
	// IdleTimeout closes a connection that sends nothing for this long;
	// 0 means 120 s, RocketMQ's channel expiry.
	IdleTimeout time.Duration
	// WriteTimeout bounds one frame write; 0 means 10 s.
	WriteTimeout time.Duration
	// MaxInflight bounds the requests one connection may have in its
	// handlers at once; the read loop waits when it is reached. 0 means 1024.
	MaxInflight int
	// MaxUnsentBytes caps the response bytes one connection may have
	// queued but not yet written to the socket; while over it the
	// connection's requests are not read. 0 means DefaultMaxUnsentBytes,
	// negative means no cap.
	MaxUnsentBytes int
	// MaxReceivingBytes bounds the bytes of large frames (over 64 KiB) being
	// received across all connections; 0 means DefaultMaxReceivingBytes,
	// negative no bound (recvlimits.go).
	MaxReceivingBytes int64
	// MaxConns caps the open connections; one more is closed at once
	// (and logged). 0 means no cap.
	MaxConns int
	// Logger receives connection-level events; nil discards them.
	Logger *slog.Logger
	// TLS serves TLS on the listener (see tls.go); the zero value serves
	// plain connections only.
	TLS ServerTLS
}

// Server accepts remoting connections and dispatches requests to handlers by
// request code. Handlers run on their own goroutine per request, except
// those registered with HandleInline; a handler that returns nil may answer
// later with Conn.Respond (long polling does).
type Server struct {
	opts     ServerOptions
	listener net.Listener
	logger   *slog.Logger

	mu       sync.RWMutex
	handlers map[int32]Handler
	inline   map[int32]bool
	batches  map[int32]*InlineBatch // codes registered with HandleInlineBatch
	fallback Handler
	onConn   []func(*Conn)
	conns    map[*Conn]struct{}
	closing  bool
	budget   *RecvBudget  // nil when MaxReceivingBytes < 0
	refused  atomic.Int64 // connections closed by MaxConns

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewServer binds opts.Listen and returns a server that is not yet serving.
func NewServer(opts ServerOptions) (*Server, error) {
	if opts.MaxFrameSize <= 0 {
		opts.MaxFrameSize = DefaultMaxFrameSize
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = 120 * time.Second
	}
	if opts.MaxInflight <= 0 {
		opts.MaxInflight = 1024
	}
	if opts.MaxUnsentBytes == 0 {
		opts.MaxUnsentBytes = DefaultMaxUnsentBytes
	}
	if opts.MaxReceivingBytes == 0 {
		opts.MaxReceivingBytes = DefaultMaxReceivingBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.TLS.Mode != TLSDisabled && opts.TLS.Config == nil {
		return nil, fmt.Errorf("remoting: listen %s: %w", opts.Listen, errTLSNoCert)
	}
	ln, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return nil, fmt.Errorf("remoting: listen %s: %w", opts.Listen, err)
	}
	ln = TLSListener(ln, opts.TLS.Config, opts.TLS.Mode)
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{
		opts:     opts,
		listener: ln,
		logger:   opts.Logger,
		handlers: make(map[int32]Handler),
		inline:   make(map[int32]bool),
		batches:  make(map[int32]*InlineBatch),
		conns:    make(map[*Conn]struct{}),
		budget:   newServerBudget(opts.MaxReceivingBytes),
		ctx:      ctx,
		cancel:   cancel,
	}, nil
}

// Addr is the address the server is bound to.
func (s *Server) Addr() string { return s.listener.Addr().String() }

// Handle registers h for request code. Register handlers before Serve.
func (s *Server) Handle(code int32, h Handler) {
	s.mu.Lock()
	s.handlers[code] = h
	delete(s.inline, code)
	delete(s.batches, code)
	s.mu.Unlock()
}

// HandleInline registers h for request code to run on the connection's read
// goroutine instead of a goroutine of its own. The requests of one
// connection are then handled in arrival order, without a goroutine start
// and wake-up each, and the responses to all the frames one socket read
// returned leave in one write. h must not block: while it runs, nothing else
// is read from that connection. Register handlers before Serve.
func (s *Server) HandleInline(code int32, h Handler) {
	s.mu.Lock()
	s.handlers[code] = h
	s.inline[code] = true
	delete(s.batches, code)
	s.mu.Unlock()
}

// HandleDefault registers h for every code without a handler of its own;
// without it those get REQUEST_CODE_NOT_SUPPORTED.
func (s *Server) HandleDefault(h Handler) {
	s.mu.Lock()
	s.fallback = h
	s.mu.Unlock()
}

// OnConnect registers fn to run for every accepted connection before its
// first request is read.
func (s *Server) OnConnect(fn func(*Conn)) {
	s.mu.Lock()
	s.onConn = append(s.onConn, fn)
	s.mu.Unlock()
}

// Serve accepts connections until Close. It returns nil after Close.
func (s *Server) Serve() error {
	var backoff time.Duration
	for {
		nc, err := s.listener.Accept()
		if err != nil {
			s.mu.RLock()
			closing := s.closing
			s.mu.RUnlock()
			if closing || errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTemporary(err) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.logger.Warn("accept failed; retrying", "err", err, "backoff", backoff)
				time.Sleep(backoff)
				continue
			}
			return fmt.Errorf("remoting: accept: %w", err)
		}
		backoff = 0
		s.serveConn(nc)
	}
}

func isTemporary(err error) bool {
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

func (s *Server) serveConn(nc net.Conn) {
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
		tc.SetKeepAlive(true)
	}
	sem := make(chan struct{}, s.opts.MaxInflight)
	c := newConn(nc, connConfig{
		maxFrame:     s.opts.MaxFrameSize,
		maxUnsent:    max(s.opts.MaxUnsentBytes, 0),
		writeTimeout: s.opts.WriteTimeout,
		idleTimeout:  s.opts.IdleTimeout,
		logger:       s.logger,
		budget:       s.budget,
		dispatch: func(c *Conn, req *Command) {
			h, inline, batch := s.handler(req.Code)
			if batch == nil || !batch.RawExt {
				req.ExtMap() // handlers read ExtFields
			}
			if c.batch != batch {
				// Complete the open batch before anything else runs.
				c.endBatch()
				c.batch = batch
			}
			if inline {
				// The read loop flushes once its buffered frames are done.
				s.dispatch(c, req, h, c.enqueue)
				return
			}
			sem <- struct{}{}
			s.wg.Add(1)
			go func() {
				defer func() { <-sem; s.wg.Done() }()
				s.dispatch(c, req, h, c.Write)
			}()
		},
	})
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		nc.Close()
		return
	}
	if s.opts.MaxConns > 0 && len(s.conns) >= s.opts.MaxConns {
		s.mu.Unlock()
		s.refuseConn(nc)
		return
	}
	s.conns[c] = struct{}{}
	hooks := append([]func(*Conn){}, s.onConn...)
	// Counted while closing is known to be false: once Close has set it,
	// its wg.Wait may be running and no Add from zero is allowed.
	s.wg.Add(1)
	s.mu.Unlock()
	c.OnClose(func(c *Conn) {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
	})
	for _, fn := range hooks {
		fn(c)
	}
	go func() {
		defer s.wg.Done()
		c.readLoop()
	}()
}

// handler returns the handler for code, whether it runs inline, and the
// InlineBatch it belongs to (nil if none).
func (s *Server) handler(code int32) (Handler, bool, *InlineBatch) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	h, ok := s.handlers[code]
	if !ok {
		return s.fallback, false, nil
	}
	return h, s.inline[code], s.batches[code]
}

// dispatch runs h for req and passes its response to write (queue it, or
// queue and flush). A panicking handler costs that request a SYSTEM_ERROR,
// never the server.
func (s *Server) dispatch(c *Conn, req *Command, h Handler, write func(*Command) error) {
	var resp *Command
	func() {
		defer func() {
			if r := recover(); r != nil {
				s.logger.Error("handler panicked", "code", req.Code, "peer", c.RemoteAddr(), "panic", r, "stack", string(debug.Stack()))
				resp = NewResponse(req, ResponseCodeSystemError, fmt.Sprintf("internal error serving request code %d", req.Code))
			}
		}()
		if h == nil {
			resp = NewResponse(req, ResponseCodeNotSupported, fmt.Sprintf("request type %d not supported", req.Code))
			return
		}
		resp = h(s.ctx, c, req)
	}()
	if resp == nil || req.IsOneway() {
		return
	}
	prepareResponse(req, resp)
	if err := write(resp); err != nil {
		s.logger.Debug("writing response failed", "code", req.Code, "peer", c.RemoteAddr(), "err", err)
	}
	if resp.Encoded != nil {
		resp.Encoded()
	}
}

// Conns returns the open connections.
func (s *Server) Conns() []*Conn {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]*Conn, 0, len(s.conns))
	for c := range s.conns {
		out = append(out, c)
	}
	return out
}

// Close stops accepting, closes every connection and waits for handlers to
// return. It is safe to call more than once.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		s.wg.Wait()
		return nil
	}
	s.closing = true
	conns := make([]*Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	s.cancel()
	err := s.listener.Close()
	for _, c := range conns {
		c.Close()
	}
	s.wg.Wait()
	return err
}

// Context is cancelled when the server closes; handlers that park requests
// (long polling) watch it.
func (s *Server) Context() context.Context { return s.ctx }
