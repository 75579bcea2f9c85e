package metrics

import (
	"net"
	"sync"
	"sync/atomic"
)

// LimitListener accepts at most n connections at once; one beyond that is
// closed at once (the peer sees a reset) rather than queued, so idle
// keep-alive connections cannot use up a server's descriptors: 1,009 idle
// connections to /metrics exhausted a broker's (issue 22). The HTTP
// servers pair it with idle and header timeouts, which free the slots.
func LimitListener(ln net.Listener, n int) *Limited {
	return &Limited{Listener: ln, max: int64(n)}
}

// Limited is a listener with a cap on open connections.
type Limited struct {
	net.Listener
	max     int64
	open    atomic.Int64
	refused atomic.Int64
}

// Accept returns the next connection within the cap.
func (l *Limited) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) > l.max {
			l.open.Add(-1)
			l.refused.Add(1)
			c.Close()
			continue
		}
		return &limitedConn{Conn: c, l: l}, nil
	}
}

// Open is how many accepted connections are open now.
func (l *Limited) Open() int64 { return l.open.Load() }

// Refused is how many connections were closed for being over the cap.
func (l *Limited) Refused() int64 { return l.refused.Load() }

type limitedConn struct {
	net.Conn
	l    *Limited
	once sync.Once
}

func (c *limitedConn) Close() error {
	c.once.Do(func() { c.l.open.Add(-1) })
	return c.Conn.Close()
}
