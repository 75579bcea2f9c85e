package drill

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/testutil"
)

// A process is ready when it answers a request, not when it listens: a
// broker listens before it opens its store and may exit right after.
func TestReadyMeansAnswering(t *testing.T) {
	for _, answers := range []bool{false, true} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		testutil.NoError(t, err)
		done := make(chan struct{})
		go func() {
			defer close(done)
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			buf := make([]byte, len(probeFrame))
			if _, err := io.ReadFull(c, buf); err == nil && answers {
				c.Write([]byte{0, 0, 0, 4, 0, 0, 0, 0})
			}
			c.SetReadDeadline(time.Now().Add(time.Second))
			c.Read(buf) // until the prober hangs up
		}()
		c, err := net.Dial("tcp", ln.Addr().String())
		testutil.NoError(t, err)
		got := remotingAnswers(c, 300*time.Millisecond)
		c.Close()
		<-done
		ln.Close()
		testutil.Equal(t, got, answers, "a server that answers:", answers)
	}
}
