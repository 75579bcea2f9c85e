package remoting

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/testutil"
)

// dialRaw opens a plain TCP connection to the server, closed at test end.
func dialRaw(t *testing.T, addr string) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	testutil.NoError(t, err)
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	return nc
}

// A request whose frame is over the limit is answered SYSTEM_ERROR with
// both sizes before the connection closes.
func TestServerAnswersOversizedFrame(t *testing.T) {
	s := startServer(t, ServerOptions{MaxFrameSize: 1 << 20}, func(s *Server) { s.Handle(1, echoHandler) })
	nc := dialRaw(t, s.Addr())
	frame := EncodeFrame(&Command{Code: 1, Opaque: 77, Body: make([]byte, 1<<20)})
	_, err := nc.Write(frame[:4096])
	testutil.NoError(t, err)
	resp, err := ReadFrame(newBufReader(nc), DefaultMaxFrameSize)
	testutil.NoError(t, err, "the answer to the oversized frame")
	testutil.Equal(t, resp.Code, ResponseCodeSystemError)
	testutil.Equal(t, resp.Opaque, int32(77))
	testutil.True(t, strings.Contains(resp.Remark, "exceeds this server's limit of 1048576 bytes"), resp.Remark)
	rest, err := io.ReadAll(nc)
	testutil.NoError(t, err, "then the server closes")
	testutil.Equal(t, len(rest), 0)
}

// Large frames being received share one budget: while a slow sender holds
// most of it, another large frame waits unread (and is served once the
// budget frees), while small frames are never held up.
func TestServerReceiveBudget(t *testing.T) {
	s := startServer(t, ServerOptions{MaxReceivingBytes: 1 << 20}, func(s *Server) { s.Handle(1, echoHandler) })
	slow := dialRaw(t, s.Addr())
	big := EncodeFrame(&Command{Code: 1, Opaque: 1, Body: make([]byte, 900<<10)})
	_, err := slow.Write(big[:len(big)/2]) // and never the rest
	testutil.NoError(t, err)
	testutil.Eventually(t, 10*time.Second, func() error {
		if n := s.ReceivingBytes(); n != int64(len(big)-4) {
			return fmt.Errorf("%d bytes reserved", n)
		}
		return nil
	})

	other := dialRaw(t, s.Addr())
	_, err = other.Write(EncodeFrame(&Command{Code: 1, Opaque: 2, Body: make([]byte, 600<<10)}))
	testutil.NoError(t, err)
	testutil.Eventually(t, 10*time.Second, func() error {
		if n := s.budget.Waits(); n != 1 {
			return fmt.Errorf("%d waits", n)
		}
		return nil
	})

	small := dialRaw(t, s.Addr())
	_, err = small.Write(EncodeFrame(&Command{Code: 1, Opaque: 3, ExtFields: map[string]string{"small": "yes"}}))
	testutil.NoError(t, err)
	resp, err := ReadFrame(newBufReader(small), DefaultMaxFrameSize)
	testutil.NoError(t, err, "a small frame is served while the budget is spent")
	testutil.Equal(t, resp.Ext("small"), "yes")

	slow.Close() // frees its reservation
	resp, err = ReadFrame(newBufReader(other), DefaultMaxFrameSize)
	testutil.NoError(t, err, "the waiting frame is served once the budget frees")
	testutil.Equal(t, resp.Opaque, int32(2))
	testutil.Eventually(t, 10*time.Second, func() error {
		if n := s.ReceivingBytes(); n != 0 {
			return fmt.Errorf("%d bytes still reserved", n)
		}
		return nil
	})
}

// Past MaxConns a new connection is closed at once and logged.
func TestServerConnectionCap(t *testing.T) {
	logger, logs := newTestLogger(slog.LevelInfo)
	s := startServer(t, ServerOptions{MaxConns: 2, Logger: logger}, func(s *Server) { s.Handle(1, echoHandler) })
	for range 2 {
		dialRaw(t, s.Addr())
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if n := s.ConnCount(); n != 2 {
			return fmt.Errorf("%d connections", n)
		}
		return nil
	})
	third := dialRaw(t, s.Addr())
	third.Write(EncodeFrame(&Command{Code: 1, Opaque: 1}))
	rest, _ := io.ReadAll(third)
	testutil.Equal(t, len(rest), 0, "no answer past the cap")
	logs.waitFor(t, "the connection cap is reached")
	testutil.Equal(t, s.ConnCount(), 2)
}

// An HTTP request on a remoting port (a client given a name server as its
// address server) is logged as what it is, not as a 1.2 GB frame.
func TestServerNamesAnHTTPRequest(t *testing.T) {
	var logs syncLog
	s := startServer(t, ServerOptions{Logger: slog.New(slog.NewTextHandler(&logs, nil))}, nil)
	nc := dialRaw(t, s.Addr())
	_, err := nc.Write([]byte("GET /v1/namesrvs HTTP/1.1\r\nHost: x\r\n\r\n"))
	testutil.NoError(t, err)
	rest, _ := io.ReadAll(nc) // the server closes
	testutil.Equal(t, len(rest), 0)
	testutil.Eventually(t, 5*time.Second, func() error {
		if !strings.Contains(logs.String(), "an HTTP GET request arrived on this remoting port") {
			return fmt.Errorf("log: %s", logs.String())
		}
		return nil
	})
	testutil.True(t, !strings.Contains(logs.String(), "exceeds"), logs.String())
}

// syncLog is a log sink safe for concurrent writes.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
