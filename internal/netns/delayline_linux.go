//go:build linux && (amd64 || arm64)

package netns

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// The delay line shapes links in user space, for kernels built without
// netem. Each IDC namespace gets a TUN device, dly0, and a policy rule that
// sends every packet the IDC itself originates towards 198.18.0.0/15 into
// it; this process reads each packet, holds it for the Link's delay (FIFO
// per destination IDC, so jitter never reorders), drops its share of loss,
// and writes it back, whereupon the IDC forwards it out of eth0 as usual.
// Cuts stay on the bridge, so they work the same. The delay line lives as
// long as this process: a topology shaped this way is only for tests and the
// drill, whose process outlives what runs inside.

const (
	tunDevice   = "dly0"
	tunSetIff   = 0x400454ca // TUNSETIFF
	iffTun      = 0x0001
	iffNoPI     = 0x1000
	delayTable  = "100"
	delayQueue  = 8192 // packets held per direction before dropping
	maxPacket   = 65536
	ifreqLength = 40
)

// delayLine is the running user-space shaper of one topology.
type delayLine struct {
	files []*os.File
	wg    sync.WaitGroup
}

// heldPacket is one packet waiting for its due time.
type heldPacket struct {
	due  time.Time
	data []byte
}

// startDelayLine sets up every IDC's TUN device and routes, then starts
// the readers and the per-direction writers.
func (t *Topology) startDelayLine(ctx context.Context) (*delayLine, error) {
	dl := &delayLine{}
	for n := 1; n <= t.cfg.IDCs; n++ {
		f, err := t.openTun(ctx, n)
		if err != nil {
			dl.stop()
			return nil, fmt.Errorf("netns: user-space delay line in IDC %d: %w", n, err)
		}
		dl.files = append(dl.files, f)
	}
	for k, f := range dl.files {
		n := k + 1
		queues := map[int]chan heldPacket{}
		for m := 1; m <= t.cfg.IDCs; m++ {
			if m == n {
				continue
			}
			q := make(chan heldPacket, delayQueue)
			queues[m] = q
			dl.wg.Go(func() { writeLoop(f, q) })
		}
		dl.wg.Go(func() {
			t.readLoop(n, f, queues)
			for _, q := range queues {
				close(q)
			}
		})
	}
	return dl, nil
}

// openTun creates dly0 inside IDC n and routes the IDC's own outbound
// traffic through it.
func (t *Topology) openTun(ctx context.Context, n int) (*os.File, error) {
	var f *os.File
	err := t.Do(n, func() error {
		// The device is created in the namespace of the thread that opens
		// the control file, hence inside Do.
		fd, err := syscall.Open("/dev/net/tun", syscall.O_RDWR|syscall.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("%w: /dev/net/tun: %w", ErrNoNetem, err)
		}
		var req [ifreqLength]byte
		copy(req[:], tunDevice)
		*(*uint16)(unsafe.Pointer(&req[16])) = iffTun | iffNoPI
		if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), tunSetIff, uintptr(unsafe.Pointer(&req[0]))); errno != 0 {
			syscall.Close(fd)
			return fmt.Errorf("TUNSETIFF: %w", errno)
		}
		if err := syscall.SetNonblock(fd, true); err != nil {
			syscall.Close(fd)
			return err
		}
		f = os.NewFile(uintptr(fd), tunDevice)
		// Packets come back out of dly0 with this IDC's own source
		// address and must be forwarded, not refused as martians.
		for _, s := range []struct{ path, value string }{
			{"/proc/sys/net/ipv4/conf/all/forwarding", "1"},
			{"/proc/sys/net/ipv4/conf/all/rp_filter", "0"},
			{"/proc/sys/net/ipv4/conf/" + tunDevice + "/rp_filter", "0"},
			{"/proc/sys/net/ipv4/conf/" + tunDevice + "/accept_local", "1"},
		} {
			if err := os.WriteFile(s.path, []byte(s.value), 0o644); err != nil {
				f.Close()
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	ns := t.Namespace(n)
	for _, s := range [][]string{
		{"-n", ns, "link", "set", tunDevice, "up"},
		{"-n", ns, "route", "add", "198.18.0.0/15", "dev", tunDevice, "src", Addr(n).String(), "table", delayTable},
		// iif lo is what the IDC itself originates; what comes out of dly0
		// (iif dly0) takes the main table, out of eth0.
		{"-n", ns, "rule", "add", "iif", "lo", "lookup", delayTable, "pref", "100"},
	} {
		if err := run(ctx, "ip", s...); err != nil {
			f.Close()
			return nil, err
		}
	}
	return f, nil
}

// readLoop takes IDC n's outbound packets off its TUN device and queues
// them per destination IDC until the file is closed.
func (t *Topology) readLoop(n int, f *os.File, queues map[int]chan heldPacket) {
	buf := make([]byte, maxPacket)
	for {
		size, err := f.Read(buf)
		if err != nil {
			if !errors.Is(err, os.ErrClosed) {
				t.log.Warn("netns: delay line read", "idc", n, "err", err)
			}
			return
		}
		if size < 20 || buf[0]>>4 != 4 {
			continue // not IPv4: nothing of ours
		}
		m := IDCOf(addrFrom4(buf[16:20]))
		q, ok := queues[m]
		if !ok {
			continue // no such IDC: the packet would have nowhere to go
		}
		l := t.link(n, m)
		if l.LossPercent > 0 && rand.Float64()*100 < l.LossPercent {
			continue
		}
		delay := l.Delay
		if l.Jitter > 0 {
			delay += time.Duration(rand.Int64N(int64(2*l.Jitter))) - l.Jitter
		}
		select {
		case q <- heldPacket{due: time.Now().Add(delay), data: append([]byte(nil), buf[:size]...)}:
		default: // queue full: a congested link drops
		}
	}
}

// writeLoop writes each held packet back when it is due, in order.
func writeLoop(f *os.File, q <-chan heldPacket) {
	for p := range q {
		if d := time.Until(p.due); d > 0 {
			time.Sleep(d)
		}
		_, _ = f.Write(p.data) // a closed file ends the loop with the queue
	}
}

// stop closes the devices and waits for the loops.
func (dl *delayLine) stop() {
	for _, f := range dl.files {
		f.Close()
	}
	dl.wg.Wait()
}
