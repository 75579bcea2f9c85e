package remoting

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/testutil"
)

// TestServerCallsEncodedAfterTheBodyIsTaken: a handler's response with
// Encoded set has it called exactly once, and only once the frame no longer
// needs Body: a handler lending Body from a pool may overwrite it then (the
// broker's pull answers do) and the client still gets the bytes it was
// sent. Both dispatch paths (a goroutine per request, and inline on the read
// loop) and bodies larger than a write buffer are covered; a write path that
// kept a reference to Body past Write would fail here.
func TestServerCallsEncodedAfterTheBodyIsTaken(t *testing.T) {
	var encoded atomic.Int64
	lend := func(_ context.Context, _ *Conn, req *Command) *Command {
		size := len(req.Body)
		body := bytes.Repeat([]byte{'b'}, size)
		resp := NewResponse(req, 0, "")
		resp.Body = body
		resp.Encoded = func() {
			encoded.Add(1)
			for i := range body {
				body[i] = 'X' // the pool hands the buffer to the next answer
			}
		}
		return resp
	}
	s := startServer(t, ServerOptions{}, func(s *Server) {
		s.Handle(11, lend)
		s.HandleInline(12, lend)
	})
	c := newTestClient(t, ClientOptions{})
	ctx := invokeCtx(t, 10*time.Second)
	calls := int64(0)
	for _, code := range []int32{11, 12} {
		for _, size := range []int{1, 4 << 10, 300 << 10} {
			resp, err := c.Invoke(ctx, s.Addr(), NewRequest(code, nil, make([]byte, size)))
			testutil.NoError(t, err)
			calls++
			testutil.Equal(t, len(resp.Body), size, fmt.Sprintf("code %d, %d bytes", code, size))
			testutil.True(t, bytes.Count(resp.Body, []byte{'b'}) == size, fmt.Sprintf("code %d, %d bytes: the body was overwritten before it was sent", code, size))
		}
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		if n := encoded.Load(); n != calls {
			return fmt.Errorf("Encoded called %d times for %d responses", n, calls)
		}
		return nil
	})
}
