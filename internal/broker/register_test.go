package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/namesrv"
	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/testutil"
)

// recorder is a fake name server that answers SUCCESS to everything and
// keeps what it was sent.
type recorder struct {
	srv  *remoting.Server
	mu   sync.Mutex
	reqs []*remoting.Command
	// forget makes it answer heartbeats BROKER_NOT_EXIST, as a name server
	// that restarted or expired the broker does.
	forget atomic.Bool
}

func startRecorder(t *testing.T, ip string) *recorder {
	t.Helper()
	srv, err := remoting.NewServer(remoting.ServerOptions{Listen: ip + ":0"})
	testutil.NoError(t, err, "recorder listen")
	r := &recorder{srv: srv}
	srv.HandleDefault(func(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
		r.mu.Lock()
		r.reqs = append(r.reqs, req)
		r.mu.Unlock()
		if req.Code == int32(protocol.BrokerHeartbeat) && r.forget.Load() {
			return remoting.NewResponse(req, int32(protocol.BrokerNotExist), "unknown broker")
		}
		return remoting.NewResponse(req, 0, "")
	})
	go srv.Serve()
	t.Cleanup(func() { srv.Close() })
	return r
}

// count returns how many requests with code arrived.
func (r *recorder) count(code protocol.RequestCode) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, req := range r.reqs {
		if req.Code == int32(code) {
			n++
		}
	}
	return n
}

// last returns the last request with code, or nil.
func (r *recorder) last(code protocol.RequestCode) *remoting.Command {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.reqs) - 1; i >= 0; i-- {
		if r.reqs[i].Code == int32(code) {
			return r.reqs[i]
		}
	}
	return nil
}

// startHungNamesrv accepts connections and never answers.
func startHungNamesrv(t *testing.T, ip string) string {
	t.Helper()
	ln, err := net.Listen("tcp", ip+":0")
	testutil.NoError(t, err, "hung listen")
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				io.Copy(io.Discard, c)
				c.Close()
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return ln.Addr().String()
}

// addrsrvStub serves GET /v1/namesrvs from a list the test changes.
type addrsrvStub struct {
	mu    sync.Mutex
	addrs []string
	srv   *httptest.Server
}

func startAddrsrvStub(t *testing.T, ip string) *addrsrvStub {
	t.Helper()
	a := &addrsrvStub{}
	a.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/namesrvs" {
			http.NotFound(w, r)
			return
		}
		a.mu.Lock()
		var entries []namesrvEntry
		for _, addr := range a.addrs {
			entries = append(entries, namesrvEntry{Addr: addr, IDC: "idc?", Alive: false, LastProbe: time.Now().Format(time.RFC3339)})
		}
		a.mu.Unlock()
		json.NewEncoder(w).Encode(entries)
	}))
	a.srv.Listener.Close()
	ln, err := net.Listen("tcp", ip+":0")
	testutil.NoError(t, err, "addrsrv listen")
	a.srv.Listener = ln
	a.srv.Start()
	t.Cleanup(a.srv.Close)
	return a
}

func (a *addrsrvStub) set(addrs ...string) {
	a.mu.Lock()
	a.addrs = addrs
	a.mu.Unlock()
}

func TestBrokerRegistersWithEveryNamesrv(t *testing.T) {
	ns1 := startNamesrv(t, "127.0.1.1:0", "idc1", nil)
	ns2 := startNamesrv(t, "127.0.2.1:0", "idc2", nil)
	hung := startHungNamesrv(t, "127.0.3.1")
	rec := startRecorder(t, "127.0.1.1")
	as := startAddrsrvStub(t, "127.0.1.1")
	as.set(ns2.Addr()) // listed by both sources: registered once

	opts := testBrokerOptions(t, "127.0.1.1", "idc1", "broker-r", ns1.Addr(), hung, rec.srv.Addr())
	opts.AddrsrvURLs = []string{as.srv.URL}
	opts.AddrsrvRefresh = 50 * time.Millisecond
	opts.HeartbeatInterval = 100 * time.Millisecond
	s := startBroker(t, opts)
	c := newRawClient(t)

	// The hung name server delays nobody.
	waitRegistered(t, c, ns1.Addr(), s)
	waitRegistered(t, c, ns2.Addr(), s)

	// The registration carries the IDC, a correct CRC and the topic table;
	// light heartbeats follow.
	testutil.Eventually(t, 10*time.Second, func() error {
		if rec.last(protocol.BrokerHeartbeat) == nil {
			return fmt.Errorf("no BROKER_HEARTBEAT yet")
		}
		return nil
	})
	reg := rec.last(protocol.RegisterBroker)
	testutil.True(t, reg != nil, "REGISTER_BROKER recorded")
	var rh protocol.RegisterBrokerRequestHeader
	testutil.NoError(t, rh.SetExt(reg.ExtFields), "register header")
	testutil.Equal(t, reg.ExtFields[protocol.ExtZoneName], "idc1", "__ZONE_NAME")
	testutil.Equal(t, reg.ExtFields["zoneName"], "idc1", "zoneName")
	testutil.Equal(t, rh.BrokerAddr, s.Addr(), "brokerAddr")
	testutil.Equal(t, rh.ClusterName, protocol.DefaultCluster, "clusterName")
	testutil.Equal(t, reg.ExtFields["bodyCrc32"], strconv.FormatInt(int64(crc32.ChecksumIEEE(reg.Body)&0x7FFFFFFF), 10), "bodyCrc32")
	var body protocol.RegisterBrokerBody
	testutil.NoError(t, json.Unmarshal(reg.Body, &body), "register body")
	tbw := body.TopicConfigSerializeWrapper.TopicConfigTable[protocol.AutoCreateTopicKey]
	testutil.Equal(t, tbw.Perm, 7, "TBW102 perm")
	testutil.Equal(t, tbw.WriteQueueNums, 8, "TBW102 queues")
	_, ok := body.TopicConfigSerializeWrapper.TopicConfigTable["broker-r"]
	testutil.True(t, ok, "the broker's own topic is registered")

	// A topic change reaches the name servers at once (the periodic
	// registration is 30 s away).
	createTopic(t, c, s.Addr(), "RegTopic", 2)
	waitRoute(t, c, ns1.Addr(), "RegTopic", s)
	waitRoute(t, c, ns2.Addr(), "RegTopic", s)

	// A name server listed later by the address server is registered with.
	ns3 := startNamesrv(t, "127.0.2.1:0", "idc2", nil)
	as.set(ns2.Addr(), ns3.Addr())
	waitRegistered(t, c, ns3.Addr(), s)
	waitRoute(t, c, ns3.Addr(), "RegTopic", s)

	// A name server that restarts (forgetting the broker) gets a full
	// registration when it is back.
	addr1 := ns1.Addr()
	ns1.Shutdown()
	ns1b := startNamesrv(t, addr1, "idc1", nil)
	waitRegistered(t, c, ns1b.Addr(), s)
	waitRoute(t, c, ns1b.Addr(), "RegTopic", s)

	// A clean shutdown unregisters from every name server, hung ones
	// notwithstanding, within a few seconds.
	start := time.Now()
	s.Shutdown()
	testutil.True(t, time.Since(start) < 8*time.Second, fmt.Sprintf("shutdown took %v", time.Since(start)))
	testutil.True(t, rec.last(protocol.UnregisterBroker) != nil, "UNREGISTER_BROKER sent")
	for _, ns := range []string{ns1b.Addr(), ns2.Addr(), ns3.Addr()} {
		addr, _, err := registeredAt(t, c, ns, "broker-r")
		testutil.NoError(t, err, "cluster info")
		testutil.Equal(t, addr, "", "broker still listed at "+ns)
	}
}

func TestBrokerNamesrvStartedAfterBroker(t *testing.T) {
	// Reserve an address for a name server that is not running yet.
	probe := startNamesrv(t, "127.0.2.1:0", "idc2", nil)
	addr := probe.Addr()
	probe.Shutdown()

	opts := testBrokerOptions(t, "127.0.1.1", "idc1", "broker-late", addr)
	opts.HeartbeatInterval = 100 * time.Millisecond
	s := startBroker(t, opts)
	c := newRawClient(t)
	testutil.Eventually(t, 10*time.Second, func() error {
		if d := s.namesrvs.describe(); d != addr+"="+peerUnreachable {
			return fmt.Errorf("name server state %q", d)
		}
		return nil
	})
	ns := startNamesrv(t, addr, "idc2", nil)
	waitRegistered(t, c, ns.Addr(), s)
}

func TestBrokerKilledIsDroppedOnConnectionClose(t *testing.T) {
	// A long expiry, so only the closed connection can drop the broker.
	ns := startNamesrv(t, "127.0.1.1:0", "idc1", func(o *namesrv.Options) { o.BrokerExpiry = time.Minute })
	s := startBroker(t, testBrokerOptions(t, "127.0.1.1", "idc1", "broker-k", ns.Addr()))
	c := newRawClient(t)
	waitRegistered(t, c, ns.Addr(), s)

	// What a killed process leaves behind: its connections close, nothing
	// is unregistered.
	s.namesrvs.stop()
	s.namesrvs.close()
	testutil.Eventually(t, 5*time.Second, func() error {
		addr, _, err := registeredAt(t, c, ns.Addr(), "broker-k")
		if err != nil {
			return err
		}
		if addr != "" {
			return fmt.Errorf("the name server still lists the killed broker at %s", addr)
		}
		return nil
	})
}

func TestBrokerRefusedHeartbeatRegistersAtOnce(t *testing.T) {
	rec := startRecorder(t, "127.0.2.1")
	opts := testBrokerOptions(t, "127.0.1.1", "idc1", "broker-hb", rec.srv.Addr())
	opts.HeartbeatInterval = 50 * time.Millisecond
	startBroker(t, opts)
	testutil.Eventually(t, 10*time.Second, func() error {
		if rec.count(protocol.BrokerHeartbeat) < 3 {
			return fmt.Errorf("%d heartbeats so far", rec.count(protocol.BrokerHeartbeat))
		}
		return nil
	})
	registers := rec.count(protocol.RegisterBroker)
	testutil.Equal(t, registers, 1, "one registration, then light heartbeats")
	// The name server forgets the broker: the next refused heartbeat is
	// followed by a full registration in the same beat.
	rec.forget.Store(true)
	testutil.Eventually(t, 10*time.Second, func() error {
		if rec.count(protocol.RegisterBroker) == registers {
			return fmt.Errorf("no registration after a refused heartbeat")
		}
		return nil
	})
	rec.forget.Store(false)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	seen := 0
	for i, req := range rec.reqs {
		if req.Code != int32(protocol.RegisterBroker) {
			continue
		}
		if seen++; seen == registers+1 {
			testutil.Equal(t, rec.reqs[i-1].Code, int32(protocol.BrokerHeartbeat), "a refused heartbeat precedes the new registration")
			break
		}
	}
}
