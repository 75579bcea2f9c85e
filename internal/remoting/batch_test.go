package remoting

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/testutil"
)

// TestInlineBatchEndsBeforeOtherRequests: requests of a batch's codes are
// kept by Add and answered by End, which runs before a request of another
// code and after the last frame of a read; all answers leave in one write,
// in arrival order.
func TestInlineBatchEndsBeforeOtherRequests(t *testing.T) {
	var kept []*Command
	var ends []int
	b := &InlineBatch{
		Add: func(_ context.Context, _ *Conn, req *Command) *Command {
			kept = append(kept, req)
			return nil
		},
		End: func(c *Conn) {
			ends = append(ends, len(kept))
			for _, req := range kept {
				resp := NewResponse(req, 0, "")
				resp.ExtFields = map[string]string{"i": req.Ext("i")}
				testutil.NoError(t, c.QueueResponse(req, resp))
			}
			kept = kept[:0]
		},
	}
	other := func(ctx context.Context, c *Conn, req *Command) *Command {
		testutil.Equal(t, len(kept), 0, "the batch ended before another code ran")
		return echoHandler(ctx, c, req)
	}
	s := startServer(t, ServerOptions{}, func(s *Server) {
		s.HandleInlineBatch([]int32{10, 11}, b)
		s.HandleInline(12, other)
	})
	client, counted := servePipe(t, s)
	frames := requestFrames(30, 10, 1)
	frames = append(frames, requestFrames(1, 12, 31)...)
	frames = append(frames, requestFrames(33, 11, 32)...)
	go client.Write(frames)

	r := bufio.NewReader(client)
	client.SetReadDeadline(time.Now().Add(10 * time.Second))
	for i := range 64 {
		resp, err := ReadFrame(r, DefaultMaxFrameSize)
		testutil.NoError(t, err, "response", i)
		testutil.Equal(t, resp.Opaque, int32(i+1), "opaque")
		testutil.True(t, resp.IsResponse(), "flagged as a response")
	}
	testutil.Equal(t, fmt.Sprint(ends), "[30 33]", "requests per End")
	testutil.Equal(t, counted.writes.Load(), int64(1), "write calls for 64 responses")
}

// TestInlineBatchEndPanicClosesConn: a panicking End closes the connection
// instead of leaving its requests unanswered.
func TestInlineBatchEndPanicClosesConn(t *testing.T) {
	b := &InlineBatch{
		Add: func(context.Context, *Conn, *Command) *Command { return nil },
		End: func(*Conn) { panic("boom") },
	}
	s := startServer(t, ServerOptions{}, func(s *Server) { s.HandleInlineBatch([]int32{10}, b) })
	client, _ := servePipe(t, s)
	go client.Write(requestFrames(3, 10, 1))
	client.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := ReadFrame(bufio.NewReader(client), DefaultMaxFrameSize)
	testutil.True(t, err != nil && !errors.Is(err, os.ErrDeadlineExceeded), "the connection closed, got", err)
}
