package client_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/internal/testutil"
)

// TestClientNamesrvFailoverReusesWarmConnection: the client heartbeats every
// name server of every IDC, so when its own IDC's name server dies it fails
// over to another IDC's over a connection that is already open — no dial on
// the failover path.
func TestClientNamesrvFailoverReusesWarmConnection(t *testing.T) {
	c := startCluster(t, 2)
	ns1, ns2 := c.NamesrvAddr(1), c.NamesrvAddr(2)
	dc := newDialCounter(c.Host(1))
	cc := clientConfig(c, 1)
	cc.Dial = dc.dial
	p := newProducer(t, cc)
	testutil.Eventually(t, 5*time.Second, func() error {
		if dc.count(ns2) == 0 {
			return fmt.Errorf("no connection to idc2's name server yet")
		}
		return nil
	})
	testutil.Equal(t, p.NameServer(), ns1, "name server in use")
	sendN(t, p, "WarmA", "warmA", 1)
	dialsBefore := dc.count(ns2)

	c.StopNamesrv(1)
	t0 := time.Now()
	// A topic never used before needs a route: it comes from idc2's name
	// server, over the heartbeat's connection.
	_, res := sendN(t, p, "WarmB", "warmB", 1)
	t.Logf("first route lookup after idc1's name server stopped: %v (stored on %s)", time.Since(t0), res[0].IDC)
	testutil.Equal(t, p.NameServer(), ns2, "name server in use")
	testutil.Equal(t, dc.count(ns2), dialsBefore, "dials to idc2's name server")
}

// TestClientNamesrvHangFailover: idc1's name server hangs (a proxy in front
// of it forwards nothing). Route lookups move to idc2's name server after
// one RequestTimeout at most.
func TestClientNamesrvHangFailover(t *testing.T) {
	c := startCluster(t, 2)
	ns1, ns2 := c.NamesrvAddr(1), c.NamesrvAddr(2)
	proxy, err := testutil.NewProxy(c.Host(1)+":0", ns1)
	testutil.NoError(t, err)
	t.Cleanup(func() { proxy.Close() })
	dc := newDialCounter(c.Host(1))
	dc.redirect(ns1, proxy.Addr())
	cc := clientConfig(c, 1)
	cc.Dial = dc.dial
	p := newProducer(t, cc)
	sendN(t, p, "HangA", "hangA", 1)
	testutil.Eventually(t, 5*time.Second, func() error {
		if dc.count(ns2) == 0 {
			return fmt.Errorf("no connection to idc2's name server yet")
		}
		return nil
	})
	dialsBefore := dc.count(ns2)
	proxy.Blackhole(true)
	t0 := time.Now()
	_, res := sendN(t, p, "HangB", "hangB", 1)
	took := time.Since(t0)
	t.Logf("route lookup with idc1's name server hung: %v (stored on %s)", took, res[0].IDC)
	if took > 2500*time.Millisecond {
		t.Fatalf("send with a hung name server took %v; want about one RequestTimeout (1 s)", took)
	}
	testutil.Equal(t, dc.count(ns2), dialsBefore, "dials to idc2's name server")
	testutil.Eventually(t, 3*time.Second, func() error {
		if p.NameServer() != ns2 {
			return fmt.Errorf("still on %s", p.NameServer())
		}
		return nil
	})
}

// TestClientBrokerHangFailover: idc1's broker hangs for idc1's producer (a
// proxy forwards nothing). A send in flight moves to idc2 once a liveness
// check shows idc1's broker silent while idc2's answers (suspect.go), at the
// latest after one attempt timeout (1 s); the application sees no error, and
// later sends avoid the hung broker.
func TestClientBrokerHangFailover(t *testing.T) {
	const topic = "HangTopic"
	p, proxy := hangableProducer(t, topic)

	proxy.Blackhole(true)
	t0 := time.Now()
	var slowest time.Duration
	var firstIDC2 time.Duration
	for i := 0; i < 40; i++ {
		s := time.Now()
		r, err := p.SendSync(context.Background(), &client.Message{Topic: topic, Body: []byte(fmt.Sprint(i))})
		testutil.NoError(t, err, "send during the hang")
		slowest = max(slowest, time.Since(s))
		if r.IDC == "idc2" && firstIDC2 == 0 {
			firstIDC2 = time.Since(t0)
		}
	}
	t.Logf("broker hang: RTO (hang → first send stored on idc2) %v; slowest send %v; 40 sends in %v", firstIDC2, slowest, time.Since(t0))
	if firstIDC2 > 3*time.Second || slowest > 3*time.Second {
		t.Fatalf("hang RTO %v / slowest send %v; want ≤ 3 s", firstIDC2, slowest)
	}
	st := p.Stats()
	t.Logf("producer stats after the hang: %+v", st)
	testutil.True(t, st.SentByIDC["idc1"] >= 1 && st.SentByIDC["idc2"] >= 1, "sends counted per target IDC")
	testutil.True(t, st.CrossIDC >= 1 && st.Retries >= 1 && st.Failovers >= 1, "cross-IDC sends, retries and a failover counted")
	testutil.True(t, !st.LastFailover.Before(t0), "the last failover is after the hang")
	testutil.Equal(t, st.Failures, int64(0), "no failed sends")
	proxy.Restore()
}

// TestClientAddrsrvDownKeepsList: when the address server is unreachable the
// client keeps the last name-server list it got, and still fails over
// between those name servers.
func TestClientAddrsrvDownKeepsList(t *testing.T) {
	c := startCluster(t, 2)
	cc := clientConfig(c, 1)
	cc.AddrsrvURLs = []string{c.AddrsrvURL(1)} // no other address server to ask
	p := newProducer(t, cc)
	sendN(t, p, "KeepA", "keepA", 1)
	c.StopAddrsrv(1)
	c.StopNamesrv(1)
	_, res := sendN(t, p, "KeepB", "keepB", 1)
	testutil.Equal(t, res[0].IDC, "idc1", "broker IDC")
	testutil.Equal(t, p.NameServer(), c.NamesrvAddr(2), "name server in use")
}

// TestClientBrokerHangFailoverAsync: asynchronous sends written straight
// to a connected broker (sendAsync's first attempt) that then hangs time
// out and are stored by the other IDC's broker; every callback reports
// success exactly once.
func TestClientBrokerHangFailoverAsync(t *testing.T) {
	const topic = "HangAsyncTopic"
	p, proxy := hangableProducer(t, topic)

	proxy.Blackhole(true)
	const n = 20
	var mu sync.Mutex
	calls := map[int]int{}
	var errs error
	done := make(chan struct{}, n)
	for i := range n {
		err := p.SendAsync(context.Background(), func(r *client.SendResult, err error) {
			mu.Lock()
			calls[i]++
			if err == nil && r.IDC != "idc2" {
				err = fmt.Errorf("send %d stored in %s during the hang", i, r.IDC)
			}
			errs = errors.Join(errs, err)
			mu.Unlock()
			done <- struct{}{}
		}, &client.Message{Topic: topic, Body: []byte(fmt.Sprint(i))})
		testutil.NoError(t, err)
	}
	for range n {
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("not every async send was answered")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	testutil.NoError(t, errs, "async sends during the hang")
	for i := range n {
		testutil.Equal(t, calls[i], 1, "callbacks of send", i)
	}
	st := p.Stats()
	testutil.True(t, st.SentByIDC["idc2"] >= 1 && st.Retries >= 1, "retried on idc2")
	testutil.Equal(t, st.Failures, int64(0), "no failed sends")
	proxy.Restore()
}

// hangableProducer starts two IDCs with topic and an idc1 producer that
// reaches idc1's broker through proxy (to hang it with Blackhole); one
// message has been stored on idc1, so the route is cached and the
// connection open.
func hangableProducer(t *testing.T, topic string) (*client.Producer, *testutil.Proxy) {
	return hangableProducerLogging(t, topic, testLogger())
}

// hangableProducerLogging is hangableProducer whose producer logs to
// logger.
func hangableProducerLogging(t *testing.T, topic string, logger *slog.Logger) (*client.Producer, *testutil.Proxy) {
	c := startCluster(t, 2)
	createTopic(t, c, topic, 4)
	proxy, err := testutil.NewProxy(c.Host(1)+":0", c.BrokerAddr(1))
	testutil.NoError(t, err)
	t.Cleanup(func() { proxy.Close() })
	dc := newDialCounter(c.Host(1))
	dc.redirect(c.BrokerAddr(1), proxy.Addr())
	cc := clientConfig(c, 1)
	cc.Dial = dc.dial
	cc.Logger = logger
	p := newProducer(t, cc)
	_, res := sendN(t, p, topic, "pre", 1)
	testutil.Equal(t, res[0].IDC, "idc1", "broker IDC before the hang")
	return p, proxy
}

// TestClientHandledFailoverIsNotAWarning: a send whose broker refuses the
// connection (it is cut off: the route still lists it) moves to another
// IDC's broker and succeeds, and the client says so as information (from
// which broker and IDC, and why), never as a warning: a person reading the
// producer's terminal has nothing to do.
func TestClientHandledFailoverIsNotAWarning(t *testing.T) {
	logs := &syncBuffer{}
	p, proxy := hangableProducerLogging(t, "MoveT", slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	proxy.Cut()
	_, res := sendN(t, p, "MoveT", "moved", 3)
	testutil.Equal(t, res[0].IDC, "idc2")
	out := logs.String()
	testutil.True(t, strings.Contains(out, `msg="send moved to another broker"`) && strings.Contains(out, "brokerIDC=idc1"), out)
	testutil.True(t, !strings.Contains(out, "level=WARN"), "a handled failover logged a warning", out)
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
