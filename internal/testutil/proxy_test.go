package testutil

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"
)

// proxyEchoServer answers every line with the same line until closed.
type proxyEchoServer struct {
	ln    net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

func startProxyEcho(t *testing.T) *proxyEchoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.2.1:0")
	NoError(t, err, "listen")
	e := &proxyEchoServer{ln: ln, conns: map[net.Conn]struct{}{}}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			e.mu.Lock()
			e.conns[c] = struct{}{}
			e.mu.Unlock()
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				io.Copy(c, c)
				c.Close()
			}()
		}
	}()
	t.Cleanup(e.close)
	return e
}

func (e *proxyEchoServer) close() {
	e.ln.Close()
	e.mu.Lock()
	for c := range e.conns {
		c.Close()
	}
	e.mu.Unlock()
	e.wg.Wait()
}

func startProxy(t *testing.T, target string) *Proxy {
	t.Helper()
	p, err := NewProxy("127.0.1.1:0", target)
	NoError(t, err, "NewProxy")
	t.Cleanup(func() { p.Close() })
	return p
}

// proxyRoundTrip writes one line on c and reads the echo, within timeout.
func proxyRoundTrip(c net.Conn, r *bufio.Reader, msg string, timeout time.Duration) error {
	c.SetDeadline(time.Now().Add(timeout))
	defer c.SetDeadline(time.Time{})
	if _, err := fmt.Fprintf(c, "%s\n", msg); err != nil {
		return err
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	if line != msg+"\n" {
		return fmt.Errorf("echo %q, want %q", line, msg)
	}
	return nil
}

func dialProxy(t *testing.T, p *Proxy) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.DialTimeout("tcp", p.Addr(), time.Second)
	NoError(t, err, "dial proxy")
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

// expectProxyRefused checks that a connection through p fails fast: the dial
// itself (the reset can beat connect's completion) or the first round trip.
func expectProxyRefused(t *testing.T, p *Proxy) {
	t.Helper()
	c, err := net.DialTimeout("tcp", p.Addr(), time.Second)
	if err != nil {
		True(t, !isProxyTimeout(err), "dial should fail fast, got", err)
		return
	}
	defer c.Close()
	err = proxyRoundTrip(c, bufio.NewReader(c), "x", 5*time.Second)
	True(t, err != nil && !isProxyTimeout(err), "round trip should fail fast, got", err)
}

func isProxyTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded)
}

func TestProxyForwards(t *testing.T) {
	e := startProxyEcho(t)
	p := startProxy(t, e.ln.Addr().String())
	Equal(t, p.Target(), e.ln.Addr().String(), "target")
	c, r := dialProxy(t, p)
	for i := range 5 {
		NoError(t, proxyRoundTrip(c, r, fmt.Sprintf("hello %d", i), 2*time.Second), "round trip")
	}
	// Bulk data in both directions, larger than the copy buffer.
	big := make([]byte, 256<<10)
	for i := range big {
		big[i] = 'a' + byte(i%26)
	}
	big[len(big)-1] = '\n'
	go c.Write(big)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := r.ReadString('\n')
	NoError(t, err, "bulk read")
	Equal(t, got, string(big), "bulk echo")
	Equal(t, p.Conns(), 1, "open connections")
}

func TestProxyCutAndRestore(t *testing.T) {
	e := startProxyEcho(t)
	p := startProxy(t, e.ln.Addr().String())
	c, r := dialProxy(t, p)
	NoError(t, proxyRoundTrip(c, r, "before", 2*time.Second), "before cut")

	p.Cut()
	// The open connection is closed by the proxy: reads end at once, no timeout.
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := r.ReadString('\n')
	True(t, err != nil && !isProxyTimeout(err), "read after Cut should fail with EOF/reset, got", err)
	Equal(t, p.Conns(), 0, "connections after Cut")

	// New connections are accepted by the kernel but reset at once.
	expectProxyRefused(t, p)

	p.Restore()
	c3, r3 := dialProxy(t, p)
	NoError(t, proxyRoundTrip(c3, r3, "after", 2*time.Second), "after restore")
}

func TestProxyBlackhole(t *testing.T) {
	e := startProxyEcho(t)
	p := startProxy(t, e.ln.Addr().String())
	c, r := dialProxy(t, p)
	NoError(t, proxyRoundTrip(c, r, "one", 2*time.Second), "before blackhole")

	p.Blackhole(true)
	err := proxyRoundTrip(c, r, "two", 200*time.Millisecond)
	True(t, isProxyTimeout(err), "request during Blackhole should time out, got", err)

	// New connections are accepted and hang too.
	c2, r2 := dialProxy(t, p)
	err = proxyRoundTrip(c2, r2, "new", 200*time.Millisecond)
	True(t, isProxyTimeout(err), "new connection during Blackhole should hang, got", err)

	// The held bytes arrive once the hang ends: the connection is intact.
	p.Blackhole(false)
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	line, err := r.ReadString('\n')
	NoError(t, err, "held echo")
	Equal(t, line, "two\n", "held echo")
	NoError(t, proxyRoundTrip(c, r, "three", 2*time.Second), "after blackhole")

	// Restore also ends a hang.
	p.Blackhole(true)
	err = proxyRoundTrip(c, r, "four", 100*time.Millisecond)
	True(t, isProxyTimeout(err), "second hang", err)
	p.Restore()
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	line, err = r.ReadString('\n')
	NoError(t, err, "held echo after Restore")
	Equal(t, line, "four\n", "held echo after Restore")
}

func TestProxyLatency(t *testing.T) {
	e := startProxyEcho(t)
	p := startProxy(t, e.ln.Addr().String())
	c, r := dialProxy(t, p)
	const d = 50 * time.Millisecond
	p.SetLatency(d)
	start := time.Now()
	NoError(t, proxyRoundTrip(c, r, "slow", 5*time.Second), "with latency")
	// One chunk each way: at least twice the latency.
	True(t, time.Since(start) >= 2*d, "round trip took", time.Since(start))
	p.SetLatency(0)
	NoError(t, proxyRoundTrip(c, r, "fast", 2*time.Second), "without latency")
}

func TestProxyTargetDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.2.1:0")
	NoError(t, err, "listen")
	target := ln.Addr().String()
	ln.Close() // nothing listens there now
	p := startProxy(t, target)
	expectProxyRefused(t, p)
}

func TestProxyCloseLeavesNoGoroutines(t *testing.T) {
	e := startProxyEcho(t)
	before := runtime.NumGoroutine()
	p, err := NewProxy("127.0.1.1:0", e.ln.Addr().String())
	NoError(t, err, "NewProxy")
	var conns []net.Conn
	for i := range 4 {
		c, err := net.Dial("tcp", p.Addr())
		NoError(t, err, "dial")
		conns = append(conns, c)
		NoError(t, proxyRoundTrip(c, bufio.NewReader(c), fmt.Sprint("m", i), 2*time.Second), "round trip")
	}
	p.Blackhole(true) // goroutines parked in the hang must end too
	for _, c := range conns {
		fmt.Fprintf(c, "held\n")
	}
	p.SetLatency(time.Hour)
	NoError(t, p.Close(), "Close")
	NoError(t, p.Close(), "second Close")
	for _, c := range conns {
		c.Close()
	}
	Eventually(t, 5*time.Second, func() error {
		if n := runtime.NumGoroutine(); n > before {
			return fmt.Errorf("%d goroutines, %d before the proxy", n, before)
		}
		return nil
	})
	_, err = net.DialTimeout("tcp", p.Addr(), time.Second)
	True(t, err != nil, "dial after Close should fail")
}
