package remoting

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/testutil"
)

// countingConn counts the Write calls made on a net.Conn.
type countingConn struct {
	net.Conn
	writes atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// servePipe serves one side of a net.Pipe with s and returns the other side
// and the served side's counter. A pipe has no kernel buffer: what the
// server writes waits until the test reads it.
func servePipe(t *testing.T, s *Server) (net.Conn, *countingConn) {
	t.Helper()
	client, server := net.Pipe()
	counted := &countingConn{Conn: server}
	s.serveConn(counted)
	t.Cleanup(func() { client.Close() })
	return client, counted
}

func requestFrames(n int, code int32, from int32) []byte {
	var b []byte
	for i := range n {
		b = AppendFrame(b, &Command{Code: code, Opaque: from + int32(i), ExtFields: map[string]string{"i": fmt.Sprint(i)}})
	}
	return b
}

func TestConnInlineResponsesLeaveInOneWrite(t *testing.T) {
	s := startServer(t, ServerOptions{}, func(s *Server) { s.HandleInline(10, echoHandler) })
	client, counted := servePipe(t, s)
	const n = 64
	// One write of 64 frames: the pipe hands them to one read.
	go client.Write(requestFrames(n, 10, 1))

	r := bufio.NewReader(client)
	client.SetReadDeadline(time.Now().Add(10 * time.Second))
	for i := range n {
		resp, err := ReadFrame(r, DefaultMaxFrameSize)
		testutil.NoError(t, err, "response", i)
		// Inline handlers answer in arrival order.
		testutil.Equal(t, resp.Opaque, int32(i+1), "opaque")
		testutil.Equal(t, resp.Ext("i"), fmt.Sprint(i), "ext")
	}
	testutil.Equal(t, counted.writes.Load(), int64(1), "write calls for 64 responses")
}

func TestConnQueuedFramesShareWrites(t *testing.T) {
	// Goroutine handlers: while the first response's write is held, the
	// other 199 responses queue up; they must leave in one more write.
	s := startServer(t, ServerOptions{}, func(s *Server) { s.Handle(10, echoHandler) })
	client, server := net.Pipe()
	t.Cleanup(func() { client.Close() })
	release := make(chan struct{})
	held := &heldConn{Conn: server, release: release}
	s.serveConn(held)
	const n = 200
	go client.Write(requestFrames(n, 10, 1))

	// What the 200 responses weigh on the wire, to know when all are queued.
	total := 0
	for i := range n {
		resp := &Command{Code: 0, Language: Language, Version: Version, Opaque: int32(i + 1), Flag: FlagResponse,
			ExtFields: map[string]string{"i": fmt.Sprint(i)}}
		total += len(EncodeFrame(resp))
	}
	var sc *Conn
	testutil.Eventually(t, 10*time.Second, func() error {
		for _, c := range s.Conns() {
			sc = c
		}
		if sc == nil || sc.UnsentBytes() != total {
			return fmt.Errorf("not all responses queued yet")
		}
		return nil
	})
	close(release)

	r := bufio.NewReader(client)
	client.SetReadDeadline(time.Now().Add(10 * time.Second))
	seen := make(map[int32]bool)
	for i := range n {
		resp, err := ReadFrame(r, DefaultMaxFrameSize)
		testutil.NoError(t, err, "response", i)
		seen[resp.Opaque] = true
	}
	testutil.Equal(t, len(seen), n, "distinct responses")
	testutil.Equal(t, held.writes.Load(), int64(2), "write calls: the held one, then everything queued behind it")
}

// heldConn holds its first Write until release is closed, and counts writes.
type heldConn struct {
	net.Conn
	release chan struct{}
	writes  atomic.Int64
}

func (c *heldConn) Write(p []byte) (int, error) {
	if c.writes.Add(1) == 1 {
		<-c.release
	}
	return c.Conn.Write(p)
}

func TestServerStopsReadingOverUnsentCap(t *testing.T) {
	const (
		capBytes = 64 << 10
		respSize = 16 << 10
		inflight = 4
		requests = 1000
	)
	var handled atomic.Int64
	body := make([]byte, respSize)
	s := startServer(t, ServerOptions{MaxUnsentBytes: capBytes, MaxInflight: inflight}, func(s *Server) {
		s.Handle(10, func(_ context.Context, _ *Conn, req *Command) *Command {
			handled.Add(1)
			resp := NewResponse(req, 0, "")
			resp.Body = body
			return resp
		})
	})
	client, _ := servePipe(t, s)
	var sc *Conn
	testutil.Eventually(t, 5*time.Second, func() error {
		for _, c := range s.Conns() {
			sc = c
			return nil
		}
		return fmt.Errorf("no connection yet")
	})

	// A client that sends and does not read.
	sent := make(chan error, 1)
	go func() {
		for i := range requests {
			if _, err := client.Write(requestFrames(1, 10, int32(i+1))); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	testutil.Eventually(t, 10*time.Second, func() error {
		sc.out.mu.Lock()
		defer sc.out.mu.Unlock()
		if !sc.out.readerWaiting {
			return fmt.Errorf("read loop still reading; %d bytes unsent", sc.out.unsent)
		}
		return nil
	})
	// Stalled: at most the cap's worth of responses, the handlers in
	// flight and the one that crossed the cap were produced.
	limit := int64(capBytes/respSize + inflight + 1)
	testutil.True(t, handled.Load() <= limit, fmt.Sprintf("%d requests handled while the client reads nothing (limit %d)", handled.Load(), limit))
	select {
	case err := <-sent:
		t.Fatalf("the client could send all %d requests without reading (err %v)", requests, err)
	default:
	}

	// Once the client reads, everything is answered.
	r := bufio.NewReader(client)
	client.SetReadDeadline(time.Now().Add(30 * time.Second))
	for i := range requests {
		if _, err := ReadFrame(r, DefaultMaxFrameSize); err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
	}
	testutil.NoError(t, <-sent, "sending")
	testutil.Equal(t, handled.Load(), int64(requests), "handled")
}

func TestConnWriteAfterCloseFails(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	c := newConn(server, connConfig{})
	c.Close()
	err := c.Write(&Command{Code: 1})
	testutil.ErrorIs(t, err, ErrConnClosed)
	testutil.Equal(t, c.UnsentBytes(), 0, "unsent after close")
}

func TestConnConcurrentWritersAllDelivered(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	c := newConn(server, connConfig{})
	defer c.Close()
	const writers, each = 8, 100
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if err := c.Write(&Command{Code: 1, Opaque: int32(w*each + i)}); err != nil {
					t.Errorf("write: %v", err)
					return
				}
			}
		}()
	}
	r := bufio.NewReader(client)
	client.SetReadDeadline(time.Now().Add(10 * time.Second))
	seen := make(map[int32]bool)
	for range writers * each {
		cmd, err := ReadFrame(r, DefaultMaxFrameSize)
		testutil.NoError(t, err)
		seen[cmd.Opaque] = true
	}
	wg.Wait()
	testutil.Equal(t, len(seen), writers*each, "distinct frames")
	testutil.Equal(t, c.UnsentBytes(), 0, "unsent after all were read")
}
