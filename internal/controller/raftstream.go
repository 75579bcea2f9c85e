package controller

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// raftHandshakeTimeout bounds a Raft connection's TLS handshake, so a peer
// that connects and says nothing holds no goroutine for long.
const raftHandshakeTimeout = 10 * time.Second

// tlsStream is the Raft transport's stream layer over mutual TLS whose
// certificates chain to the CA derived from the cluster secret
// (member.Secret.TLSConfig): only a holder of the secret can open a Raft
// connection or accept one, so a stranger's AppendEntries never reaches
// Raft (docs/security.md).
type tlsStream struct {
	net.Listener
	cfg *tls.Config
}

// newTLSStream listens on listen. As raft's TCP transport does, it refuses
// an address the other voters could not dial (0.0.0.0 or ::): the listen
// address is what this voter advertises.
func newTLSStream(listen string, cfg *tls.Config) (*tlsStream, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	if a, ok := ln.Addr().(*net.TCPAddr); !ok || a.IP == nil || a.IP.IsUnspecified() {
		ln.Close()
		return nil, fmt.Errorf("%s is not an address other voters can dial; give a specific host", ln.Addr())
	}
	return &tlsStream{Listener: ln, cfg: cfg}, nil
}

// Accept returns the next connection; its TLS handshake runs on the first
// read, in Raft's per-connection goroutine, within raftHandshakeTimeout.
func (s *tlsStream) Accept() (net.Conn, error) {
	c, err := s.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &handshakeConn{Conn: tls.Server(c, s.cfg)}, nil
}

// Dial opens a mutually authenticated connection to another voter.
func (s *tlsStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: timeout}, Config: s.cfg}
	return d.DialContext(ctx, "tcp", string(addr))
}

// handshakeConn completes the server side of the handshake, bounded, before
// the first read; a peer without a certificate of the cluster's CA fails it
// and its connection closes before Raft decodes a byte.
type handshakeConn struct {
	*tls.Conn
	once sync.Once
	err  error
}

func (c *handshakeConn) Read(p []byte) (int, error) {
	c.once.Do(func() {
		c.Conn.SetDeadline(time.Now().Add(raftHandshakeTimeout))
		c.err = c.Conn.Handshake()
		c.Conn.SetDeadline(time.Time{})
		if c.err != nil {
			c.Conn.Close()
		}
	})
	if c.err != nil {
		return 0, c.err
	}
	return c.Conn.Read(p)
}

// newRaftTransport is Raft's transport between voters: mutual TLS from the
// cluster secret when there is one, else plain TCP (loopback, or an
// operator's explicit --insecure).
func newRaftTransport(opts Options, hlog hclog.Logger) (*raft.NetworkTransport, error) {
	if opts.ClusterSecret == nil {
		return raft.NewTCPTransportWithLogger(opts.RaftListen, nil, 3, 5*time.Second, hlog)
	}
	cfg, err := opts.ClusterSecret.TLSConfig()
	if err != nil {
		return nil, err
	}
	stream, err := newTLSStream(opts.RaftListen, cfg)
	if err != nil {
		return nil, err
	}
	return raft.NewNetworkTransportWithLogger(stream, 3, 5*time.Second, hlog), nil
}
