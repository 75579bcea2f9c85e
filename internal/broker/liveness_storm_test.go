package broker

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/testutil"
)

// procStatusKB reads a "Vm…" line of /proc/self/status in KiB (0 if none).
func procStatusKB(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte(field+":")); ok {
			n, _ := strconv.ParseInt(string(bytes.Fields(v)[0]), 10, 64)
			return n
		}
	}
	return 0
}

// routeSampler asks the name server for the broker every interval and
// counts the samples that lack it.
type routeSampler struct {
	samples, misses atomic.Int64
	stop            chan struct{}
	done            chan struct{}
}

func startRouteSampler(t *testing.T, nsAddr string, s *Server) *routeSampler {
	rs := &routeSampler{stop: make(chan struct{}), done: make(chan struct{})}
	c := newRawClient(t)
	go func() {
		defer close(rs.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-rs.stop:
				return
			case <-tick.C:
			}
			addr, _, err := registeredAt(t, c, nsAddr, s.opts.BrokerName)
			rs.samples.Add(1)
			if err != nil || addr != s.Addr() {
				rs.misses.Add(1)
				t.Logf("sample %d: the name server does not list the broker (%v)", rs.samples.Load(), err)
			}
		}
	}()
	t.Cleanup(rs.close)
	return rs
}

func (rs *routeSampler) close() {
	select {
	case <-rs.stop:
	default:
		close(rs.stop)
	}
	<-rs.done
}

// waitSamples waits until n more samples have been taken: the storm lasts
// that long under the name server's eye.
func (rs *routeSampler) waitSamples(t *testing.T, n int64) {
	want := rs.samples.Load() + n
	testutil.Eventually(t, time.Duration(n)*time.Second, func() error {
		if got := rs.samples.Load(); got < want {
			return fmt.Errorf("%d of %d samples", got, want)
		}
		return nil
	})
}

// Issue 12: storms of parked long polls (expiring together) and of
// connections holding most of an unfinished maximal frame must not drop the
// broker from the name server's routes (3 s broker expiry, default
// timings), and its memory must stay bounded. The test samples the name
// server every 100 ms throughout and logs the process's peak RSS (broker
// and attack clients share the process).
func TestBrokerNotDroppedUnderStorms(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two bounded storms of ~5 s each; skipped with -short")
	}
	ns := startNamesrv(t, "127.0.1.1:0", "idc1", nil)
	opts := testBrokerOptions(t, "127.0.1.1", "idc1", "broker-storm", ns.Addr())
	if raceDetector {
		// The race detector multiplies memory several times over: a 256 MiB
		// budget becomes a gigabyte and stalls a shared test machine.
		opts.Hardening.MaxReceivingBytes = 64 << 20
	}
	s := startBroker(t, opts)
	c := newRawClient(t)
	createTopic(t, c, s.Addr(), "StormTopic", 8)
	waitRegistered(t, c, ns.Addr(), s)
	rssStart := procStatusKB("VmRSS")
	rs := startRouteSampler(t, ns.Addr(), s)

	// Storm 1: 20 000 long polls pipelined over 10 connections, parked
	// together, expiring together (the default 15 s hold).
	pollConns, pollsPerConn := 10, 2000
	if raceDetector {
		pollsPerConn = 200 // the race detector slows the broker tenfold
	}
	handledBefore := s.pullCount.Load()
	var readers sync.WaitGroup
	for i := range pollConns {
		nc, err := net.Dial("tcp", s.Addr())
		testutil.NoError(t, err)
		t.Cleanup(func() { nc.Close() })
		var buf bytes.Buffer
		for j := range pollsPerConn {
			buf.Write(remoting.EncodeFrame(suspendedPull("storm_cg", "StormTopic", int32(j%8), 0)))
		}
		readers.Add(1)
		go func() { // read and drop the answers (unsent-byte caps are another test's)
			defer readers.Done()
			io.Copy(io.Discard, bufio.NewReader(nc))
		}()
		go func() { nc.Write(buf.Bytes()) }()
		_ = i
	}
	// Wait until every pull has been handled (parked, unless the first ones
	// already expired on a slow machine), then for the expiries.
	parkStart := time.Now()
	testutil.Eventually(t, 120*time.Second, func() error {
		if n := s.pullCount.Load() - handledBefore; n < int64(pollConns*pollsPerConn) {
			return fmt.Errorf("%d pulls handled", n)
		}
		return nil
	})
	rssParked := procStatusKB("VmRSS")
	t.Logf("storm 1: %d pulls handled in %v, %d parked now", pollConns*pollsPerConn, time.Since(parkStart).Round(time.Millisecond), s.pulls.parked())
	testutil.Eventually(t, 120*time.Second, func() error {
		if n := s.pulls.parked(); n != 0 {
			return fmt.Errorf("%d pulls still parked", n)
		}
		return nil
	})
	rs.waitSamples(t, 10)
	t.Logf("storm 1: %d long polls parked: RSS %d → %d MiB; route samples %d, missing %d",
		pollConns*pollsPerConn, rssStart>>10, rssParked>>10, rs.samples.Load(), rs.misses.Load())

	// Storm 2: 40 connections each send 15 MiB of a 16 MiB frame and stop.
	frameConns := 40
	if raceDetector {
		frameConns = 20
	}
	partial := make([]byte, 15<<20)
	binary.BigEndian.PutUint32(partial, 16<<20-4)
	binary.BigEndian.PutUint32(partial[4:], 64) // a header length; the rest is zeros
	for range frameConns {
		nc, err := net.Dial("tcp", s.Addr())
		testutil.NoError(t, err)
		t.Cleanup(func() { nc.Close() })
		go func() {
			nc.SetWriteDeadline(time.Now().Add(60 * time.Second))
			nc.Write(partial) // blocks once the broker stops reading; fails at close
		}()
	}
	testutil.Eventually(t, 60*time.Second, func() error {
		if n := s.remoting.ReceivingBytes(); n < opts.Hardening.MaxReceivingBytes-16<<20 {
			return fmt.Errorf("%d MiB reserved", n>>20)
		}
		return nil
	})
	rs.waitSamples(t, 50) // 5 s: longer than the name server's 3 s expiry
	rssFrames := procStatusKB("VmRSS")
	t.Logf("storm 2: %d connections holding 15 MiB of a 16 MiB frame: %d MiB reserved (budget %d MiB), RSS %d MiB; route samples %d, missing %d",
		frameConns, s.remoting.ReceivingBytes()>>20, opts.Hardening.MaxReceivingBytes>>20, rssFrames>>10, rs.samples.Load(), rs.misses.Load())
	t.Logf("peak RSS of the test process (broker and attack clients): %d MiB", procStatusKB("VmHWM")>>10)

	rs.close()
	testutil.Equal(t, rs.misses.Load(), int64(0), "samples in which the name server did not list the broker")
	testutil.True(t, s.remoting.ReceivingBytes() <= opts.Hardening.MaxReceivingBytes, "the receive budget held")
}
