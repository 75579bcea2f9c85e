package addrsrv_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/addrsrv"
	"github.com/zonemq/zonemq/internal/namesrv"
	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/testutil"
)

// Probe timings for tests: docs/architecture.md §4's 1 s interval scaled down
// tenfold. The timeout is longer than the interval would give by default
// (100 ms): on a loaded 2-core machine under -race a healthy loopback name
// server can take that long to answer, and a false "down" would make the
// positive checks wait.
const (
	testInterval = 100 * time.Millisecond
	testTimeout  = 250 * time.Millisecond
	// slack absorbs scheduling delays on a loaded machine; the tests log the
	// times they measure, which on a quiet machine are ~1 and ~3 intervals.
	slack = 1500 * time.Millisecond
)

// startNamesrv runs a real name server of idc on listen until the test ends
// or the returned stop is called.
func startNamesrv(t *testing.T, idc, listen string) (addr string, stop func()) {
	t.Helper()
	o := namesrv.NewOptions()
	o.Listen = listen
	o.IDC = idc
	o.KVConfigPath = ""
	s, err := namesrv.New(o)
	testutil.NoError(t, err, "namesrv.New")
	done := make(chan error, 1)
	go func() { done <- s.Run(context.Background()) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			s.Shutdown()
			testutil.NoError(t, <-done, "namesrv Run")
		})
	}
	t.Cleanup(stop)
	return s.Addr(), stop
}

// startAddrsrv runs an address server until the test ends; it returns the
// server and its base URL.
func startAddrsrv(t *testing.T, listen, idc string, namesrvs ...addrsrv.Namesrv) (*addrsrv.Server, string) {
	t.Helper()
	o := addrsrv.NewOptions()
	o.Listen = listen
	o.IDC = idc
	o.Namesrvs = namesrvs
	o.ProbeInterval = testInterval
	o.ProbeTimeout = testTimeout
	s, err := addrsrv.New(o)
	testutil.NoError(t, err, "addrsrv.New")
	done := make(chan error, 1)
	go func() { done <- s.Run(context.Background()) }()
	t.Cleanup(func() {
		s.Shutdown()
		testutil.NoError(t, <-done, "addrsrv Run")
	})
	return s, "http://" + s.Addr()
}

func get(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	return string(b), nil
}

type namesrvEntry struct {
	Addr      string `json:"addr"`
	IDC       string `json:"idc"`
	Alive     bool   `json:"alive"`
	LastProbe string `json:"lastProbe"`
	LastError string `json:"lastError"`
}

func getStatus(base string) ([]namesrvEntry, error) {
	body, err := get(base + "/v1/namesrvs")
	if err != nil {
		return nil, err
	}
	var out []namesrvEntry
	err = json.Unmarshal([]byte(body), &out)
	return out, err
}

// waitList waits until base's /rocketmq/nsaddr is want, failing after d.
func waitList(t *testing.T, base, want string, d time.Duration) {
	t.Helper()
	testutil.Eventually(t, d, func() error {
		got, err := get(base + "/rocketmq/nsaddr")
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("nsaddr %q, want %q", got, want)
		}
		return nil
	})
}

// waitProbed waits until every name server of base has been probed at least
// once, so the list reflects probes rather than the unknown state.
func waitProbed(t *testing.T, base string) {
	t.Helper()
	testutil.Eventually(t, 5*time.Second, func() error {
		st, err := getStatus(base)
		if err != nil {
			return err
		}
		for _, e := range st {
			if e.LastProbe == "" {
				return fmt.Errorf("%s not probed yet", e.Addr)
			}
		}
		return nil
	})
}

// downWithin is the longest a failed name server may stay listed: DownAfter
// (2) probe intervals, plus one probe timeout for a hung one, plus slack.
const downWithin = 2*testInterval + testTimeout + slack

func TestAddrsrvListsAliveOwnIDCFirst(t *testing.T) {
	a1, _ := startNamesrv(t, "idc1", "127.0.1.1:0")
	b2, _ := startNamesrv(t, "idc2", "127.0.2.1:0")
	a2, _ := startNamesrv(t, "idc1", "127.0.1.2:0")
	nss := []addrsrv.Namesrv{{Addr: b2, IDC: "idc2"}, {Addr: a1, IDC: "idc1"}, {Addr: a2, IDC: "idc1"}}
	_, base := startAddrsrv(t, "127.0.1.1:0", "idc1", nss...)
	waitProbed(t, base)
	waitList(t, base, a1+";"+a2+";"+b2, 5*time.Second)
	// Any unit suffix, with or without nofix, gets the same list.
	for _, p := range []string{"/rocketmq/nsaddr-unitA", "/rocketmq/nsaddr-unitA?nofix=1"} {
		got, err := get(base + p)
		testutil.NoError(t, err, p)
		testutil.Equal(t, got, a1+";"+a2+";"+b2, p)
	}

	// Eventually: under load one probe may miss, which shows in lastError.
	testutil.Eventually(t, 5*time.Second, func() error {
		st, err := getStatus(base)
		if err != nil {
			return err
		}
		testutil.Equal(t, len(st), 3, "entries")
		for i, e := range st {
			testutil.Equal(t, e.Addr, nss[i].Addr, "configured order")
			testutil.Equal(t, e.IDC, nss[i].IDC, "idc")
			ts, err := time.Parse(time.RFC3339, e.LastProbe)
			testutil.NoError(t, err, "lastProbe RFC 3339")
			testutil.True(t, time.Since(ts) < 5*time.Second, "recent lastProbe", ts)
			if !e.Alive || e.LastError != "" {
				return fmt.Errorf("%+v not alive and clean", e)
			}
		}
		return nil
	})
}

func TestAddrsrvStoppedNamesrvDisappears(t *testing.T) {
	a1, stopA1 := startNamesrv(t, "idc1", "127.0.1.1:0")
	b1, _ := startNamesrv(t, "idc2", "127.0.2.1:0")
	_, base := startAddrsrv(t, "127.0.1.1:0", "idc1",
		addrsrv.Namesrv{Addr: a1, IDC: "idc1"}, addrsrv.Namesrv{Addr: b1, IDC: "idc2"})
	waitProbed(t, base)
	waitList(t, base, a1+";"+b1, 5*time.Second)

	start := time.Now()
	stopA1()
	waitList(t, base, b1, downWithin)
	t.Logf("stopped name server dropped after %v", time.Since(start).Round(time.Millisecond))
	st, err := getStatus(base)
	testutil.NoError(t, err, "status")
	testutil.True(t, !st[0].Alive && st[0].LastError != "", "stopped one is down with a reason", st[0])

	// A name server started again on the same address is back after one probe.
	start = time.Now()
	startNamesrv(t, "idc1", a1)
	waitList(t, base, a1+";"+b1, testInterval+testTimeout+slack)
	t.Logf("restarted name server listed after %v", time.Since(start).Round(time.Millisecond))
}

// hungListener accepts TCP connections, reads everything and never answers.
func hungListener(t *testing.T, listen string) string {
	t.Helper()
	ln, err := net.Listen("tcp", listen)
	testutil.NoError(t, err, "listen")
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				io.Copy(io.Discard, c)
			}()
		}
	}()
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

func TestAddrsrvHungNamesrvDisappears(t *testing.T) {
	a1, _ := startNamesrv(t, "idc1", "127.0.1.1:0")
	b1, _ := startNamesrv(t, "idc2", "127.0.2.1:0")
	proxy, err := testutil.NewProxy("127.0.1.1:0", a1)
	testutil.NoError(t, err, "proxy")
	t.Cleanup(func() { proxy.Close() })
	hung := hungListener(t, "127.0.2.2:0")

	_, base := startAddrsrv(t, "127.0.1.1:0", "idc1",
		addrsrv.Namesrv{Addr: proxy.Addr(), IDC: "idc1"}, addrsrv.Namesrv{Addr: b1, IDC: "idc2"},
		addrsrv.Namesrv{Addr: hung, IDC: "idc2"})
	waitProbed(t, base)
	// A process that takes connections but never answers is never listed.
	waitList(t, base, proxy.Addr()+";"+b1, 5*time.Second)
	st, err := getStatus(base)
	testutil.NoError(t, err, "status")
	testutil.True(t, strings.Contains(st[2].LastError, "no answer"), "hung lastError", st[2].LastError)

	// The name server behind the proxy hangs: it must go within two intervals.
	start := time.Now()
	proxy.Blackhole(true)
	waitList(t, base, b1, downWithin)
	t.Logf("hung name server dropped after %v", time.Since(start).Round(time.Millisecond))

	// It answers again: one good probe brings it back.
	start = time.Now()
	proxy.Blackhole(false)
	waitList(t, base, proxy.Addr()+";"+b1, testInterval+testTimeout+slack)
	t.Logf("recovered name server listed after %v", time.Since(start).Round(time.Millisecond))
}

// TestAddrsrvHungNamesrvDelaysNoOther gives probes a timeout far longer than
// the interval: while one name server hangs, the others must still be
// probed every interval.
func TestAddrsrvHungNamesrvDelaysNoOther(t *testing.T) {
	a1, _ := startNamesrv(t, "idc1", "127.0.1.1:0")
	hung := hungListener(t, "127.0.2.2:0")
	o := addrsrv.NewOptions()
	o.Listen = "127.0.1.1:0"
	o.IDC = "idc1"
	o.Namesrvs = []addrsrv.Namesrv{{Addr: hung, IDC: "idc2"}, {Addr: a1, IDC: "idc1"}}
	o.ProbeInterval = testInterval
	o.ProbeTimeout = 10 * time.Second
	s, err := addrsrv.New(o)
	testutil.NoError(t, err, "New")
	done := make(chan error, 1)
	go func() { done <- s.Run(context.Background()) }()

	var probes []time.Time
	testutil.Eventually(t, 3*time.Second, func() error {
		st := s.Namesrvs()
		testutil.Equal(t, st[0].LastProbe.IsZero(), true, "the hung one's first probe is still waiting")
		if p := st[1].LastProbe; !p.IsZero() && (len(probes) == 0 || p.After(probes[len(probes)-1])) {
			probes = append(probes, p)
		}
		if len(probes) < 4 {
			return fmt.Errorf("%d probes of the healthy name server so far", len(probes))
		}
		return nil
	})
	// Shutdown must not wait out the hung probe's 10 s timeout.
	start := time.Now()
	s.Shutdown()
	testutil.NoError(t, <-done, "Run")
	testutil.True(t, time.Since(start) < 2*time.Second, "shutdown took", time.Since(start))
}

// answerAll is a remoting server standing in for a name server that answers
// every request with code, counting the requests per code.
func answerAll(t *testing.T, listen string, code int32) (string, *sync.Map) {
	t.Helper()
	rs, err := remoting.NewServer(remoting.ServerOptions{Listen: listen})
	testutil.NoError(t, err, "remoting.NewServer")
	var seen sync.Map
	rs.HandleDefault(func(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
		n, _ := seen.LoadOrStore(req.Code, new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
		return remoting.NewResponse(req, code, "test")
	})
	go rs.Serve()
	t.Cleanup(func() { rs.Close() })
	return rs.Addr(), &seen
}

func TestAddrsrvProbeIsARealRequest(t *testing.T) {
	ok, okSeen := answerAll(t, "127.0.1.1:0", int32(protocol.Success))
	// An error response still proves the process reads and answers requests.
	sysErr, _ := answerAll(t, "127.0.1.2:0", int32(protocol.SystemError))
	_, base := startAddrsrv(t, "127.0.1.1:0", "idc1",
		addrsrv.Namesrv{Addr: ok, IDC: "idc1"}, addrsrv.Namesrv{Addr: sysErr, IDC: "idc1"})
	waitProbed(t, base)
	waitList(t, base, ok+";"+sysErr, 5*time.Second)
	n, found := okSeen.Load(int32(protocol.GetBrokerClusterInfo))
	testutil.True(t, found && n.(*atomic.Int64).Load() > 0, "probe sent GET_BROKER_CLUSTER_INFO")
	okSeen.Range(func(k, _ any) bool {
		testutil.Equal(t, k.(int32), int32(protocol.GetBrokerClusterInfo), "probe request code")
		return true
	})
}

func TestAddrsrvNoneAliveListsAll(t *testing.T) {
	// Addresses nobody listens on: probes are refused.
	var dead []string
	for _, ip := range []string{"127.0.2.1", "127.0.1.1"} {
		ln, err := net.Listen("tcp", ip+":0")
		testutil.NoError(t, err, "listen")
		dead = append(dead, ln.Addr().String())
		ln.Close()
	}
	_, base := startAddrsrv(t, "127.0.1.1:0", "idc1",
		addrsrv.Namesrv{Addr: dead[0], IDC: "idc2"}, addrsrv.Namesrv{Addr: dead[1], IDC: "idc1"})
	testutil.Eventually(t, 5*time.Second, func() error {
		st, err := getStatus(base)
		if err != nil {
			return err
		}
		for _, e := range st {
			if e.Alive || e.LastError == "" || e.LastProbe == "" {
				return fmt.Errorf("%+v not down yet", e)
			}
		}
		return nil
	})
	got, err := get(base + "/rocketmq/nsaddr")
	testutil.NoError(t, err, "nsaddr")
	testutil.Equal(t, got, dead[1]+";"+dead[0], "every configured one, own IDC first")
}

func TestAddrsrvTwoSideBySide(t *testing.T) {
	a1, stopA1 := startNamesrv(t, "idc1", "127.0.1.1:0")
	b1, _ := startNamesrv(t, "idc2", "127.0.2.1:0")
	nss := []addrsrv.Namesrv{{Addr: a1, IDC: "idc1"}, {Addr: b1, IDC: "idc2"}}
	_, base1 := startAddrsrv(t, "127.0.1.1:0", "idc1", nss...)
	_, base1b := startAddrsrv(t, "127.0.1.2:0", "idc1", nss...)
	_, base2 := startAddrsrv(t, "127.0.2.1:0", "idc2", nss...)
	waitList(t, base1, a1+";"+b1, 5*time.Second)
	waitList(t, base1b, a1+";"+b1, 5*time.Second)
	waitList(t, base2, b1+";"+a1, 5*time.Second)

	// Each probes on its own; all of them see idc1's name server go.
	stopA1()
	for _, base := range []string{base1, base1b, base2} {
		waitList(t, base, b1, downWithin)
	}
}

// TestAddrsrvProbeNoBusyLoop: peers that drop every connection — at once, or
// right after answering — must not make the prober probe faster than about
// twice per interval (the early probe on a close is rate-limited).
func TestAddrsrvProbeNoBusyLoop(t *testing.T) {
	// Accepts and closes at once (like a proxy in Cut mode).
	ln, err := net.Listen("tcp", "127.0.1.1:0")
	testutil.NoError(t, err, "listen")
	var accepts atomic.Int64
	acceptDone := make(chan struct{})
	go func() {
		defer close(acceptDone)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepts.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-acceptDone })

	// Answers, then closes the connection.
	rs, err := remoting.NewServer(remoting.ServerOptions{Listen: "127.0.1.2:0"})
	testutil.NoError(t, err, "remoting.NewServer")
	var answers atomic.Int64
	rs.HandleDefault(func(_ context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
		answers.Add(1)
		c.Write(remoting.NewResponse(req, int32(protocol.Success), ""))
		c.Close()
		return nil
	})
	go rs.Serve()
	t.Cleanup(func() { rs.Close() })

	s, _ := startAddrsrv(t, "127.0.1.1:0", "idc1",
		addrsrv.Namesrv{Addr: ln.Addr().String(), IDC: "idc1"}, addrsrv.Namesrv{Addr: rs.Addr(), IDC: "idc1"})
	testutil.Eventually(t, 5*time.Second, func() error {
		if st := s.Namesrvs(); st[0].LastProbe.IsZero() || st[1].LastProbe.IsZero() {
			return fmt.Errorf("not probed yet")
		}
		return nil
	})
	a0, n0, start := accepts.Load(), answers.Load(), time.Now()
	testutil.Eventually(t, 5*time.Second, func() error {
		if time.Since(start) < 10*testInterval {
			return fmt.Errorf("waiting")
		}
		return nil
	})
	elapsed := time.Since(start)
	limit := 2*int64(elapsed/testInterval) + 3
	da, dn := accepts.Load()-a0, answers.Load()-n0
	t.Logf("in %v: %d dials to the dropping peer, %d probes of the answer-and-close peer (limit %d)",
		elapsed.Round(time.Millisecond), da, dn, limit)
	testutil.True(t, da <= limit, "dials to a peer that drops connections", da, "limit", limit)
	testutil.True(t, dn <= limit, "probes of a peer that closes after answering", dn, "limit", limit)
	testutil.True(t, dn >= 3, "the answer-and-close peer is still probed", dn)
	testutil.True(t, s.Namesrvs()[1].Alive, "the answer-and-close peer is alive")
}
