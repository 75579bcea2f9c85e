package proxy

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"log/slog"
	"math/big"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// sniffTimeout bounds how long a new connection may take to send its first
// byte (and, with TLS, to finish its handshake).
const sniffTimeout = 10 * time.Second

// maxSniffing bounds the connections being sniffed at once; more wait in
// the kernel's accept queue.
const maxSniffing = 256

// maxConns bounds the open client connections; one more is closed at once.
const maxConns = 10000

// sniffListener serves plaintext and TLS on one port, as the RocketMQ 5
// clients expect (they default to TLS; plaintext is one setting away): the
// first byte of a TLS connection is a handshake record (0x16), and HTTP/2's
// preface starts with 'P'. Connections are sniffed on their own goroutines,
// so a silent one never holds up Accept.
type sniffListener struct {
	inner  net.Listener
	tls    *tls.Config
	logger *slog.Logger

	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
	slots chan struct{}
	wg    sync.WaitGroup
	open  atomic.Int64 // client connections open now
}

func newSniffListener(inner net.Listener, cfg *tls.Config, logger *slog.Logger) *sniffListener {
	l := &sniffListener{inner: inner, tls: cfg, logger: logger, conns: make(chan net.Conn),
		done: make(chan struct{}), slots: make(chan struct{}, maxSniffing)}
	l.wg.Add(1)
	go l.acceptLoop()
	return l
}

func (l *sniffListener) acceptLoop() {
	defer l.wg.Done()
	for {
		select {
		case l.slots <- struct{}{}:
		case <-l.done:
			return
		}
		c, err := l.inner.Accept()
		if err == nil && l.open.Load() >= maxConns {
			l.logger.Warn("connection refused: the access point has as many as it allows", "remote", c.RemoteAddr().String(), "max", maxConns)
			c.Close()
			<-l.slots
			continue
		}
		if err != nil {
			<-l.slots
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			select {
			case <-l.done: // closed
			default:
				l.logger.Error("accept failed; the access point stops serving", "err", err)
				l.Close()
			}
			return
		}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			sc, ok := l.sniff(c)
			<-l.slots
			if !ok {
				c.Close()
				return
			}
			select {
			case l.conns <- sc:
			case <-l.done:
				sc.Close()
			}
		}()
	}
}

// sniff reads the first byte and returns the connection to serve: a TLS
// server connection with its handshake done, or the plain one with the
// byte put back.
func (l *sniffListener) sniff(c net.Conn) (net.Conn, bool) {
	c.SetDeadline(time.Now().Add(sniffTimeout))
	br := bufio.NewReaderSize(c, 512)
	first, err := br.Peek(1)
	if err != nil {
		return nil, false
	}
	// From here the connection counts as open until it is closed.
	l.open.Add(1)
	pc := &peekedConn{Conn: c, r: br, release: func() { l.open.Add(-1) }}
	if first[0] != 0x16 {
		c.SetDeadline(time.Time{})
		return pc, true
	}
	tc := tls.Server(pc, l.tls)
	ctx, cancel := context.WithTimeout(context.Background(), sniffTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		l.logger.Debug("TLS handshake failed", "remote", c.RemoteAddr().String(), "err", err)
		pc.Close()
		return nil, false
	}
	c.SetDeadline(time.Time{})
	return tc, true
}

func (l *sniffListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *sniffListener) Close() error {
	var err error
	l.once.Do(func() {
		close(l.done)
		err = l.inner.Close()
	})
	return err
}

func (l *sniffListener) Addr() net.Addr { return l.inner.Addr() }

// peekedConn is a connection whose first bytes were read into r; release
// runs once, at its first Close.
type peekedConn struct {
	net.Conn
	r       *bufio.Reader
	release func()
	once    sync.Once
}

func (c *peekedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func (c *peekedConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}

// selfSignedTLS returns a TLS config with a fresh self-signed certificate
// for host, for an access point started without --tls-cert: the RocketMQ 5
// clients connect with TLS by default and do not verify the server's
// certificate, so they work against it unchanged.
func selfSignedTLS(host string) (*tls.Config, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "zonemq access point"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(10 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if ip := net.ParseIP(host); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else if host != "" {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}, nil
}
