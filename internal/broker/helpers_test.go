package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/namesrv"
	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/testutil"
)

// Test helpers: real name servers and brokers on loopback (IDC n on
// 127.0.n.1, port 0) and a raw remoting client for hand-made requests.

// testLogger discards unless ZONEMQ_TEST_LOG is set.
func testLogger() *slog.Logger {
	if os.Getenv("ZONEMQ_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return nil
}

// startNamesrv starts a real zonemq name server on ip:0 (or addr, when ip
// holds a port) and stops it at the end of the test.
func startNamesrv(t *testing.T, listen, idc string, mutate func(*namesrv.Options)) *namesrv.Server {
	t.Helper()
	opts := namesrv.NewOptions()
	opts.Listen = listen
	opts.IDC = idc
	opts.KVConfigPath = ""
	opts.Logger = testLogger()
	if mutate != nil {
		mutate(&opts)
	}
	ns, err := namesrv.New(opts)
	testutil.NoError(t, err, "namesrv.New")
	done := make(chan error, 1)
	go func() { done <- ns.Run(context.Background()) }()
	t.Cleanup(func() {
		ns.Shutdown()
		select {
		case err := <-done:
			testutil.NoError(t, err, "namesrv Run")
		case <-time.After(10 * time.Second):
			t.Errorf("name server did not stop within 10 s")
		}
	})
	return ns
}

// testBrokerOptions returns options for a broker of idc on ip:0 with a
// fresh data directory, registering with namesrvs.
func testBrokerOptions(t *testing.T, ip, idc, name string, namesrvs ...string) Options {
	t.Helper()
	opts := NewOptions()
	opts.Listen = ip + ":0"
	opts.IDC = idc
	opts.BrokerName = name
	opts.DataDir = t.TempDir()
	opts.NamesrvAddrs = namesrvs
	opts.SegmentSize = 4 << 20
	opts.Logger = testLogger()
	return opts
}

// startBroker creates and runs a broker; it is shut down at the end of the
// test (Shutdown is idempotent, so a test may stop it earlier).
func startBroker(t *testing.T, opts Options) *Server {
	t.Helper()
	s, err := New(opts)
	testutil.NoError(t, err, "broker.New")
	done := make(chan error, 1)
	go func() { done <- s.Run(context.Background()) }()
	t.Cleanup(func() {
		s.Shutdown()
		select {
		case err := <-done:
			testutil.NoError(t, err, "broker Run")
		case <-time.After(15 * time.Second):
			t.Errorf("broker did not stop within 15 s")
		}
	})
	return s
}

// newRawClient returns a remoting client closed at the end of the test.
func newRawClient(t *testing.T) *remoting.Client {
	t.Helper()
	c := remoting.NewClient(remoting.ClientOptions{})
	t.Cleanup(func() { c.Close() })
	return c
}

// invoke sends one request and fails the test on a transport error.
func invoke(t *testing.T, c *remoting.Client, addr string, code protocol.RequestCode, ext map[string]string, body []byte) *remoting.Command {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := c.Invoke(ctx, addr, remoting.NewRequest(int32(code), ext, body))
	if err != nil {
		t.Fatalf("%s to %s: %v", code, addr, err)
	}
	return resp
}

// expectCode fails the test unless resp carries want.
func expectCode(t *testing.T, resp *remoting.Command, want protocol.ResponseCode, what string) {
	t.Helper()
	if protocol.ResponseCode(resp.Code) != want {
		t.Fatalf("%s: got %s (%q), want %s", what, protocol.ResponseCode(resp.Code), resp.Remark, want)
	}
}

// createTopic creates topic with queues queues on the broker at addr.
func createTopic(t *testing.T, c *remoting.Client, addr, topic string, queues int) {
	t.Helper()
	h := protocol.CreateTopicRequestHeader{Topic: topic, ReadQueueNums: int32(queues), WriteQueueNums: int32(queues), Perm: 6}
	expectCode(t, invoke(t, c, addr, protocol.UpdateAndCreateTopic, h.Ext(), nil), protocol.Success, "create topic "+topic)
}

// sendRaw sends one message with SEND_MESSAGE and returns the response.
func sendRaw(t *testing.T, c *remoting.Client, addr, topic string, queueID int32, props map[string]string, body []byte) *remoting.Command {
	t.Helper()
	h := protocol.SendMessageRequestHeader{
		ProducerGroup: "raw_pg", Topic: topic, DefaultTopic: protocol.AutoCreateTopicKey, DefaultTopicQueueNums: 4,
		QueueID: queueID, BornTimestamp: time.Now().UnixMilli(), Properties: protocol.EncodeProperties(props),
	}
	return invoke(t, c, addr, protocol.SendMessage, h.Ext(), body)
}

// pullRaw pulls with the request's own subscription (sysFlag bit 2).
func pullRaw(t *testing.T, c *remoting.Client, addr, group, topic string, queueID int32, offset int64, sub string, max int32) *remoting.Command {
	t.Helper()
	h := protocol.PullMessageRequestHeader{
		ConsumerGroup: group, Topic: topic, QueueID: queueID, QueueOffset: offset, MaxMsgNums: max,
		SysFlag: protocol.PullFlagSubscription, Subscription: sub, ExpressionType: protocol.ExpressionTypeTag,
	}
	return invoke(t, c, addr, protocol.PullMessage, h.Ext(), nil)
}

// decodeAll decodes a pull body.
func decodeAll(t *testing.T, body []byte) []*protocol.MessageExt {
	t.Helper()
	var out []*protocol.MessageExt
	for len(body) > 0 {
		m, n, err := protocol.DecodeStoredMessage(body, true, true)
		testutil.NoError(t, err, "decoding a pull body")
		out = append(out, m)
		body = body[n:]
	}
	return out
}

// clusterInfo asks a name server for its brokers.
func clusterInfo(t *testing.T, c *remoting.Client, nsAddr string) (*protocol.ClusterLiveInfo, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.Invoke(ctx, nsAddr, remoting.NewRequest(int32(protocol.GetBrokerClusterInfo), nil, nil))
	if err != nil {
		return nil, err
	}
	if resp.Code != 0 {
		return nil, fmt.Errorf("cluster info: code %d %s", resp.Code, resp.Remark)
	}
	return protocol.DecodeClusterLiveInfo(resp.Body)
}

// registeredAt returns the address nsAddr lists for broker name ("" when
// the broker is not registered there) and its zone.
func registeredAt(t *testing.T, c *remoting.Client, nsAddr, name string) (addr, zone string, err error) {
	t.Helper()
	ci, err := clusterInfo(t, c, nsAddr)
	if err != nil {
		return "", "", err
	}
	bd, ok := ci.BrokerAddrTable[name]
	if !ok {
		return "", "", nil
	}
	return bd.MasterAddr(), bd.ZoneName, nil
}

// waitRegistered waits until nsAddr lists broker s with its IDC.
func waitRegistered(t *testing.T, c *remoting.Client, nsAddr string, s *Server) {
	t.Helper()
	testutil.Eventually(t, 15*time.Second, func() error {
		addr, zone, err := registeredAt(t, c, nsAddr, s.opts.BrokerName)
		if err != nil {
			return err
		}
		if addr != s.Addr() || zone != s.opts.IDC {
			return fmt.Errorf("name server %s lists %s at %q zone %q, want %s zone %s", nsAddr, s.opts.BrokerName, addr, zone, s.Addr(), s.opts.IDC)
		}
		return nil
	})
}

// waitRoute waits until the name server serves a route for topic that
// includes broker s.
func waitRoute(t *testing.T, c *remoting.Client, nsAddr, topic string, s *Server) {
	t.Helper()
	testutil.Eventually(t, 15*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := c.Invoke(ctx, nsAddr, remoting.NewRequest(int32(protocol.GetRouteInfoByTopic), map[string]string{"topic": topic}, nil))
		if err != nil {
			return err
		}
		if resp.Code != 0 {
			return fmt.Errorf("route %s: %s", topic, resp.Remark)
		}
		r, err := protocol.DecodeTopicRouteData(resp.Body)
		if err != nil {
			return err
		}
		for _, qd := range r.QueueDatas {
			if qd.BrokerName == s.opts.BrokerName {
				return nil
			}
		}
		return fmt.Errorf("route %s lacks broker %s", topic, s.opts.BrokerName)
	})
}

var instanceSeq atomic.Int64

// instanceName returns a process-unique rocketmq-client-go instance name:
// clients sharing one (the default is the pid) share one connection pool and
// one client id.
func instanceName(prefix string) string {
	return prefix + "-" + strconv.FormatInt(instanceSeq.Add(1), 10)
}

// heartbeatBody builds a consumer heartbeat.
func heartbeatBody(clientID, group, model string, subs map[string]string) []byte {
	cd := protocol.ConsumerData{GroupName: group, ConsumeType: protocol.ConsumePassively, MessageModel: model,
		ConsumeFromWhere: "CONSUME_FROM_FIRST_OFFSET"}
	for topic, expr := range subs {
		tags, codes := protocol.ParseSubscription(expr)
		cd.SubscriptionDataSet = append(cd.SubscriptionDataSet, protocol.SubscriptionData{
			Topic: topic, SubString: expr, TagsSet: tags, CodeSet: codes, ExpressionType: protocol.ExpressionTypeTag,
		})
	}
	b, _ := json.Marshal(protocol.HeartbeatData{ClientID: clientID, ConsumerDataSet: []protocol.ConsumerData{cd}})
	return b
}
