package namesrv

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/testutil"
)

// Test helpers: a name server on loopback and brokers/clients that speak
// the wire protocol to it with remoting.Client. IDC n lives on 127.0.n.1.

// testLogger discards unless ZONEMQ_TEST_LOG is set.
func testLogger() *slog.Logger {
	if os.Getenv("ZONEMQ_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return nil
}

// startNamesrv starts a name server of IDC idc on 127.0.n.1:0 and stops it
// at the end of the test.
func startNamesrv(t *testing.T, ip, idc string, mutate func(*Options)) *Server {
	t.Helper()
	opts := NewOptions()
	opts.Listen = ip + ":0"
	opts.IDC = idc
	opts.KVConfigPath = ""
	opts.Logger = testLogger()
	if mutate != nil {
		mutate(&opts)
	}
	s, err := New(opts)
	if err != nil {
		t.Fatalf("namesrv.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("name server did not stop within 10 s")
		}
	})
	return s
}

// newClient returns a remoting client closed at the end of the test. Each
// client has its own connection per address, so each fake broker or SDK
// client gets its own.
func newClient(t *testing.T) *remoting.Client {
	t.Helper()
	c := remoting.NewClient(remoting.ClientOptions{})
	t.Cleanup(func() { c.Close() })
	return c
}

// invoke sends one request and fails the test on a transport error.
func invoke(t *testing.T, c *remoting.Client, addr string, code protocol.RequestCode, ext map[string]string, body []byte) *remoting.Command {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.Invoke(ctx, addr, remoting.NewRequest(int32(code), ext, body))
	if err != nil {
		t.Fatalf("%s to %s: %v", code, addr, err)
	}
	return resp
}

// wantCode fails the test unless resp has code.
func wantCode(t *testing.T, resp *remoting.Command, code protocol.ResponseCode) {
	t.Helper()
	if protocol.ResponseCode(resp.Code) != code {
		t.Fatalf("got %s (remark %q), want %s", protocol.ResponseCode(resp.Code), resp.Remark, code)
	}
}

// fakeBroker registers with name servers like a broker would.
type fakeBroker struct {
	t       *testing.T
	cli     *remoting.Client
	name    string
	addr    string
	cluster string
	zone    string
	id      int64
	ha      string
	timeout int64 // heartbeatTimeoutMillis, 0 = name server default
}

func newFakeBroker(t *testing.T, name, addr, zone string) *fakeBroker {
	return &fakeBroker{t: t, cli: newClient(t), name: name, addr: addr, cluster: protocol.DefaultCluster, zone: zone, ha: addr + "0"}
}

// topicTable builds a topic table: topic → queue count, perm 6.
func topicTable(queues map[string]int) map[string]protocol.TopicConfig {
	out := make(map[string]protocol.TopicConfig, len(queues))
	for topic, n := range queues {
		out[topic] = protocol.TopicConfig{TopicName: topic, ReadQueueNums: n, WriteQueueNums: n,
			Perm: protocol.PermReadWrite, TopicFilterType: "SINGLE_TAG", Attributes: map[string]string{}}
	}
	return out
}

func (b *fakeBroker) header() *protocol.RegisterBrokerRequestHeader {
	return &protocol.RegisterBrokerRequestHeader{
		BrokerName: b.name, BrokerAddr: b.addr, ClusterName: b.cluster, HAServerAddr: b.ha,
		BrokerID: b.id, HeartbeatTimeoutMillis: b.timeout, ZoneName: b.zone,
	}
}

// registerBody is a RegisterBrokerBody with the given topics and version.
func registerBody(topics map[string]protocol.TopicConfig, version int64) []byte {
	body, _ := json.Marshal(protocol.RegisterBrokerBody{
		TopicConfigSerializeWrapper: protocol.TopicConfigSerializeWrapper{
			TopicConfigTable: topics,
			DataVersion:      protocol.DataVersion{Counter: version, Timestamp: 1700000000000 + version},
		},
		FilterServerList: []string{},
	})
	return body
}

// register sends a full REGISTER_BROKER to ns with a checksum, as RocketMQ
// brokers do, and returns the reply.
func (b *fakeBroker) register(ns string, topics map[string]protocol.TopicConfig, version int64) *remoting.Command {
	b.t.Helper()
	body := registerBody(topics, version)
	h := b.header()
	h.BodyCRC32 = int32(crc32.ChecksumIEEE(body) & 0x7FFFFFFF)
	return invoke(b.t, b.cli, ns, protocol.RegisterBroker, h.Ext(), body)
}

// mustRegister registers and fails the test unless it succeeded.
func (b *fakeBroker) mustRegister(ns string, queues map[string]int, version int64) *remoting.Command {
	b.t.Helper()
	resp := b.register(ns, topicTable(queues), version)
	wantCode(b.t, resp, protocol.Success)
	return resp
}

func (b *fakeBroker) heartbeat(ns string) *remoting.Command {
	b.t.Helper()
	h := protocol.BrokerHeartbeatRequestHeader{ClusterName: b.cluster, BrokerAddr: b.addr, BrokerName: b.name, BrokerID: b.id}
	return invoke(b.t, b.cli, ns, protocol.BrokerHeartbeat, h.Ext(), nil)
}

func (b *fakeBroker) unregister(ns string) *remoting.Command {
	b.t.Helper()
	h := protocol.UnregisterBrokerRequestHeader{BrokerName: b.name, BrokerAddr: b.addr, ClusterName: b.cluster, BrokerID: b.id}
	return invoke(b.t, b.cli, ns, protocol.UnregisterBroker, h.Ext(), nil)
}

// getRoute queries a topic's route; ext adds fields (zone mode).
func getRoute(t *testing.T, c *remoting.Client, ns, topic string, ext map[string]string) (*protocol.TopicRouteData, *remoting.Command) {
	t.Helper()
	h := protocol.GetRouteInfoRequestHeader{Topic: topic}
	e := h.Ext()
	for k, v := range ext {
		e[k] = v
	}
	resp := invoke(t, c, ns, protocol.GetRouteInfoByTopic, e, nil)
	if protocol.ResponseCode(resp.Code) != protocol.Success {
		return nil, resp
	}
	r, err := protocol.DecodeTopicRouteData(resp.Body)
	if err != nil {
		t.Fatalf("route body %s: %v", resp.Body, err)
	}
	return r, resp
}

// routeBrokers summarises a route as "name@zone=queues" items in order,
// e.g. "broker-a@idc1=4".
func routeBrokers(r *protocol.TopicRouteData) string {
	if r == nil {
		return "<none>"
	}
	zones := map[string]string{}
	for _, bd := range r.BrokerDatas {
		zones[bd.BrokerName] = bd.ZoneName
	}
	s := ""
	for i, qd := range r.QueueDatas {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%s@%s=%d", qd.BrokerName, zones[qd.BrokerName], qd.WriteQueueNums)
	}
	return s
}

// routeIs is an Eventually condition: the topic's route summary is want
// ("<none>" for TOPIC_NOT_EXIST).
func routeIs(t *testing.T, c *remoting.Client, ns, topic, want string) func() error {
	return func() error {
		r, resp := getRoute(t, c, ns, topic, nil)
		if r == nil && protocol.ResponseCode(resp.Code) != protocol.TopicNotExist {
			return fmt.Errorf("route query answered %d %q", resp.Code, resp.Remark)
		}
		if got := routeBrokers(r); got != want {
			return fmt.Errorf("route of %s is %q, want %q", topic, got, want)
		}
		return nil
	}
}

// consistently fails the test if fn returns an error at any poll during d:
// the check for "still true after a while" (the opposite of Eventually).
func consistently(t *testing.T, d time.Duration, fn func() error) {
	t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if err := fn(); err != nil {
			t.Fatalf("condition broke before %v passed: %v", d, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// fakeClock is a clock tests move by hand, so expiry tests do not depend on
// how fast a loaded machine runs the scan loop.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.UnixMilli(1_800_000_000_000)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// fakeClockExpiry runs the server on clock with 300 ms expiries, scanned
// every 10 ms of real time.
func fakeClockExpiry(clock *fakeClock) func(*Options) {
	return func(o *Options) {
		o.Now = clock.Now
		o.BrokerExpiry = 300 * time.Millisecond
		o.ClientExpiry = 300 * time.Millisecond
		o.ScanInterval = 10 * time.Millisecond
	}
}

// waitEvent waits until counter has moved n past its value when called
// (scans run, connection closes processed).
func waitEvent(t *testing.T, counter *atomic.Int64, n int64) func() {
	start := counter.Load()
	return func() {
		t.Helper()
		testutil.Eventually(t, 5*time.Second, func() error {
			if got := counter.Load() - start; got < n {
				return fmt.Errorf("%d of %d events so far", got, n)
			}
			return nil
		})
	}
}
