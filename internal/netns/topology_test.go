package netns_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/netns"
	"github.com/zonemq/zonemq/internal/testutil"
)

const testPrefix = "zqnt"

// blockedWait is how long a probe waits before calling a path blocked. Cut
// paths drop packets, so a probe can only time out; this bounds the test,
// it is not a latency claim.
const blockedWait = 400 * time.Millisecond

// newTopology builds a topology for one test and removes it when the test
// ends, or on ^C. It skips where namespaces cannot be made, and drops the
// link shaping (with a note in the log) where the kernel has no netem.
func newTopology(t *testing.T, cfg netns.Config) *netns.Topology {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping: network namespaces need root (CI runs as root)")
	}
	netns.CloseOnSignal()
	if cfg.Prefix == "" {
		cfg.Prefix = testPrefix
	}
	topo, err := netns.New(context.Background(), cfg)
	if errors.Is(err, netns.ErrNoNetem) {
		// Cuts do not need netem; only the delays are lost.
		t.Logf("NOTE: %v; running with unshaped links, RTTs below are the bare veth and bridge path", err)
		cfg.Default, cfg.Links = netns.Link{}, nil
		topo, err = netns.New(context.Background(), cfg)
	}
	if errors.Is(err, netns.ErrUnavailable) {
		t.Skipf("skipping: cannot create network namespaces here: %v", err)
	}
	testutil.NoError(t, err, "netns.New")
	t.Cleanup(func() {
		if err := topo.Close(); err != nil {
			t.Errorf("closing the topology: %v", err)
		}
	})
	return topo
}

// echoServer listens on IDC n's address and echoes every connection until
// the test ends.
func echoServer(t *testing.T, topo *netns.Topology, n int) string {
	t.Helper()
	var ln net.Listener
	testutil.NoError(t, topo.Do(n, func() error {
		var err error
		ln, err = net.Listen("tcp", netip.AddrPortFrom(netns.Addr(n), 0).String())
		return err
	}), "listen in IDC", n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(c, c) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// dial connects from IDC n to addr with the topology's Dialer, as the
// drill's SDK clients do.
func dial(topo *netns.Topology, n int, addr string, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return topo.Dialer(n)(ctx, "tcp", addr)
}

// echoOnce dials from IDC n and checks one echoed round trip.
func echoOnce(topo *netns.Topology, n int, addr string) error {
	c, err := dial(topo, n, addr, blockedWait)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(blockedWait))
	if _, err := c.Write([]byte("ping")); err != nil {
		return err
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if string(buf) != "ping" {
		return fmt.Errorf("echo returned %q", buf)
	}
	return nil
}

func requireReach(t *testing.T, topo *netns.Topology, from int, addr string) {
	t.Helper()
	testutil.Eventually(t, 5*time.Second, func() error { return echoOnce(topo, from, addr) })
}

func requireBlocked(t *testing.T, topo *netns.Topology, from int, addr string) {
	t.Helper()
	if err := echoOnce(topo, from, addr); err == nil {
		t.Fatalf("IDC %d reached %s through a cut", from, addr)
	}
}

// roundTrips measures count echoed one-byte round trips on one connection.
func roundTrips(t *testing.T, topo *netns.Topology, from int, addr string, count int) []time.Duration {
	t.Helper()
	c, err := dial(topo, from, addr, 5*time.Second)
	testutil.NoError(t, err, "dial")
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	buf := []byte{0}
	var rtts []time.Duration
	for range count {
		start := time.Now()
		_, err := c.Write(buf)
		testutil.NoError(t, err, "write")
		_, err = io.ReadFull(c, buf)
		testutil.NoError(t, err, "read")
		rtts = append(rtts, time.Since(start))
	}
	sort.Slice(rtts, func(i, j int) bool { return rtts[i] < rtts[j] })
	return rtts
}

func TestNetnsReachAndRTT(t *testing.T) {
	topo := newTopology(t, netns.Config{
		IDCs:    3,
		Default: netns.Link{Delay: 5 * time.Millisecond},
		Links:   map[netns.Pair]netns.Link{{A: 1, B: 3}: {Delay: 15 * time.Millisecond, Jitter: time.Millisecond}},
	})
	t.Logf("links shaped by: %q (configured RTT: idc1–idc2 10 ms, idc1–idc3 30 ms ± 2 ms)", topo.Shaper())
	addr := echoServer(t, topo, 1)
	for _, from := range []int{1, 2, 3} {
		requireReach(t, topo, from, addr)
		rtts := roundTrips(t, topo, from, addr, 20)
		t.Logf("idc%d → idc1 RTT over 20 round trips: min %v median %v max %v",
			from, rtts[0], rtts[len(rtts)/2], rtts[len(rtts)-1])
	}

	out, err := topo.Command(context.Background(), 2, "ip", "-o", "-4", "addr", "show", "dev", "eth0").CombinedOutput()
	testutil.NoError(t, err, "ip addr inside idc2: ", string(out))
	if !strings.Contains(string(out), "198.18.2.1/24") {
		t.Fatalf("idc2's eth0 has no 198.18.2.1/24:\n%s", out)
	}
	route, err := topo.Command(context.Background(), 2, "ip", "-4", "route").CombinedOutput()
	testutil.NoError(t, err, "ip route inside idc2: ", string(route))
	if strings.Contains(string(route), "default") {
		t.Fatalf("idc2 has a default route; traffic could leave the topology:\n%s", route)
	}
	// Nothing of the topology may appear in the machine's own namespace.
	root, err := exec.Command("ip", "-o", "addr").CombinedOutput()
	testutil.NoError(t, err, "ip addr in the root namespace")
	if bytes.Contains(root, []byte("198.18.")) {
		t.Fatalf("the root namespace holds a 198.18 address:\n%s", root)
	}
}

func TestNetnsCutAndHeal(t *testing.T) {
	topo := newTopology(t, netns.Config{IDCs: 3, Default: netns.Link{Delay: time.Millisecond}})
	addr := echoServer(t, topo, 1)
	requireReach(t, topo, 2, addr)

	testutil.NoError(t, topo.Cut(context.Background(), 1, 2), "cut")
	requireBlocked(t, topo, 2, addr)
	requireReach(t, topo, 3, addr)
	testutil.Equal(t, fmt.Sprint(topo.Cuts()), fmt.Sprint([]netns.Pair{{A: 1, B: 2}, {A: 2, B: 1}}), "cuts")

	testutil.NoError(t, topo.Heal(context.Background()), "heal")
	requireReach(t, topo, 2, addr)
	testutil.Equal(t, len(topo.Cuts()), 0, "cuts after heal")
}

// udpSocket opens a datagram socket on IDC n's address.
func udpSocket(t *testing.T, topo *netns.Topology, n int) *net.UDPConn {
	t.Helper()
	var c *net.UDPConn
	testutil.NoError(t, topo.Do(n, func() error {
		var err error
		c, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(netns.Addr(n), 0)))
		return err
	}), "udp socket in IDC", n)
	t.Cleanup(func() { c.Close() })
	return c
}

// datagramArrives sends a tagged datagram from → to and reports whether it
// is read within blockedWait. Older datagrams still in flight are skipped.
func datagramArrives(from, to *net.UDPConn, tag string) (bool, error) {
	if _, err := from.WriteToUDP([]byte(tag), to.LocalAddr().(*net.UDPAddr)); err != nil {
		return false, err
	}
	buf := make([]byte, 64)
	_ = to.SetReadDeadline(time.Now().Add(blockedWait))
	for {
		n, _, err := to.ReadFromUDP(buf)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if string(buf[:n]) == tag {
			return true, nil
		}
	}
}

// TCP cannot show a one-way cut (its handshake needs both directions), so
// this test sends datagrams.
func TestNetnsCutOneWay(t *testing.T) {
	topo := newTopology(t, netns.Config{IDCs: 2, Default: netns.Link{Delay: time.Millisecond}})
	one, two := udpSocket(t, topo, 1), udpSocket(t, topo, 2)
	probe := 0
	expect := func(from, to *net.UDPConn, want bool, what string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			probe++
			got, err := datagramArrives(from, to, fmt.Sprintf("probe-%d", probe))
			testutil.NoError(t, err, what)
			if got == want {
				return
			}
			// A delivered datagram through a cut is a failure at once; a
			// lost one on an open path may be ARP still resolving: retry.
			if got || time.Now().After(deadline) {
				t.Fatalf("%s: delivered=%v, want %v", what, got, want)
			}
		}
	}
	expect(one, two, true, "1→2 before the cut")
	testutil.NoError(t, topo.CutOneWay(context.Background(), 1, 2), "cut one way")
	expect(one, two, false, "1→2 while cut")
	expect(two, one, true, "2→1 while 1→2 is cut")
	testutil.NoError(t, topo.Heal(context.Background()), "heal")
	expect(one, two, true, "1→2 after heal")
}

func TestNetnsIsolate(t *testing.T) {
	topo := newTopology(t, netns.Config{IDCs: 3, Default: netns.Link{Delay: time.Millisecond}})
	in1, in3 := echoServer(t, topo, 1), echoServer(t, topo, 3)
	requireReach(t, topo, 2, in1)
	requireReach(t, topo, 1, in3)

	testutil.NoError(t, topo.Isolate(context.Background(), 1), "isolate")
	requireBlocked(t, topo, 2, in1)
	requireBlocked(t, topo, 3, in1)
	requireBlocked(t, topo, 1, in3)
	requireReach(t, topo, 1, in1) // its own processes still talk
	requireReach(t, topo, 2, in3) // the others are untouched

	testutil.NoError(t, topo.Heal(context.Background()), "heal")
	requireReach(t, topo, 2, in1)
	requireReach(t, topo, 1, in3)
}

func TestNetnsCloseRemovesEverything(t *testing.T) {
	const prefix = "zqntclose"
	if os.Geteuid() == 0 {
		// A leftover of a run whose process is gone (no pid is this large):
		// New must remove it.
		if err := exec.Command("ip", "netns", "add", prefix+"-999999999-dead-br").Run(); err != nil {
			t.Skipf("skipping: cannot create network namespaces here: %v", err)
		}
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", prefix+"-999999999-dead-br").Run() })
	}
	topo := newTopology(t, netns.Config{Prefix: prefix, IDCs: 2})
	names, err := netns.List(context.Background(), prefix)
	testutil.NoError(t, err, "list")
	if slices.Contains(names, prefix+"-999999999-dead-br") {
		t.Fatalf("New left an earlier run's namespace in place: %v", names)
	}
	for _, n := range topo.Names() {
		if !slices.Contains(names, n) {
			t.Fatalf("namespace %s missing while the topology is open: %v", n, names)
		}
	}

	testutil.NoError(t, topo.Close(), "close")
	testutil.NoError(t, topo.Close(), "second close")
	names, err = netns.List(context.Background(), prefix)
	testutil.NoError(t, err, "list after close")
	if len(names) != 0 {
		t.Fatalf("namespaces left after Close: %v", names)
	}
	if err := topo.Cut(context.Background(), 1, 2); err == nil {
		t.Fatal("Cut on a closed topology succeeded")
	}
}

func TestNetnsConfigErrors(t *testing.T) {
	for _, cfg := range []netns.Config{
		{IDCs: 2},
		{Prefix: "x", IDCs: 0},
		{Prefix: "x", IDCs: netns.MaxIDCs + 1},
		{Prefix: "x", IDCs: 2, Default: netns.Link{Delay: time.Millisecond, Jitter: 2 * time.Millisecond}},
		{Prefix: "x", IDCs: 2, Default: netns.Link{LossPercent: 101}},
		{Prefix: "x", IDCs: 2, Links: map[netns.Pair]netns.Link{{A: 1, B: 3}: {}}},
	} {
		if _, err := netns.New(context.Background(), cfg); err == nil || errors.Is(err, netns.ErrUnavailable) {
			t.Errorf("New(%+v) = %v; want a configuration error", cfg, err)
		}
	}
}

func TestNetnsCutService(t *testing.T) {
	topo := newTopology(t, netns.Config{IDCs: 3})
	cut, other := echoServer(t, topo, 1), echoServer(t, topo, 1)
	requireReach(t, topo, 2, cut)

	testutil.NoError(t, topo.CutService(context.Background(), 2, netip.MustParseAddrPort(cut)), "cut service")
	requireBlocked(t, topo, 2, cut)
	requireReach(t, topo, 2, other) // the same IDC's other services
	requireReach(t, topo, 3, cut)   // the service from elsewhere
	requireReach(t, topo, 1, cut)   // and from its own IDC

	testutil.NoError(t, topo.Heal(context.Background()), "heal")
	requireReach(t, topo, 2, cut)
	if err := topo.CutService(context.Background(), 1, netip.MustParseAddrPort(cut)); err == nil {
		t.Fatal("cutting a service from its own IDC succeeded")
	}
}

// A degraded link carries its new shaping until Restore: every round trip
// over a link degraded by 40 ms each way takes at least 80 ms (a packet
// cannot arrive before its delay), and after Restore the link is as built.
func TestNetnsDegradeAndRestore(t *testing.T) {
	topo := newTopology(t, netns.Config{IDCs: 2, Default: netns.Link{Delay: time.Millisecond}})
	addr := echoServer(t, topo, 1)
	requireReach(t, topo, 2, addr)
	ctx := context.Background()
	slow := netns.Link{Delay: 40 * time.Millisecond, Jitter: 5 * time.Millisecond, LossPercent: 1}
	testutil.NoError(t, topo.Degrade(ctx, 1, 2, slow), "degrade 1→2")
	testutil.NoError(t, topo.Degrade(ctx, 2, 1, slow), "degrade 2→1")
	rtts := roundTrips(t, topo, 2, addr, 5)
	testutil.True(t, rtts[0] >= 70*time.Millisecond, "degraded round trips take the added delay", rtts)
	testutil.NoError(t, topo.Restore(ctx), "restore")
	rtts = roundTrips(t, topo, 2, addr, 5)
	testutil.True(t, rtts[0] < 70*time.Millisecond, "restored", rtts)
	testutil.True(t, topo.Degrade(ctx, 1, 5, slow) != nil, "an IDC the topology does not have is refused")
}
