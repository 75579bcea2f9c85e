package remoting

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/testutil"
)

// countingDial counts the connections a client opens.
func countingDial(n *atomic.Int32) func(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		n.Add(1)
		return d.DialContext(ctx, network, addr)
	}
}

func TestClientPoolReusesOneConnPerAddress(t *testing.T) {
	s1 := startServer(t, ServerOptions{}, func(s *Server) { s.Handle(1, echoHandler) })
	s2 := startServer(t, ServerOptions{}, func(s *Server) { s.Handle(1, echoHandler) })
	var dials atomic.Int32
	c := newTestClient(t, ClientOptions{Dial: countingDial(&dials)})
	ctx := invokeCtx(t, 10*time.Second)

	// Many callers at once share one dial per address.
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			addr := s1.Addr()
			if i%2 == 1 {
				addr = s2.Addr()
			}
			_, err := c.Invoke(ctx, addr, NewRequest(1, nil, nil))
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	testutil.Equal(t, dials.Load(), int32(2))
	testutil.Equal(t, len(c.Addrs()), 2)
	a, err := c.Conn(ctx, s1.Addr())
	testutil.NoError(t, err)
	b, err := c.Conn(ctx, s1.Addr())
	testutil.NoError(t, err)
	testutil.True(t, a == b, "same *Conn for the same address")
	testutil.Equal(t, len(s1.Conns()), 1)
}

func TestClientRedialsAfterClose(t *testing.T) {
	s := startServer(t, ServerOptions{}, func(s *Server) { s.Handle(1, echoHandler) })
	var dials atomic.Int32
	c := newTestClient(t, ClientOptions{Dial: countingDial(&dials)})
	ctx := invokeCtx(t, 10*time.Second)
	_, err := c.Invoke(ctx, s.Addr(), NewRequest(1, nil, nil))
	testutil.NoError(t, err)
	first, _ := c.ConnIfOpen(s.Addr())

	// The server hangs up: the pool notices and forgets the connection.
	for _, sc := range s.Conns() {
		sc.Close()
	}
	<-first.Done()
	testutil.Eventually(t, 5*time.Second, func() error {
		if _, ok := c.ConnIfOpen(s.Addr()); ok {
			return errors.New("closed connection still pooled")
		}
		return nil
	})
	_, err = c.Invoke(ctx, s.Addr(), NewRequest(1, nil, nil))
	testutil.NoError(t, err)
	testutil.Equal(t, dials.Load(), int32(2))
	second, _ := c.ConnIfOpen(s.Addr())
	testutil.True(t, second != first, "a new connection")

	// CloseConn drops it on our side; the next call dials again.
	c.CloseConn(s.Addr())
	<-second.Done()
	_, err = c.Invoke(ctx, s.Addr(), NewRequest(1, nil, nil))
	testutil.NoError(t, err)
	testutil.Equal(t, dials.Load(), int32(3))
	c.CloseConn("127.0.0.1:1") // unknown address: nothing happens
}

func TestClientDialFailure(t *testing.T) {
	c := newTestClient(t, ClientOptions{DialTimeout: time.Second})
	addr := closedAddr(t)
	_, err := c.Invoke(invokeCtx(t, 5*time.Second), addr, NewRequest(1, nil, nil))
	testutil.True(t, err != nil, "dial error")
	testutil.Equal(t, len(c.Addrs()), 0)
	testutil.True(t, c.InvokeOneway(invokeCtx(t, 5*time.Second), addr, NewRequest(1, nil, nil)) != nil, "oneway dial error")
}

// Callers waiting on a dial in progress give up when their context ends.
func TestClientConnWaitHonoursContext(t *testing.T) {
	release := make(chan struct{})
	var d net.Dialer
	c := newTestClient(t, ClientOptions{Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		<-release
		return d.DialContext(ctx, network, addr)
	}})
	s := startServer(t, ServerOptions{}, nil)
	go c.Conn(context.Background(), s.Addr()) // holds the dial
	testutil.Eventually(t, 5*time.Second, func() error {
		c.mu.Lock()
		defer c.mu.Unlock()
		if len(c.dialing) == 0 {
			return errors.New("dial not started")
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := c.Conn(ctx, s.Addr())
	testutil.ErrorIs(t, err, context.DeadlineExceeded)
	close(release)
	testutil.Eventually(t, 5*time.Second, func() error {
		if _, ok := c.ConnIfOpen(s.Addr()); !ok {
			return errors.New("dial did not finish")
		}
		return nil
	})
}

// A dial that completes after Close must not leave a connection behind.
func TestClientCloseDuringDial(t *testing.T) {
	s := startServer(t, ServerOptions{}, nil)
	release := make(chan struct{})
	var d net.Dialer
	c := NewClient(ClientOptions{Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		<-release
		// The client's context is cancelled by Close; dial regardless, as a
		// slow dialer that ignores it would.
		return d.DialContext(context.Background(), network, addr)
	}})
	errCh := make(chan error, 1)
	go func() {
		_, err := c.Conn(context.Background(), s.Addr())
		errCh <- err
	}()
	testutil.Eventually(t, 5*time.Second, func() error {
		c.mu.Lock()
		defer c.mu.Unlock()
		if len(c.dialing) == 0 {
			return errors.New("dial not started")
		}
		return nil
	})
	closed := make(chan struct{})
	go func() { c.Close(); close(closed) }()
	testutil.Eventually(t, 5*time.Second, func() error {
		c.mu.Lock()
		defer c.mu.Unlock()
		if !c.closed {
			return errors.New("not closed yet")
		}
		return nil
	})
	close(release)
	testutil.ErrorIs(t, <-errCh, ErrClientClosed)
	<-closed
	testutil.Equal(t, len(c.Addrs()), 0)
	testutil.Eventually(t, 5*time.Second, func() error {
		if n := len(s.Conns()); n != 0 {
			return fmt.Errorf("%d server connections left", n)
		}
		return nil
	})
}

func TestClientIdleTimeoutClosesConn(t *testing.T) {
	s := startServer(t, ServerOptions{}, func(s *Server) { s.Handle(1, echoHandler) })
	c := newTestClient(t, ClientOptions{IdleTimeout: 50 * time.Millisecond})
	cn, err := c.Conn(invokeCtx(t, 5*time.Second), s.Addr())
	testutil.NoError(t, err)
	select {
	case <-cn.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("idle connection not closed")
	}
}

func TestServerIdleTimeoutClosesConn(t *testing.T) {
	s := startServer(t, ServerOptions{IdleTimeout: 50 * time.Millisecond}, func(s *Server) { s.Handle(1, echoHandler) })
	c := newTestClient(t, ClientOptions{})
	cn, err := c.Conn(invokeCtx(t, 5*time.Second), s.Addr())
	testutil.NoError(t, err)
	select {
	case <-cn.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the server kept an idle connection")
	}
}

func TestClientOutgoingFrameTooLarge(t *testing.T) {
	s := startServer(t, ServerOptions{}, func(s *Server) { s.Handle(1, echoHandler) })
	c := newTestClient(t, ClientOptions{MaxFrameSize: 1 << 10})
	_, err := c.Invoke(invokeCtx(t, 5*time.Second), s.Addr(), NewRequest(1, nil, make([]byte, 2<<10)))
	testutil.ErrorIs(t, err, ErrFrameTooLarge)
	// The connection is still fine for frames that fit.
	_, err = c.Invoke(invokeCtx(t, 5*time.Second), s.Addr(), NewRequest(1, nil, []byte("small")))
	testutil.NoError(t, err)
}
