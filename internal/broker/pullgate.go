package broker

import (
	"github.com/zonemq/zonemq/internal/remoting"
)

// pullBuilders is how many pulls of one connection may build their answers
// at once (each up to maxPullBytes plus one message). Building is a copy
// from the page cache, so a few suffice for a consumer's many queues.
const pullBuilders = 4

// pullUnsentLimit is how many answer bytes a connection may leave unread
// before its next pull waits to be built: the bound on what one client
// that pipelines pulls and never reads can make the broker hold (issue 22:
// 150 pipelined 4 MiB pulls took a broker from 64 MB to 5.4 GB).
const pullUnsentLimit = remoting.DefaultMaxUnsentBytes

// pullGate bounds the pull answers one connection holds in memory: at most
// pullBuilders being built, none started while the connection has more
// than pullUnsentLimit bytes its peer has not read. A pull waiting here
// holds a goroutine but no answer.
type pullGate struct {
	slots chan struct{}
}

// pullGateKey keys a connection's gate in its values.
type pullGateKey struct{}

// enterPullGate waits for a build slot of c and for c's peer to have read
// its earlier answers; false once c has closed.
func (s *Server) enterPullGate(c *remoting.Conn) (*pullGate, bool) {
	g := s.connPullGate(c)
	select {
	case g.slots <- struct{}{}:
	case <-c.Done():
		return nil, false
	}
	if !c.WaitUnsentBelow(pullUnsentLimit) {
		g.leave()
		return nil, false
	}
	return g, true
}

func (g *pullGate) leave() { <-g.slots }

// connPullGate returns c's gate, made when c was accepted (broker.go's
// OnConnect hook), so a pull pays one read of the connection's values and no
// broker-wide lock.
func (s *Server) connPullGate(c *remoting.Conn) *pullGate {
	if g, ok := c.Value(pullGateKey{}).(*pullGate); ok {
		return g
	}
	return setPullGate(c) // a connection made before the hook (none in practice)
}

// setPullGate gives c its gate.
func setPullGate(c *remoting.Conn) *pullGate {
	g := &pullGate{slots: make(chan struct{}, pullBuilders)}
	c.SetValue(pullGateKey{}, g)
	return g
}
