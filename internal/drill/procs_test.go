package drill

import (
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
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

// Starting a process that is already up waits for it instead of failing,
// and one that died since is started again. (The 60-minute campaign: a
// broker verifying its log after a power loss took 22 s to answer, the
// start gave up at 20 s, and every retry then failed with "already
// running" until the campaign ended.)
func TestStartIsIdempotent(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	testutil.NoError(t, err)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	ctx := t.Context()
	for _, tc := range []struct {
		binary string
		args   []string
	}{{"/bin/sleep", []string{"30"}}, {"/bin/true", nil}} {
		p := &proc{role: roleProxy, idc: "idc1", addr: ln.Addr().String(), binary: tc.binary, args: tc.args,
			logPath: t.TempDir() + "/p.log"}
		testutil.NoError(t, p.start(ctx), "first start of", tc.binary)
		if tc.binary == "/bin/true" {
			p.mu.Lock()
			exited := p.exited
			p.mu.Unlock()
			<-exited
		}
		testutil.NoError(t, p.start(ctx), "second start of", tc.binary)
		testutil.NoError(t, p.kill())
	}
}

// A consumer process that exits on its own is started again a second
// later, and a fault on it while it is down does nothing; one the drill
// stops stays stopped. (The fourth 60-minute campaign ended on a pause of
// a `zonemq consume` that had given up at start.)
func TestConsumerThatExitsOnItsOwnIsRestarted(t *testing.T) {
	dir := t.TempDir()
	c := newConsumerProc("/bin/false", dir, &idcProcs{name: "idc1", ip: "127.0.1.1", broker: &proc{}}, nil)
	t.Cleanup(func() { // no restart after the test
		c.mu.Lock()
		c.ending = true
		c.mu.Unlock()
	})
	testutil.NoError(t, c.start(t.Context()))
	testutil.Eventually(t, 10*time.Second, func() error {
		b, _ := os.ReadFile(c.logPath)
		if n := strings.Count(string(b), "starting it again"); n < 2 {
			return fmt.Errorf("restarted %d times", n)
		}
		return nil
	})
	testutil.NoError(t, c.signal(syscall.SIGSTOP), "a pause of a consumer that is down or exiting")
	testutil.NoError(t, c.signal(syscall.SIGCONT))
	testutil.NoError(t, c.kill())
}
