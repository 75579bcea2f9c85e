package addrsrv_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/addrsrv"
	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/testutil"
)

// startPinging runs an address server whose probes, after the first, come
// only once a minute: whatever happens to a name server within a test is
// seen by the pings alone (default --ping-interval and --silent-after).
func startPinging(t *testing.T, namesrvs ...addrsrv.Namesrv) *addrsrv.Server {
	t.Helper()
	o := addrsrv.NewOptions()
	o.Listen = "127.0.1.1:0"
	o.IDC = "idc1"
	o.Namesrvs = namesrvs
	o.ProbeInterval = time.Minute
	o.ProbeTimeout = 2 * time.Second
	s, err := addrsrv.New(o)
	testutil.NoError(t, err, "addrsrv.New")
	done := make(chan error, 1)
	go func() { done <- s.Run(context.Background()) }()
	t.Cleanup(func() {
		s.Shutdown()
		testutil.NoError(t, <-done, "addrsrv Run")
	})
	testutil.Eventually(t, 5*time.Second, func() error {
		for _, st := range s.Namesrvs() {
			if st.LastProbe.IsZero() || !st.Alive {
				return fmt.Errorf("%s: not probed alive yet", st.Addr)
			}
		}
		return nil
	})
	return s
}

// TestAddrsrvPingDelistsHungNamesrv: a name server that hangs behind a
// blackholing proxy leaves the list through the pings, long before the next
// probe (a minute away) could have judged it.
func TestAddrsrvPingDelistsHungNamesrv(t *testing.T) {
	a1, _ := startNamesrv(t, "idc1", "127.0.1.1:0")
	b1, _ := startNamesrv(t, "idc2", "127.0.2.1:0")
	proxy, err := testutil.NewProxy("127.0.1.1:0", a1)
	testutil.NoError(t, err, "proxy")
	t.Cleanup(func() { proxy.Close() })
	s := startPinging(t, addrsrv.Namesrv{Addr: proxy.Addr(), IDC: "idc1"}, addrsrv.Namesrv{Addr: b1, IDC: "idc2"})

	start := time.Now()
	proxy.Blackhole(true)
	testutil.Eventually(t, 10*time.Second, func() error {
		if got := s.List(); len(got) != 1 || got[0] != b1 {
			return fmt.Errorf("list %v, want only %s", got, b1)
		}
		return nil
	})
	t.Logf("hung name server delisted after %v (defaults: pings every %v, silent after %v)",
		time.Since(start).Round(time.Millisecond), addrsrv.DefaultPingInterval, addrsrv.DefaultSilentAfter)
	st := s.Namesrvs()[0]
	testutil.True(t, !st.Alive, "hung name server down")
	testutil.True(t, strings.Contains(st.LastError, "nothing answered"), "delisted by the pings", st.LastError)
}

// slowNamesrv answers every request after delay, each on its own
// goroutine as a name server does: slow, not hung.
func slowNamesrv(t *testing.T, delay time.Duration) (addr string, answered *atomic.Int64) {
	t.Helper()
	rs, err := remoting.NewServer(remoting.ServerOptions{Listen: "127.0.1.2:0"})
	testutil.NoError(t, err, "remoting.NewServer")
	answered = new(atomic.Int64)
	rs.HandleDefault(func(ctx context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
		answered.Add(1)
		return remoting.NewResponse(req, int32(protocol.Success), "")
	})
	go rs.Serve()
	t.Cleanup(func() { rs.Close() })
	return rs.Addr(), answered
}

// TestAddrsrvPingKeepsSlowNamesrv: a name server that answers every request
// 300 ms late (under half of --silent-after, well over a healthy answer's
// time) stays listed while dozens of pings are answered late.
func TestAddrsrvPingKeepsSlowNamesrv(t *testing.T) {
	slow, answered := slowNamesrv(t, 300*time.Millisecond)
	s := startPinging(t, addrsrv.Namesrv{Addr: slow, IDC: "idc1"})
	testutil.Eventually(t, 30*time.Second, func() error {
		st := s.Namesrvs()[0]
		testutil.True(t, st.Alive, "slow name server still listed", st.LastError)
		if n := answered.Load(); n < 30 {
			return fmt.Errorf("%d slow answers so far", n)
		}
		return nil
	})
}
