package remoting

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/testutil"
)

// tlsEchoServer serves code 1 with an echo on 127.0.0.1:0 in mode.
func tlsEchoServer(t *testing.T, mode TLSMode, r *CertReloader) *Server {
	t.Helper()
	s, err := NewServer(ServerOptions{Listen: "127.0.0.1:0", TLS: ServerTLS{Mode: mode, Config: r.ServerConfig()}})
	testutil.NoError(t, err)
	s.Handle(1, func(_ context.Context, _ *Conn, req *Command) *Command {
		resp := NewResponse(req, 0, "")
		resp.Body = req.Body
		return resp
	})
	go s.Serve()
	t.Cleanup(func() { s.Close() })
	return s
}

func echo(t *testing.T, c *Client, addr string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.Invoke(ctx, addr, NewRequest(1, nil, []byte("ping")))
	if err == nil && string(resp.Body) != "ping" {
		t.Fatalf("echo answered %q", resp.Body)
	}
	return err
}

func tlsClient(t *testing.T, caFile string) *Client {
	t.Helper()
	cfg, err := ClientTLSConfig(caFile, false)
	testutil.NoError(t, err)
	c := NewClient(ClientOptions{Dial: TLSDialer(cfg, nil)})
	t.Cleanup(func() { c.Close() })
	return c
}

func plainClient(t *testing.T) *Client {
	t.Helper()
	c := NewClient(ClientOptions{DialTimeout: 2 * time.Second})
	t.Cleanup(func() { c.Close() })
	return c
}

// TestRemotingTLSModes: permissive serves TLS and plain side by side on one
// port, enforcing refuses plain, and a client that does not trust the
// certificate is refused.
func TestRemotingTLSModes(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := testutil.SelfSignedCert(t, dir, "server", "127.0.0.1")
	r, err := NewCertReloader(certFile, keyFile, nil)
	testutil.NoError(t, err)

	permissive := tlsEchoServer(t, TLSPermissive, r)
	testutil.NoError(t, echo(t, tlsClient(t, certFile), permissive.Addr()), "TLS client, permissive server")
	testutil.NoError(t, echo(t, plainClient(t), permissive.Addr()), "plain client, permissive server")

	enforcing := tlsEchoServer(t, TLSEnforcing, r)
	testutil.NoError(t, echo(t, tlsClient(t, certFile), enforcing.Addr()), "TLS client, enforcing server")
	testutil.True(t, echo(t, plainClient(t), enforcing.Addr()) != nil, "plain client served by an enforcing server")

	otherCert, _ := testutil.SelfSignedCert(t, dir, "other", "127.0.0.1")
	testutil.True(t, echo(t, tlsClient(t, otherCert), enforcing.Addr()) != nil, "untrusted certificate accepted")

	_, err = NewServer(ServerOptions{Listen: "127.0.0.1:0", TLS: ServerTLS{Mode: TLSEnforcing}})
	testutil.True(t, err != nil, "TLS without a certificate")
}

// TestRemotingTLSCertReload: a renewed certificate file is served to new
// connections without a restart.
func TestRemotingTLSCertReload(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := testutil.SelfSignedCert(t, dir, "server", "127.0.0.1")
	r, err := NewCertReloader(certFile, keyFile, nil)
	testutil.NoError(t, err)
	s := tlsEchoServer(t, TLSEnforcing, r)
	first, err := os.ReadFile(certFile)
	testutil.NoError(t, err)

	// Renew: a new key pair under the same file names.
	newDir := t.TempDir()
	nc, nk := testutil.SelfSignedCert(t, newDir, "server", "127.0.0.1")
	for from, to := range map[string]string{nc: certFile, nk: keyFile} {
		b, err := os.ReadFile(from)
		testutil.NoError(t, err)
		testutil.NoError(t, os.WriteFile(filepath.Join(dir, "tmp"), b, 0o600))
		testutil.NoError(t, os.Rename(filepath.Join(dir, "tmp"), to))
	}
	// New connections trust only the new certificate; the reloader checks
	// the files at most once a second, so poll.
	testutil.Eventually(t, 10*time.Second, func() error {
		return echo(t, tlsClient(t, nc), s.Addr())
	})
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(first)
	c := NewClient(ClientOptions{Dial: TLSDialer(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil)})
	defer c.Close()
	testutil.True(t, echo(t, c, s.Addr()) != nil, "old certificate still served")
}
