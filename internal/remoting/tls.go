package remoting

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"
)

// TLS for the remoting transport. A server listener serves TLS, plain, or
// both on one port (RocketMQ's tlsMode: disabled, permissive, enforcing);
// both on one port is what lets a cluster move to TLS without changing the
// broker addresses registered in the routes. The first byte tells them
// apart: a TLS connection starts with a handshake record (0x16), which as
// the first byte of a RocketMQ frame would announce a frame of more than
// 350 MiB, far past any frame limit.

// TLSMode is how a listener treats TLS.
type TLSMode int

// The modes.
const (
	// TLSDisabled serves plain connections only.
	TLSDisabled TLSMode = iota
	// TLSPermissive serves TLS and plain connections on the same port.
	TLSPermissive
	// TLSEnforcing serves TLS connections only.
	TLSEnforcing
)

// ParseTLSMode reads "disabled", "permissive" or "enforcing".
func ParseTLSMode(s string) (TLSMode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "disabled":
		return TLSDisabled, nil
	case "permissive":
		return TLSPermissive, nil
	case "enforcing":
		return TLSEnforcing, nil
	}
	return 0, fmt.Errorf("TLS mode %q is not disabled, permissive or enforcing", s)
}

func (m TLSMode) String() string {
	switch m {
	case TLSPermissive:
		return "permissive"
	case TLSEnforcing:
		return "enforcing"
	}
	return "disabled"
}

// tlsRecordHandshake is the first byte of every TLS connection.
const tlsRecordHandshake = 0x16

// TLSListener wraps ln to serve TLS with cfg as mode says. TLSDisabled
// returns ln itself.
func TLSListener(ln net.Listener, cfg *tls.Config, mode TLSMode) net.Listener {
	if mode == TLSDisabled {
		return ln
	}
	return &tlsListener{Listener: ln, cfg: cfg, mode: mode}
}

type tlsListener struct {
	net.Listener
	cfg  *tls.Config
	mode TLSMode
}

// Accept returns at once; the TLS-or-plain decision and the handshake
// happen on the connection's first read, on its own goroutine, so a slow
// client never holds up the accept loop.
func (l *tlsListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
		tc.SetKeepAlive(true)
	}
	if l.mode == TLSEnforcing {
		return tls.Server(nc, l.cfg), nil
	}
	return &sniffConn{Conn: nc, cfg: l.cfg}, nil
}

// sniffConn decides on its first read or write whether it is TLS.
type sniffConn struct {
	net.Conn // the raw connection until decided
	cfg      *tls.Config

	once   sync.Once
	chosen net.Conn
	err    error
}

// decide peeks at the first byte.
func (c *sniffConn) decide() (net.Conn, error) {
	c.once.Do(func() {
		br := bufio.NewReaderSize(c.Conn, 512)
		first, err := br.Peek(1)
		if err != nil {
			c.err = err
			return
		}
		raw := &peekedConn{Conn: c.Conn, r: br}
		if first[0] == tlsRecordHandshake {
			c.chosen = tls.Server(raw, c.cfg)
		} else {
			c.chosen = raw
		}
	})
	return c.chosen, c.err
}

func (c *sniffConn) Read(p []byte) (int, error) {
	conn, err := c.decide()
	if err != nil {
		return 0, err
	}
	return conn.Read(p)
}

func (c *sniffConn) Write(p []byte) (int, error) {
	conn, err := c.decide()
	if err != nil {
		return 0, err
	}
	return conn.Write(p)
}

// Close closes the raw connection: a TLS close_notify is not worth a write
// that could block.
func (c *sniffConn) Close() error { return c.Conn.Close() }

// peekedConn reads through the reader that holds the sniffed byte.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// CertReloader serves a certificate and key from files and re-reads them
// when either file's modification time or size changes (checked at most
// once a second, at handshakes), so a renewed certificate takes effect
// without a restart. A renewal that cannot be loaded is logged and the
// previous certificate stays in use. Safe for concurrent use.
type CertReloader struct {
	certFile, keyFile string
	logger            *slog.Logger

	mu        sync.Mutex
	cert      *tls.Certificate
	stamp     string
	lastCheck time.Time
}

// NewCertReloader loads certFile and keyFile (PEM).
func NewCertReloader(certFile, keyFile string, logger *slog.Logger) (*CertReloader, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	r := &CertReloader{certFile: certFile, keyFile: keyFile, logger: logger}
	stamp, err := r.fileStamp()
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate %s / key %s: %w", certFile, keyFile, err)
	}
	r.cert, r.stamp, r.lastCheck = &cert, stamp, time.Now()
	return r, nil
}

func (r *CertReloader) fileStamp() (string, error) {
	var parts []string
	for _, f := range []string{r.certFile, r.keyFile} {
		st, err := os.Stat(f)
		if err != nil {
			return "", fmt.Errorf("TLS: %w", err)
		}
		parts = append(parts, fmt.Sprintf("%d/%d", st.ModTime().UnixNano(), st.Size()))
	}
	return strings.Join(parts, ","), nil
}

// GetCertificate is tls.Config.GetCertificate.
func (r *CertReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.lastCheck) >= time.Second {
		r.lastCheck = time.Now()
		if stamp, err := r.fileStamp(); err == nil && stamp != r.stamp {
			cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
			if err != nil {
				r.logger.Error("TLS certificate not reloaded; the previous one stays in use", "cert", r.certFile, "err", err)
			} else {
				r.cert, r.stamp = &cert, stamp
				r.logger.Info("TLS certificate reloaded", "cert", r.certFile)
			}
		}
	}
	return r.cert, nil
}

// ServerConfig is a TLS 1.2+ server config serving r's certificate.
func (r *CertReloader) ServerConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.GetCertificate}
}

// ClientTLSConfig builds a client config: caFile (PEM) verifies servers
// instead of the system roots when set; insecure skips verification (what
// rocketmq-client-go's WithTls does; for tests and migrations only).
func ClientTLSConfig(caFile string, insecure bool) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: insecure}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("TLS CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("TLS CA %s: no PEM certificate in it", caFile)
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

// TLSDialer returns a ClientOptions.Dial that opens a TCP connection with
// base (nil: a net.Dialer) and completes a TLS handshake with cfg within
// ctx. The server name is the host of addr unless cfg sets one.
func TLSDialer(cfg *tls.Config, base func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if base == nil {
		var d net.Dialer
		base = d.DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		nc, err := base(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if tc, ok := nc.(*net.TCPConn); ok {
			tc.SetNoDelay(true)
		}
		c := cfg
		if c.ServerName == "" {
			c = cfg.Clone()
			if host, _, err := net.SplitHostPort(addr); err == nil {
				c.ServerName = host
			}
		}
		tc := tls.Client(nc, c)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, fmt.Errorf("TLS handshake with %s: %w", addr, err)
		}
		return tc, nil
	}
}

// errTLSNoCert is returned when a TLS mode needs a certificate and none was
// given.
var errTLSNoCert = errors.New("a TLS mode other than disabled needs a certificate and a key")

// ServerTLS is the TLS part of ServerOptions.
type ServerTLS struct {
	// Mode: disabled (the zero value), permissive or enforcing.
	Mode TLSMode
	// Config serves the certificate (e.g. CertReloader.ServerConfig()).
	Config *tls.Config
}
