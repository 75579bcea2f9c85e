package testutil

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// Proxy is a loopback TCP proxy that failure tests put between two processes
// to cut, hang or slow the link on demand (nats-server's netProxy, grown a
// hang mode). Every accepted connection is paired with a fresh connection to
// the target; bytes are copied both ways.
//
// Modes:
//   - Cut: a partition. Every current connection is closed and new ones are
//     reset as soon as they are accepted, until Restore.
//   - Blackhole: a hang. Connections stay open (new ones are accepted too) but
//     no byte is forwarded in either direction; the peers see silence, as from
//     a frozen process or a network that drops packets. Bytes already read are
//     held, not dropped, and delivered after Blackhole(false) or Restore,
//     as TCP would retransmit them once the network heals.
//   - SetLatency: every chunk of bytes is held for the given time before it is
//     forwarded (serially per direction, so it also lowers throughput).
//
// Proxy is safe for concurrent use. Close stops every goroutine it started.
type Proxy struct {
	target   string
	listener net.Listener

	mu        sync.Mutex
	conns     map[*proxyConn]struct{}
	cut       bool
	blackhole bool
	latency   time.Duration
	closed    bool
	changed   chan struct{} // closed and replaced whenever a mode changes

	wg sync.WaitGroup
}

// proxyConn is one client connection and its partner to the target.
type proxyConn struct {
	client, server net.Conn
	once           sync.Once
	done           chan struct{}
}

func (pc *proxyConn) close() {
	pc.once.Do(func() {
		close(pc.done)
		pc.client.Close()
		pc.server.Close()
	})
}

// NewProxy listens on listen (e.g. "127.0.1.1:0") and forwards every
// connection to target.
func NewProxy(listen, target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("proxy: listen %s: %w", listen, err)
	}
	p := &Proxy{
		target:   target,
		listener: ln,
		conns:    make(map[*proxyConn]struct{}),
		changed:  make(chan struct{}),
	}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr is the address clients dial instead of the target.
func (p *Proxy) Addr() string { return p.listener.Addr().String() }

// Target is the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// Cut closes every current connection and resets new ones until Restore:
// a partition between the two sides.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.cut = true
	conns := p.takeConnsLocked()
	p.notifyLocked()
	p.mu.Unlock()
	for _, pc := range conns {
		pc.close()
	}
}

// Restore ends Cut and Blackhole: new connections are forwarded again and
// held bytes flow. The latency set by SetLatency stays.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.cut = false
	p.blackhole = false
	p.notifyLocked()
	p.mu.Unlock()
}

// Blackhole turns hang mode on or off. While on, connections stay open but
// nothing is forwarded.
func (p *Proxy) Blackhole(on bool) {
	p.mu.Lock()
	p.blackhole = on
	p.notifyLocked()
	p.mu.Unlock()
}

// SetLatency delays every forwarded chunk by d (0 turns it off).
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	p.latency = max(d, 0)
	p.notifyLocked()
	p.mu.Unlock()
}

// Conns is the number of proxied connections open now.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// Close stops listening, closes every connection and waits for every
// goroutine the proxy started. It is safe to call more than once.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.wg.Wait()
		return nil
	}
	p.closed = true
	conns := p.takeConnsLocked()
	p.notifyLocked()
	p.mu.Unlock()
	err := p.listener.Close()
	for _, pc := range conns {
		pc.close()
	}
	p.wg.Wait()
	return err
}

// takeConnsLocked empties the connection set and returns what it held.
// Caller holds p.mu.
func (p *Proxy) takeConnsLocked() []*proxyConn {
	out := make([]*proxyConn, 0, len(p.conns))
	for pc := range p.conns {
		out = append(out, pc)
	}
	clear(p.conns)
	return out
}

// notifyLocked wakes every goroutine waiting for a mode change.
// Caller holds p.mu.
func (p *Proxy) notifyLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		client, err := p.listener.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		p.mu.Lock()
		refuse := p.cut || p.closed
		p.mu.Unlock()
		if refuse {
			resetConn(client)
			continue
		}
		// Dial on its own goroutine: a slow target must not stall accepts.
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.connect(client)
		}()
	}
}

// resetConn closes c with an RST, the nearest a listener gets to refusing.
func resetConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

func (p *Proxy) connect(client net.Conn) {
	server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		resetConn(client)
		return
	}
	pc := &proxyConn{client: client, server: server, done: make(chan struct{})}
	p.mu.Lock()
	if p.cut || p.closed {
		p.mu.Unlock()
		resetConn(client)
		server.Close()
		return
	}
	p.conns[pc] = struct{}{}
	p.wg.Add(2)
	p.mu.Unlock()
	go p.pipeLoop(pc, client, server)
	go p.pipeLoop(pc, server, client)
}

// pipeLoop copies src to dst until either side fails, then closes the pair.
func (p *Proxy) pipeLoop(pc *proxyConn, src, dst net.Conn) {
	defer p.wg.Done()
	defer func() {
		pc.close()
		p.mu.Lock()
		delete(p.conns, pc)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.waitForward(pc) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// waitForward blocks while the proxy is in hang mode, then applies the
// latency. It reports false when the connection or the proxy closed meanwhile.
func (p *Proxy) waitForward(pc *proxyConn) bool {
	var latency time.Duration
	for {
		p.mu.Lock()
		hold, changed := p.blackhole, p.changed
		latency = p.latency
		p.mu.Unlock()
		if !hold {
			break
		}
		select {
		case <-changed:
		case <-pc.done:
			return false
		}
	}
	if latency > 0 {
		t := time.NewTimer(latency)
		defer t.Stop()
		select {
		case <-t.C:
		case <-pc.done:
			return false
		}
	}
	return true
}
