package remoting

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/testutil"
)

func TestServerHandlerDispatch(t *testing.T) {
	s := startServer(t, ServerOptions{}, func(s *Server) {
		s.Handle(105, func(_ context.Context, _ *Conn, req *Command) *Command {
			resp := NewResponse(req, 0, "")
			resp.Body = []byte("route of " + req.Ext("topic"))
			return resp
		})
		s.Handle(34, func(_ context.Context, _ *Conn, req *Command) *Command {
			return NewResponse(req, 0, "heartbeat ok")
		})
	})
	c := newTestClient(t, ClientOptions{})
	ctx := invokeCtx(t, 5*time.Second)

	resp, err := c.Invoke(ctx, s.Addr(), NewRequest(105, map[string]string{"topic": "T"}, nil))
	testutil.NoError(t, err)
	testutil.Equal(t, resp.Code, int32(0))
	testutil.True(t, resp.IsResponse(), "flag")
	testutil.Equal(t, string(resp.Body), "route of T")

	resp, err = c.Invoke(ctx, s.Addr(), NewRequest(34, nil, nil))
	testutil.NoError(t, err)
	testutil.Equal(t, resp.Remark, "heartbeat ok")
}

func TestServerUnknownCodeNotSupported(t *testing.T) {
	s := startServer(t, ServerOptions{}, func(s *Server) { s.Handle(1, echoHandler) })
	c := newTestClient(t, ClientOptions{})
	ctx := invokeCtx(t, 5*time.Second)
	resp, err := c.Invoke(ctx, s.Addr(), NewRequest(4242, nil, nil))
	testutil.NoError(t, err)
	testutil.Equal(t, resp.Code, ResponseCodeNotSupported)
	testutil.Equal(t, resp.Remark, "request type 4242 not supported")
	// The connection stays usable.
	resp, err = c.Invoke(ctx, s.Addr(), NewRequest(1, map[string]string{"a": "b"}, nil))
	testutil.NoError(t, err)
	testutil.Equal(t, resp.Ext("a"), "b")
}

func TestServerDefaultHandler(t *testing.T) {
	s := startServer(t, ServerOptions{}, func(s *Server) {
		s.Handle(1, echoHandler)
		s.HandleDefault(func(_ context.Context, _ *Conn, req *Command) *Command {
			return NewResponse(req, 29, "fallback for "+strconv.Itoa(int(req.Code)))
		})
	})
	c := newTestClient(t, ClientOptions{})
	resp, err := c.Invoke(invokeCtx(t, 5*time.Second), s.Addr(), NewRequest(77, nil, nil))
	testutil.NoError(t, err)
	testutil.Equal(t, resp.Remark, "fallback for 77")
}

// A Java peer configured for the ROCKETMQ encoding gets its answers in it.
func TestServerAnswersInRequestEncoding(t *testing.T) {
	s := startServer(t, ServerOptions{}, func(s *Server) { s.Handle(14, echoHandler) })
	nc, err := net.Dial("tcp", s.Addr())
	testutil.NoError(t, err)
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	for i, typ := range []SerializeType{SerializeRocketMQ, SerializeJSON, SerializeRocketMQ} {
		req := &Command{Code: 14, Language: "JAVA", Version: 479, Opaque: int32(100 + i), Serialize: typ,
			ExtFields: map[string]string{"consumerGroup": "g", "queueId": "1"}, Body: []byte("b")}
		_, err := nc.Write(EncodeFrame(req))
		testutil.NoError(t, err)
		resp, err := ReadFrame(newBufReader(nc), DefaultMaxFrameSize)
		testutil.NoError(t, err)
		testutil.Equal(t, resp.Serialize, typ, i)
		testutil.Equal(t, resp.Opaque, req.Opaque)
		testutil.True(t, resp.IsResponse(), "response flag")
		testutil.Equal(t, resp.Ext("queueId"), "1")
		testutil.Equal(t, string(resp.Body), "b")
	}
}

func TestServerResponsesHaveStringExtFields(t *testing.T) {
	s := startServer(t, ServerOptions{}, func(s *Server) {
		s.Handle(14, func(_ context.Context, _ *Conn, req *Command) *Command {
			resp := NewResponse(req, 0, "")
			resp.SetExt("offset", "12")
			resp.SetExt("ok", "true")
			resp.SetExt("empty", "")
			return resp
		})
	})
	nc, err := net.Dial("tcp", s.Addr())
	testutil.NoError(t, err)
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	_, err = nc.Write(jsonFrame(`{"code":14,"language":"GO","version":317,"opaque":5,"flag":0,"remark":"","extFields":{"queueId":"0"}}`, nil))
	testutil.NoError(t, err)
	raw := readRawFrame(t, nc)
	vals := responseExtValues(t, raw)
	testutil.Equal(t, len(vals), 3)
	for k, v := range vals {
		if _, ok := v.(string); !ok {
			t.Errorf("ext %s=%v is %T", k, v, v)
		}
	}
	testutil.True(t, strings.Contains(string(raw), `"opaque":5,"flag":1`), "response header "+string(raw[8:]))
}

// readRawFrame reads one whole frame, length field included.
func readRawFrame(t *testing.T, r io.Reader) []byte {
	t.Helper()
	lenBuf := make([]byte, 4)
	_, err := io.ReadFull(r, lenBuf)
	testutil.NoError(t, err, "frame length")
	n := int(lenBuf[0])<<24 | int(lenBuf[1])<<16 | int(lenBuf[2])<<8 | int(lenBuf[3])
	raw := make([]byte, 4+n)
	copy(raw, lenBuf)
	_, err = io.ReadFull(r, raw[4:])
	testutil.NoError(t, err, "frame")
	return raw
}

func TestServerConcurrentOpaqueMatching(t *testing.T) {
	s := startServer(t, ServerOptions{}, func(s *Server) {
		s.Handle(1, func(_ context.Context, _ *Conn, req *Command) *Command {
			// Answer out of order: later requests overtake earlier ones.
			n, _ := strconv.Atoi(req.Ext("n"))
			for range n % 7 {
				runtime.Gosched()
			}
			return echoHandler(nil, nil, req)
		})
	})
	c := newTestClient(t, ClientOptions{})
	ctx := invokeCtx(t, 20*time.Second)
	const workers, each = 32, 40
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				n := strconv.Itoa(w*each + i)
				resp, err := c.Invoke(ctx, s.Addr(), NewRequest(1, map[string]string{"n": n}, []byte("body-"+n)))
				if err != nil {
					errs <- err
					return
				}
				if resp.Ext("n") != n || string(resp.Body) != "body-"+n {
					errs <- fmt.Errorf("request %s got the answer to %s", n, resp.Ext("n"))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	testutil.Equal(t, len(c.Addrs()), 1, "one pooled connection")
}

// blockingServer answers code 1 at once and parks code 2 until release is
// closed, then answers it with code 77.
func blockingServer(t *testing.T) (s *Server, parked chan struct{}, release chan struct{}) {
	parked = make(chan struct{}, 16)
	release = make(chan struct{})
	s = startServer(t, ServerOptions{}, func(s *Server) {
		s.Handle(1, echoHandler)
		s.Handle(2, func(_ context.Context, _ *Conn, req *Command) *Command {
			parked <- struct{}{}
			<-release
			return NewResponse(req, 77, "late")
		})
	})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	return s, parked, release
}

func TestClientInvokeTimeoutDropsLateResponse(t *testing.T) {
	s, parked, release := blockingServer(t)
	logger, logs := newTestLogger(slog.LevelDebug)
	c := newTestClient(t, ClientOptions{Logger: logger})

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req := NewRequest(2, nil, nil)
	_, err := c.Invoke(ctx, s.Addr(), req)
	testutil.ErrorIs(t, err, ErrTimeout)
	<-parked
	cn, ok := c.ConnIfOpen(s.Addr())
	testutil.True(t, ok, "connection kept after a timeout")
	cn.mu.Lock()
	testutil.Equal(t, len(cn.pending), 0, "timed-out request forgotten")
	cn.mu.Unlock()

	// The late answer arrives, is logged and dropped; the connection goes on.
	close(release)
	logs.waitFor(t, fmt.Sprintf("opaque=%d code=77", req.Opaque))
	resp, err := c.Invoke(invokeCtx(t, 5*time.Second), s.Addr(), NewRequest(1, map[string]string{"k": "v"}, nil))
	testutil.NoError(t, err)
	testutil.Equal(t, resp.Code, int32(0))
	testutil.Equal(t, resp.Ext("k"), "v")
}

func TestClientInvokeCanceled(t *testing.T) {
	s, parked, _ := blockingServer(t)
	c := newTestClient(t, ClientOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-parked; cancel() }()
	_, err := c.Invoke(ctx, s.Addr(), NewRequest(2, nil, nil))
	testutil.ErrorIs(t, err, context.Canceled)
}

func TestClientInvokeAsync(t *testing.T) {
	s, parked, release := blockingServer(t)
	logger, logs := newTestLogger(slog.LevelDebug)
	c := newTestClient(t, ClientOptions{Logger: logger})
	ctx := invokeCtx(t, 5*time.Second)

	// Success: exactly one callback with the response.
	const n = 50
	var calls, oks atomic.Int32
	for i := range n {
		c.InvokeAsync(ctx, s.Addr(), NewRequest(1, map[string]string{"i": strconv.Itoa(i)}, nil), 5*time.Second,
			func(resp *Command, err error) {
				calls.Add(1)
				if err == nil && resp.Ext("i") != "" {
					oks.Add(1)
				}
			})
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		if calls.Load() != n {
			return fmt.Errorf("%d callbacks of %d", calls.Load(), n)
		}
		return nil
	})
	testutil.Equal(t, oks.Load(), int32(n))

	// Timeout: one callback with ErrTimeout, none for the late response.
	var timeouts, other atomic.Int32
	req := NewRequest(2, nil, nil)
	c.InvokeAsync(ctx, s.Addr(), req, 50*time.Millisecond, func(resp *Command, err error) {
		if errors.Is(err, ErrTimeout) && resp == nil {
			timeouts.Add(1)
		} else {
			other.Add(1)
		}
	})
	<-parked
	testutil.Eventually(t, 5*time.Second, func() error {
		if timeouts.Load() != 1 {
			return errors.New("no timeout callback yet")
		}
		return nil
	})
	close(release)
	logs.waitFor(t, fmt.Sprintf("opaque=%d code=77", req.Opaque))
	testutil.Equal(t, timeouts.Load(), int32(1))
	testutil.Equal(t, other.Load(), int32(0))

	// Dial failure: the callback still runs once, with the error.
	errCh := make(chan error, 2)
	c.InvokeAsync(ctx, closedAddr(t), NewRequest(1, nil, nil), time.Second, func(_ *Command, err error) { errCh <- err })
	err := <-errCh
	testutil.True(t, err != nil, "dial error reported")
}

// closedAddr is a loopback address nobody listens on.
func closedAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	testutil.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// A connection that closes under pending calls fails each once: the sync
// ones with ErrConnClosed, the async ones through their callback.
func TestClientPendingFailOnConnClose(t *testing.T) {
	s, parked, _ := blockingServer(t)
	c := newTestClient(t, ClientOptions{})
	ctx := invokeCtx(t, 10*time.Second)
	syncErr := make(chan error, 1)
	go func() {
		_, err := c.Invoke(ctx, s.Addr(), NewRequest(2, nil, nil))
		syncErr <- err
	}()
	<-parked
	var calls atomic.Int32
	asyncErr := make(chan error, 4)
	c.InvokeAsync(ctx, s.Addr(), NewRequest(2, nil, nil), time.Minute, func(_ *Command, err error) {
		calls.Add(1)
		asyncErr <- err
	})
	<-parked
	for _, cn := range s.Conns() {
		cn.Close()
	}
	testutil.ErrorIs(t, <-syncErr, ErrConnClosed)
	testutil.ErrorIs(t, <-asyncErr, ErrConnClosed)
	testutil.Eventually(t, 5*time.Second, func() error {
		if _, ok := c.ConnIfOpen(s.Addr()); ok {
			return errors.New("closed connection still pooled")
		}
		return nil
	})
	testutil.Equal(t, calls.Load(), int32(1))
}

// Regression: an async call registered just before its connection closed
// had its timer field read (by the close) while InvokeAsync was still
// writing it.
func TestConnAsyncCloseRaceRegression(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	testutil.NoError(t, err)
	defer ln.Close()
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			nc.Close() // hang up at once
		}
	}()
	c := newTestClient(t, ClientOptions{})
	var calls atomic.Int32
	const attempts = 200
	for range attempts {
		cn, err := c.Conn(invokeCtx(t, 5*time.Second), ln.Addr().String())
		if err != nil {
			calls.Add(1) // nothing to race on; count it as done
			continue
		}
		cn.InvokeAsync(NewRequest(1, nil, nil), time.Minute, func(*Command, error) { calls.Add(1) })
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if calls.Load() != attempts {
			return fmt.Errorf("%d of %d callbacks", calls.Load(), attempts)
		}
		return nil
	})
}

func TestServerOneway(t *testing.T) {
	got := make(chan *Command, 1)
	s := startServer(t, ServerOptions{}, func(s *Server) {
		s.Handle(1, echoHandler)
		s.Handle(15, func(_ context.Context, _ *Conn, req *Command) *Command {
			got <- req
			return NewResponse(req, 0, "must not be sent")
		})
	})
	logger, logs := newTestLogger(slog.LevelDebug)
	c := newTestClient(t, ClientOptions{Logger: logger})
	ctx := invokeCtx(t, 5*time.Second)
	testutil.NoError(t, c.InvokeOneway(ctx, s.Addr(), NewRequest(15, map[string]string{"commitOffset": "9"}, nil)))
	req := <-got
	testutil.True(t, req.IsOneway(), "oneway flag on the wire")
	testutil.Equal(t, req.Ext("commitOffset"), "9")
	// Round trips after it find no stray response to the oneway request.
	for range 3 {
		_, err := c.Invoke(ctx, s.Addr(), NewRequest(1, nil, nil))
		testutil.NoError(t, err)
	}
	testutil.True(t, !strings.Contains(logs.String(), "unknown or expired"), "no response to a oneway request: "+logs.String())
}

// A broker sends requests down a client's connection (NOTIFY_CONSUMER_IDS_CHANGED,
// GET_CONSUMER_RUNNING_INFO); the client's handlers answer them.
func TestServerToClientRequests(t *testing.T) {
	connected := make(chan *Conn, 1)
	s := startServer(t, ServerOptions{}, func(s *Server) {
		s.OnConnect(func(c *Conn) { connected <- c })
		// A handler that calls back into the client while serving it.
		s.Handle(34, func(ctx context.Context, conn *Conn, req *Command) *Command {
			ask := NewRequest(307, map[string]string{"consumerGroup": "g"}, nil)
			answer, err := conn.Invoke(ctx, ask)
			if err != nil {
				return NewResponse(req, ResponseCodeSystemError, err.Error())
			}
			resp := NewResponse(req, 0, "")
			resp.Body = answer.Body
			return resp
		})
	})
	c := newTestClient(t, ClientOptions{})
	notified := make(chan string, 1)
	c.Handle(307, func(_ context.Context, conn *Conn, req *Command) *Command {
		resp := NewResponse(req, 0, "")
		resp.Body = []byte("running info of " + req.Ext("consumerGroup"))
		return resp
	})
	c.Handle(40, func(_ context.Context, _ *Conn, req *Command) *Command {
		notified <- req.Ext("consumerGroup")
		return nil // the Go client never answers 40
	})
	ctx := invokeCtx(t, 5*time.Second)

	resp, err := c.Invoke(ctx, s.Addr(), NewRequest(34, nil, nil))
	testutil.NoError(t, err)
	testutil.Equal(t, string(resp.Body), "running info of g")

	// The server side pushes on its accepted connection directly.
	sc := <-connected
	answer, err := sc.Invoke(ctx, NewRequest(307, map[string]string{"consumerGroup": "h"}, nil))
	testutil.NoError(t, err)
	testutil.Equal(t, string(answer.Body), "running info of h")
	testutil.NoError(t, sc.InvokeOneway(NewRequest(40, map[string]string{"consumerGroup": "cg"}, nil)))
	testutil.Equal(t, <-notified, "cg")

	// A request the client has no handler for is dropped, not answered: the
	// server's call times out.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = sc.Invoke(short, NewRequest(999, nil, nil))
	testutil.ErrorIs(t, err, ErrTimeout)
}

func TestServerConnOnCloseHooks(t *testing.T) {
	var serverSide atomic.Pointer[Conn]
	closed := make(chan string, 4)
	s := startServer(t, ServerOptions{}, func(s *Server) {
		s.Handle(1, echoHandler)
		s.OnConnect(func(c *Conn) {
			serverSide.Store(c)
			c.SetValue("who", "client-1")
			c.OnClose(func(c *Conn) { closed <- "first " + c.Value("who").(string) })
			c.OnClose(func(*Conn) { closed <- "second" })
		})
	})
	c := newTestClient(t, ClientOptions{})
	_, err := c.Invoke(invokeCtx(t, 5*time.Second), s.Addr(), NewRequest(1, nil, nil))
	testutil.NoError(t, err)
	testutil.Equal(t, len(s.Conns()), 1)
	c.CloseConn(s.Addr())
	testutil.Equal(t, <-closed, "first client-1")
	testutil.Equal(t, <-closed, "second")
	sc := serverSide.Load()
	<-sc.Done()
	testutil.True(t, sc.Err() != nil, "Err set after close")
	testutil.Eventually(t, 5*time.Second, func() error {
		if n := len(s.Conns()); n != 0 {
			return fmt.Errorf("%d server connections", n)
		}
		return nil
	})
	// A hook added after the close runs at once; none runs twice.
	sc.OnClose(func(*Conn) { closed <- "late" })
	testutil.Equal(t, <-closed, "late")
	sc.Close()
	select {
	case extra := <-closed:
		t.Fatalf("hook ran again: %s", extra)
	default:
	}
}

func TestServerHandlerPanicAnswersSystemError(t *testing.T) {
	logger, logs := newTestLogger(slog.LevelInfo)
	s := startServer(t, ServerOptions{Logger: logger}, func(s *Server) {
		s.Handle(1, echoHandler)
		s.Handle(66, func(context.Context, *Conn, *Command) *Command { panic("boom") })
	})
	c := newTestClient(t, ClientOptions{})
	ctx := invokeCtx(t, 5*time.Second)
	resp, err := c.Invoke(ctx, s.Addr(), NewRequest(66, nil, nil))
	testutil.NoError(t, err)
	testutil.Equal(t, resp.Code, ResponseCodeSystemError)
	testutil.True(t, !strings.Contains(resp.Remark, "boom"), "the panic value stays in the log, not the remark")
	logs.waitFor(t, "handler panicked")
	_, err = c.Invoke(ctx, s.Addr(), NewRequest(1, nil, nil))
	testutil.NoError(t, err, "server still serves")
}

// A handler may answer later through Conn.Respond (long polling does).
func TestServerDeferredRespond(t *testing.T) {
	s := startServer(t, ServerOptions{}, func(s *Server) {
		s.Handle(11, func(_ context.Context, conn *Conn, req *Command) *Command {
			go func() {
				resp := NewResponse(req, 19, "")
				resp.SetExt("nextBeginOffset", "5")
				conn.Respond(resp)
			}()
			return nil
		})
	})
	c := newTestClient(t, ClientOptions{})
	resp, err := c.Invoke(invokeCtx(t, 5*time.Second), s.Addr(), NewRequest(11, nil, nil))
	testutil.NoError(t, err)
	testutil.Equal(t, resp.Code, int32(19))
	testutil.Equal(t, resp.Ext("nextBeginOffset"), "5")
}

// Handlers see the server's context end when it closes, so parked requests
// let Close finish.
func TestServerCloseCancelsHandlerContext(t *testing.T) {
	s, err := NewServer(ServerOptions{Listen: "127.0.0.1:0"})
	testutil.NoError(t, err)
	parked := make(chan struct{})
	s.Handle(11, func(ctx context.Context, _ *Conn, req *Command) *Command {
		close(parked)
		<-ctx.Done()
		return NewResponse(req, 19, "")
	})
	go s.Serve()
	c := NewClient(ClientOptions{})
	defer c.Close()
	errCh := make(chan error, 1)
	go func() {
		_, err := c.Invoke(context.Background(), s.Addr(), NewRequest(11, nil, nil))
		errCh <- err
	}()
	<-parked
	testutil.NoError(t, s.Close())
	testutil.NoError(t, s.Close(), "second Close")
	<-s.Context().Done()
	// The parked call ends: with the handler's answer if it was written
	// before the connection closed, else with ErrConnClosed.
	if err := <-errCh; err != nil {
		testutil.ErrorIs(t, err, ErrConnClosed)
	}
}

func TestServerCloseLeavesNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	s, err := NewServer(ServerOptions{Listen: "127.0.0.1:0"})
	testutil.NoError(t, err)
	s.Handle(1, echoHandler)
	served := make(chan error, 1)
	go func() { served <- s.Serve() }()
	c := NewClient(ClientOptions{})
	c.Handle(40, func(context.Context, *Conn, *Command) *Command { return nil })
	ctx := invokeCtx(t, 5*time.Second)
	for i := range 20 {
		_, err := c.Invoke(ctx, s.Addr(), NewRequest(1, map[string]string{"i": strconv.Itoa(i)}, nil))
		testutil.NoError(t, err)
	}
	done := make(chan struct{})
	c.InvokeAsync(ctx, s.Addr(), NewRequest(1, nil, nil), time.Second, func(*Command, error) { close(done) })
	<-done
	for _, sc := range s.Conns() {
		testutil.NoError(t, sc.InvokeOneway(NewRequest(40, nil, nil)))
	}

	testutil.NoError(t, c.Close())
	testutil.NoError(t, c.Close(), "second client Close")
	testutil.NoError(t, s.Close())
	testutil.NoError(t, s.Close(), "second server Close")
	testutil.NoError(t, <-served)
	_, err = c.Invoke(ctx, s.Addr(), NewRequest(1, nil, nil))
	testutil.ErrorIs(t, err, ErrClientClosed)
	testutil.Eventually(t, 5*time.Second, func() error {
		if n := runtime.NumGoroutine(); n > before {
			return fmt.Errorf("%d goroutines, %d before", n, before)
		}
		return nil
	})
}

// Regression: a connection accepted while Close ran could add to the wait
// group that Close was already waiting on.
func TestServerCloseWhileAccepting(t *testing.T) {
	for range 20 {
		s, err := NewServer(ServerOptions{Listen: "127.0.0.1:0"})
		testutil.NoError(t, err)
		var accepted atomic.Int32
		s.OnConnect(func(*Conn) { accepted.Add(1) })
		go s.Serve()
		addr := s.Addr()
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					nc, err := net.Dial("tcp", addr)
					if err != nil {
						return
					}
					nc.Close()
				}
			}()
		}
		// Close while accepts are in flight.
		testutil.Eventually(t, 5*time.Second, func() error {
			if accepted.Load() == 0 {
				return errors.New("nothing accepted yet")
			}
			return nil
		})
		testutil.NoError(t, s.Close())
		close(stop)
		wg.Wait()
	}
}
