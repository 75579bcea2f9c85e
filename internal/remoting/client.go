package remoting

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"
)

// ClientOptions configures a Client.
type ClientOptions struct {
	// DialTimeout bounds connection set-up; 0 means 3 s.
	DialTimeout time.Duration
	// MaxFrameSize caps an incoming frame; 0 means DefaultMaxFrameSize.
	MaxFrameSize int
	// WriteTimeout bounds one frame write; 0 means 10 s.
	WriteTimeout time.Duration
	// IdleTimeout closes a connection that receives nothing for this long; 0
	// means never (callers keep connections warm with heartbeats).
	IdleTimeout time.Duration
	// Logger receives connection-level events; nil discards them.
	Logger *slog.Logger
	// Dial replaces net.Dialer.DialContext, e.g. to count dials in tests.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Client keeps one connection per remote address and sends requests on it.
// Requests from the remote side (a broker's NOTIFY_CONSUMER_IDS_CHANGED) go to
// the handlers registered with Handle. Client is safe for concurrent use.
type Client struct {
	opts   ClientOptions
	logger *slog.Logger

	mu       sync.Mutex
	conns    map[string]*Conn
	dialing  map[string]*dialCall
	handlers map[int32]Handler
	closed   bool
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

type dialCall struct {
	done chan struct{}
	conn *Conn
	err  error
}

// ErrClientClosed is returned by a Client after Close.
var ErrClientClosed = errors.New("remoting: client closed")

// NewClient returns a client with no connections yet.
func NewClient(opts ClientOptions) *Client {
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = 3 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Dial == nil {
		d := &net.Dialer{KeepAlive: 15 * time.Second}
		opts.Dial = d.DialContext
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Client{
		opts:     opts,
		logger:   opts.Logger,
		conns:    make(map[string]*Conn),
		dialing:  make(map[string]*dialCall),
		handlers: make(map[int32]Handler),
		ctx:      ctx,
		cancel:   cancel,
	}
}

// Handle registers h for requests with code that the remote side sends.
func (c *Client) Handle(code int32, h Handler) {
	c.mu.Lock()
	c.handlers[code] = h
	c.mu.Unlock()
}

// Conn returns the open connection to addr, dialling one if needed.
// Concurrent callers share one dial.
func (c *Client) Conn(ctx context.Context, addr string) (*Conn, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClientClosed
	}
	if cn, ok := c.conns[addr]; ok {
		c.mu.Unlock()
		return cn, nil
	}
	if d, ok := c.dialing[addr]; ok {
		c.mu.Unlock()
		select {
		case <-d.done:
			return d.conn, d.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	d := &dialCall{done: make(chan struct{})}
	c.dialing[addr] = d
	c.mu.Unlock()

	d.conn, d.err = c.dial(addr)

	c.mu.Lock()
	delete(c.dialing, addr)
	if d.err == nil {
		select {
		case <-d.conn.Done():
			// The peer closed it before it was pooled; its close hook has
			// already run, so pooling it now would keep a dead connection.
			d.conn, d.err = nil, fmt.Errorf("%w: closed right after dialling %s", ErrConnClosed, addr)
		default:
			if c.closed {
				d.conn.Close()
				d.conn, d.err = nil, ErrClientClosed
			} else {
				c.conns[addr] = d.conn
			}
		}
	}
	c.mu.Unlock()
	close(d.done)
	return d.conn, d.err
}

// ConnIfOpen returns the open connection to addr without dialling.
func (c *Client) ConnIfOpen(addr string) (*Conn, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cn, ok := c.conns[addr]
	return cn, ok
}

func (c *Client) dial(addr string) (*Conn, error) {
	ctx, cancel := context.WithTimeout(c.ctx, c.opts.DialTimeout)
	defer cancel()
	nc, err := c.opts.Dial(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("remoting: dial %s: %w", addr, err)
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	cn := newConn(nc, connConfig{
		maxFrame:     c.opts.MaxFrameSize,
		writeTimeout: c.opts.WriteTimeout,
		idleTimeout:  c.opts.IdleTimeout,
		logger:       c.logger,
		dispatch:     c.dispatch,
	})
	cn.OnClose(func(cn *Conn) {
		c.mu.Lock()
		if c.conns[addr] == cn {
			delete(c.conns, addr)
		}
		c.mu.Unlock()
	})
	// Count the read loop only while the client is open: Close may already
	// be in wg.Wait, and an Add from zero must not race with it.
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		cn.Close() // runs the OnClose hook above, which takes c.mu
		return nil, ErrClientClosed
	}
	c.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		cn.readLoop()
	}()
	return cn, nil
}

func (c *Client) dispatch(cn *Conn, req *Command) {
	req.ExtMap() // handlers read ExtFields
	c.mu.Lock()
	h := c.handlers[req.Code]
	c.mu.Unlock()
	if h == nil {
		c.logger.Debug("no handler for a request from the remote side", "code", req.Code, "peer", cn.RemoteAddr())
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		resp := h(c.ctx, cn, req)
		if resp != nil && !req.IsOneway() {
			resp.Opaque = req.Opaque
			resp.Flag |= FlagResponse
			resp.Serialize = req.Serialize
			cn.Write(resp)
		}
	}()
}

// Invoke sends req to addr and waits for the response until ctx ends.
func (c *Client) Invoke(ctx context.Context, addr string, req *Command) (*Command, error) {
	cn, err := c.Conn(ctx, addr)
	if err != nil {
		return nil, err
	}
	return cn.Invoke(ctx, req)
}

// InvokeAsync sends req to addr and calls cb once with the outcome.
func (c *Client) InvokeAsync(ctx context.Context, addr string, req *Command, timeout time.Duration, cb func(*Command, error)) {
	cn, err := c.Conn(ctx, addr)
	if err != nil {
		go cb(nil, err)
		return
	}
	cn.InvokeAsync(req, timeout, cb)
}

// InvokeOneway sends req to addr flagged oneway.
func (c *Client) InvokeOneway(ctx context.Context, addr string, req *Command) error {
	cn, err := c.Conn(ctx, addr)
	if err != nil {
		return err
	}
	return cn.InvokeOneway(req)
}

// CloseConn closes the connection to addr, if any, so the next call dials
// afresh (used after a timeout: the peer may be hung).
func (c *Client) CloseConn(addr string) {
	c.mu.Lock()
	cn := c.conns[addr]
	delete(c.conns, addr)
	c.mu.Unlock()
	if cn != nil {
		cn.Close()
	}
}

// Addrs lists the addresses with an open connection.
func (c *Client) Addrs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.conns))
	for a := range c.conns {
		out = append(out, a)
	}
	return out
}

// Close closes every connection and waits for the read loops and handlers.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	conns := c.conns
	c.conns = map[string]*Conn{}
	c.mu.Unlock()
	c.cancel()
	for _, cn := range conns {
		cn.Close()
	}
	c.wg.Wait()
	return nil
}
