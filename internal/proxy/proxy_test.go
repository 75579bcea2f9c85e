package proxy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/client/admin"
	"github.com/zonemq/zonemq/internal/acl"
	"github.com/zonemq/zonemq/internal/broker"
	"github.com/zonemq/zonemq/internal/devcluster"
	"github.com/zonemq/zonemq/internal/proxy"
	"github.com/zonemq/zonemq/internal/testutil"
)

func testLogger() *slog.Logger {
	if os.Getenv("ZONEMQ_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.DiscardHandler)
}

var (
	peerOnce sync.Once
	peerBin  string
	peerErr  error
)

// v5peer builds test/v5peer, the official RocketMQ 5 Go client in a
// process of its own, once per test binary.
func v5peer(t *testing.T) string {
	t.Helper()
	peerOnce.Do(func() {
		dir, err := os.MkdirTemp("", "v5peer-")
		if err != nil {
			peerErr = err
			return
		}
		peerBin = filepath.Join(dir, "v5peer")
		out, err := exec.Command("go", "build", "-o", peerBin, "../../test/v5peer").CombinedOutput()
		if err != nil {
			peerErr = fmt.Errorf("go build v5peer: %v\n%s", err, out)
		}
	})
	if peerErr != nil {
		t.Fatal(peerErr)
	}
	return peerBin
}

// peerLine is one line v5peer prints.
type peerLine struct {
	Op      string `json:"op"`
	Body    string `json:"body"`
	ID      string `json:"id"`
	Attempt int    `json:"attempt"`
	Err     string `json:"err"`
	Sent    int    `json:"sent"`
	Failed  int    `json:"failed"`
	Acked   int    `json:"acked"`
	At      int64  `json:"at"`
}

// runPeer runs v5peer with args and returns its lines, its stderr and its
// exit error.
func runPeer(t *testing.T, args ...string) ([]peerLine, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, v5peer(t), args...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "TMPDIR="+t.TempDir()) // its logs go with the test
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var lines []peerLine
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		var l peerLine
		if json.Unmarshal(sc.Bytes(), &l) == nil {
			lines = append(lines, l)
		}
	}
	return lines, stderr.String(), err
}

// cluster starts a 2-IDC dev cluster with topic (4 queues per broker) and
// an access point in IDC 1.
func cluster(t *testing.T, topic string) (*devcluster.Cluster, *proxy.Server) {
	t.Helper()
	return clusterB(t, topic)
}

// clusterB is cluster for tests and benchmarks.
func clusterB(t testing.TB, topic string) (*devcluster.Cluster, *proxy.Server) {
	return clusterWith(t, topic, nil)
}

// clusterWith is cluster with the brokers' options changed by broker.
func clusterWith(t testing.TB, topic string, brokerOpts func(int, *broker.Options)) (*devcluster.Cluster, *proxy.Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := devcluster.Start(ctx, devcluster.Options{IDCs: 2, DataDir: t.TempDir(), Logger: testLogger(), Broker: brokerOpts})
	testutil.NoError(t, err, "devcluster.Start")
	t.Cleanup(func() { c.Close() })

	adm := sdkAdmin(t, c, 1)
	testutil.NoError(t, adm.CreateTopic(ctx, admin.TopicSpec{Topic: topic, Queues: 4}), "CreateTopic")
	testutil.Eventually(t, 10*time.Second, func() error {
		r, err := adm.TopicRoute(ctx, topic)
		if err != nil {
			return err
		}
		if len(r.Brokers) != 2 {
			return fmt.Errorf("route of %s has %d brokers", topic, len(r.Brokers))
		}
		return nil
	})

	ap, err := proxy.Start(ctx, proxy.Config{Listen: c.Host(1) + ":0", IDC: devcluster.IDCName(1), Cluster: sdkConfig(c, 1), Logger: testLogger()})
	testutil.NoError(t, err, "proxy.Start")
	t.Cleanup(func() { ap.Close(context.Background()) })
	return c, ap
}

// sdkConfig is IDC n's SDK config with the test logger.
func sdkConfig(c *devcluster.Cluster, n int) client.ClientConfig {
	cc := c.ClientConfig(n)
	cc.Logger = testLogger()
	return cc
}

// sdkAdmin is a started admin client of IDC n, shut down at the end of the test.
func sdkAdmin(t testing.TB, c *devcluster.Cluster, n int) *admin.Client {
	t.Helper()
	adm, err := admin.New(admin.Config{ClientConfig: sdkConfig(c, n)})
	testutil.NoError(t, err)
	testutil.NoError(t, adm.Start(context.Background()))
	t.Cleanup(func() { adm.Shutdown(context.Background()) })
	return adm
}

// sdkProducer is a started SDK producer of IDC n, shut down at the end of the test.
func sdkProducer(t testing.TB, c *devcluster.Cluster, n int) *client.Producer {
	t.Helper()
	p, err := client.NewProducer(client.ProducerConfig{ClientConfig: sdkConfig(c, n)})
	testutil.NoError(t, err)
	testutil.NoError(t, p.Start(context.Background()))
	t.Cleanup(func() { p.Shutdown(context.Background()) })
	return p
}

// drain reads every message of topic from every broker.
func drain(t *testing.T, c *devcluster.Cluster, topic string) []*client.MessageExt {
	t.Helper()
	ctx := context.Background()
	pc, err := client.NewPullConsumer(client.PullConsumerConfig{ClientConfig: sdkConfig(c, 1), Group: "drain"})
	testutil.NoError(t, err)
	testutil.NoError(t, pc.Start(ctx))
	defer pc.Shutdown(ctx)
	qs, err := pc.FetchQueues(ctx, topic)
	testutil.NoError(t, err)
	var out []*client.MessageExt
	for _, q := range qs {
		for off := int64(0); ; {
			r, err := pc.Pull(ctx, q, off, 32)
			testutil.NoError(t, err, q)
			if r.Status != client.PullFound {
				break
			}
			out = append(out, r.Messages...)
			off = r.NextBeginOffset
		}
	}
	return out
}

// The official Go client's producer sends through the access point with
// TLS and with plaintext; every message lands once, in the access point's
// own IDC, with the client's message id, tag and keys.
func TestV5ProducerSendsThroughTheAccessPoint(t *testing.T) {
	c, ap := cluster(t, "V5Orders")
	for _, mode := range []string{"tls", "plain"} {
		args := []string{"produce", "--endpoint", ap.Addr(), "--topic", "V5Orders", "--count", "40", "--prefix", mode,
			"--tag", "TagA", "--keys", "order-" + mode, "--inflight", "8"}
		if mode == "tls" {
			args = append(args, "--tls")
		}
		lines, stderr, err := runPeer(t, args...)
		testutil.NoError(t, err, mode, stderr)
		last := lines[len(lines)-1]
		testutil.Equal(t, last.Op, "done", mode)
		testutil.Equal(t, last.Sent, 40, mode, lines)
	}

	got := drain(t, c, "V5Orders")
	testutil.Equal(t, len(got), 80)
	seen := map[string]*client.MessageExt{}
	for _, m := range got {
		seen[string(m.Body)] = m
		testutil.Equal(t, m.IDC, devcluster.IDCName(1), "stored in the access point's IDC", string(m.Body))
		testutil.Equal(t, m.Tags, "TagA")
	}
	testutil.Equal(t, len(seen), 80, "distinct bodies")
	lines, _, err := runPeer(t, "produce", "--endpoint", ap.Addr(), "--topic", "V5Orders", "--count", "3", "--prefix", "ids")
	testutil.NoError(t, err)
	for _, l := range lines[:3] {
		testutil.True(t, l.ID != "", "a message id", l)
	}
	got = drain(t, c, "V5Orders")
	for _, m := range got {
		if l := slices.IndexFunc(lines, func(l peerLine) bool { return l.Body == string(m.Body) }); l >= 0 {
			testutil.Equal(t, m.MsgID, lines[l].ID, "the client's message id is the stored one")
		}
	}
}

// A message group's messages go to one queue, in the order sent.
func TestV5FIFOMessagesKeepTheirOrder(t *testing.T) {
	c, ap := cluster(t, "V5Fifo")
	lines, stderr, err := runPeer(t, "produce", "--endpoint", ap.Addr(), "--topic", "V5Fifo", "--count", "30",
		"--prefix", "f", "--fifo-group", "order-17")
	testutil.NoError(t, err, stderr)
	testutil.Equal(t, lines[len(lines)-1].Sent, 30, lines)
	got := drain(t, c, "V5Fifo")
	testutil.Equal(t, len(got), 30)
	for i, m := range got {
		testutil.Equal(t, m.BrokerName+"#"+fmt.Sprint(m.QueueID), got[0].BrokerName+"#"+fmt.Sprint(got[0].QueueID), "one queue")
		testutil.Equal(t, string(m.Body), fmt.Sprintf("f-%d", i), "in order")
		testutil.Equal(t, m.Properties["__SHARDINGKEY"], "order-17")
	}
}

// An unknown topic fails the client's start with TOPIC_NOT_FOUND.
func TestV5UnknownTopic(t *testing.T) {
	_, ap := cluster(t, "V5Known")
	_, stderr, err := runPeer(t, "produce", "--endpoint", ap.Addr(), "--topic", "V5NoSuchTopic", "--count", "1")
	testutil.True(t, err != nil, "the client cannot start")
	testutil.True(t, bytes.Contains([]byte(stderr), []byte("TOPIC_NOT_FOUND")), "TOPIC_NOT_FOUND in:", stderr)
}

// The official client's SimpleConsumer receives through the access point
// what remoting producers and 5.x producers sent, with the same message
// ids; a message left unacked comes again (attempt 2) after its invisible
// time; an acked one never does, not even for a new consumer of the group.
func TestV5SimpleConsumer(t *testing.T) {
	c, ap := cluster(t, "V5Simple")
	p := sdkProducer(t, c, 2)
	ids := map[string]string{}
	for i := 0; i < 10; i++ {
		body := fmt.Sprintf("remoting-%d", i)
		res, err := p.SendSync(context.Background(), &client.Message{Topic: "V5Simple", Tags: "T", Keys: []string{"k"}, Body: []byte(body),
			Properties: map[string]string{"color": "blue"}})
		testutil.NoError(t, err)
		ids[body] = res.MsgID
	}
	lines, stderr, err := runPeer(t, "produce", "--endpoint", ap.Addr(), "--topic", "V5Simple", "--count", "10", "--prefix", "v5")
	testutil.NoError(t, err, stderr)
	for _, l := range lines {
		if l.Op == "send" {
			ids[l.Body] = l.ID
		}
	}
	testutil.Equal(t, len(ids), 20)

	lines, stderr, err = runPeer(t, "simple", "--endpoint", ap.Addr(), "--topic", "V5Simple", "--group", "V5SimpleGroup",
		"--count", "20", "--invisible", "2s", "--await", "2s", "--skip-ack-first", "2", "--tls")
	testutil.NoError(t, err, stderr)
	testutil.Equal(t, lines[len(lines)-1].Acked, 20, "every message acked", lines)
	skipped := map[string]bool{}
	again := 0
	for _, l := range lines {
		if l.Op != "recv" {
			continue
		}
		testutil.Equal(t, l.ID, ids[l.Body], "the message id the producer got", l.Body)
		if len(skipped) < 2 && l.Attempt == 1 {
			skipped[l.Body] = true
		} else if skipped[l.Body] {
			testutil.Equal(t, l.Attempt, 2, "a redelivery counts its attempt", l.Body)
			again++
		}
	}
	testutil.Equal(t, again, 2, "both unacked messages came again")

	lines, _, err = runPeer(t, "simple", "--endpoint", ap.Addr(), "--topic", "V5Simple", "--group", "V5SimpleGroup",
		"--count", "1", "--await", "1s", "--timeout", "4s")
	testutil.NoError(t, err)
	testutil.Equal(t, lines[len(lines)-1].Acked, 0, "nothing acked comes again", lines)
}

// The official client's PushConsumer receives every message through the
// access point.
func TestV5PushConsumer(t *testing.T) {
	_, ap := cluster(t, "V5Push")
	_, stderr, err := runPeer(t, "produce", "--endpoint", ap.Addr(), "--topic", "V5Push", "--count", "30", "--prefix", "p")
	testutil.NoError(t, err, stderr)
	lines, stderr, err := runPeer(t, "push", "--endpoint", ap.Addr(), "--topic", "V5Push", "--group", "V5PushGroup", "--count", "30")
	testutil.NoError(t, err, stderr)
	testutil.Equal(t, lines[len(lines)-1].Acked, 30, "every message consumed", lines)
}

// startAccessPoint starts IDC n's access point, closed at the end of the
// test (Close is idempotent, so a test may close it earlier).
func startAccessPoint(t *testing.T, c *devcluster.Cluster, n int) *proxy.Server {
	t.Helper()
	ap, err := proxy.Start(context.Background(), proxy.Config{Listen: c.Host(n) + ":0", IDC: devcluster.IDCName(n),
		Cluster: sdkConfig(c, n), Logger: testLogger()})
	testutil.NoError(t, err, "proxy.Start")
	t.Cleanup(func() { ap.Close(context.Background()) })
	return ap
}

// With its own IDC's broker down, the access point sends to and receives
// from another IDC's: 5.x clients see no failure.
func TestV5BrokerDownInTheAccessPointsIDC(t *testing.T) {
	c, ap := cluster(t, "V5Failover")
	c.StopBroker(1)
	lines, stderr, err := runPeer(t, "produce", "--endpoint", ap.Addr(), "--topic", "V5Failover", "--count", "20", "--prefix", "f")
	testutil.NoError(t, err, stderr)
	testutil.Equal(t, lines[len(lines)-1].Sent, 20, "every send succeeded", lines)
	for _, m := range drain(t, c, "V5Failover") {
		testutil.Equal(t, m.IDC, devcluster.IDCName(2), "stored in the other IDC")
	}
	lines, stderr, err = runPeer(t, "simple", "--endpoint", ap.Addr(), "--topic", "V5Failover", "--group", "V5FailoverGroup",
		"--count", "20", "--await", "2s")
	testutil.NoError(t, err, stderr)
	testutil.Equal(t, lines[len(lines)-1].Acked, 20, "every message received from the other IDC", lines)
}

// A whole IDC lost, access point included: a 5.x client configured with
// both IDCs' access points produces and consumes through the other.
func TestV5IDCLost(t *testing.T) {
	c, ap1 := cluster(t, "V5IDCLost")
	ap2 := startAccessPoint(t, c, 2)
	both := ap1.Addr() + ";" + ap2.Addr()
	lines, stderr, err := runPeer(t, "produce", "--endpoint", both, "--topic", "V5IDCLost", "--count", "10", "--prefix", "before")
	testutil.NoError(t, err, stderr)
	testutil.Equal(t, lines[len(lines)-1].Sent, 10, lines)

	ap1.Close(context.Background())
	c.StopIDC(1)
	lines, stderr, err = runPeer(t, "produce", "--endpoint", both, "--topic", "V5IDCLost", "--count", "10", "--prefix", "after")
	testutil.NoError(t, err, stderr)
	testutil.Equal(t, lines[len(lines)-1].Sent, 10, "every send succeeded with idc1 gone", lines)
	// The "before" messages are on idc2 too when the client's one
	// connection went to idc2's access point: consume whatever idc2 holds.
	avail := len(drain(t, c, "V5IDCLost"))
	testutil.True(t, avail == 10 || avail == 20, "idc2 holds the after messages and maybe the before ones", avail)
	lines, stderr, err = runPeer(t, "simple", "--endpoint", both, "--topic", "V5IDCLost", "--group", "V5IDCLostGroup",
		"--count", fmt.Sprint(avail), "--await", "2s", "--timeout", "30s")
	testutil.NoError(t, err, stderr)
	got := map[string]bool{}
	for _, l := range lines {
		if l.Op == "ack" && l.Err == "" {
			got[l.Body] = true
		}
	}
	for i := 0; i < 10; i++ {
		testutil.True(t, got[fmt.Sprintf("after-%d", i)], "sent after the loss, received", i, lines)
	}
}

const v5ACL = `accounts:
  - accessKey: v5writer
    secretKey: v5writerSecret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms:
      - V5Acl=PUB
  - accessKey: v5reader
    secretKey: v5readerSecret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms:
      - V5Acl=SUB
    groupPerms:
      - V5AclGroup=SUB
`

// With an ACL, the access point checks the RocketMQ 5 clients' signatures
// and permissions: the right account sends and receives; a wrong secret
// cannot start; an account without PUB cannot send; no credentials, none.
func TestV5ACL(t *testing.T) {
	c, _ := cluster(t, "V5Acl")
	path := filepath.Join(t.TempDir(), "plain_acl.yml")
	testutil.NoError(t, os.WriteFile(path, []byte(v5ACL), 0o600))
	checker, err := acl.Load(path, testLogger())
	testutil.NoError(t, err)
	ap, err := proxy.Start(context.Background(), proxy.Config{Listen: c.Host(1) + ":0", IDC: devcluster.IDCName(1),
		Cluster: sdkConfig(c, 1), ACL: checker, Logger: testLogger()})
	testutil.NoError(t, err)
	t.Cleanup(func() { ap.Close(context.Background()) })

	produce := func(ak, sk string) ([]peerLine, string, error) {
		return runPeer(t, "produce", "--endpoint", ap.Addr(), "--topic", "V5Acl", "--count", "5", "--prefix", ak,
			"--access-key", ak, "--secret-key", sk)
	}
	lines, stderr, err := produce("v5writer", "v5writerSecret")
	testutil.NoError(t, err, stderr)
	testutil.Equal(t, lines[len(lines)-1].Sent, 5, lines)

	_, stderr, err = produce("v5writer", "wrongSecret")
	testutil.True(t, err != nil && strings.Contains(stderr, "UNAUTHORIZED"), "a wrong secret is refused", stderr)
	_, stderr, err = produce("", "")
	testutil.True(t, err != nil && strings.Contains(stderr, "UNAUTHORIZED"), "no credentials are refused", stderr)
	lines, stderr, err = produce("v5reader", "v5readerSecret")
	testutil.NoError(t, err, stderr)
	testutil.Equal(t, lines[len(lines)-1].Failed, 5, "an account without PUB sends nothing", lines)
	testutil.True(t, strings.Contains(lines[0].Err, "FORBIDDEN"), lines[0].Err)

	lines, stderr, err = runPeer(t, "simple", "--endpoint", ap.Addr(), "--topic", "V5Acl", "--group", "V5AclGroup", "--count", "5",
		"--await", "2s", "--access-key", "v5reader", "--secret-key", "v5readerSecret")
	testutil.NoError(t, err, stderr)
	testutil.Equal(t, lines[len(lines)-1].Acked, 5, "the reader receives", lines)
}

// A planned switchover of the access point's broker group while a 5.x
// consumer group is half way: every message is still received and acked,
// whatever was in flight comes again from the new master.
func TestV5ConsumeAcrossASwitchover(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, err := devcluster.Start(ctx, devcluster.Options{IDCs: 2, Replicas: 2, Replication: "sync", DataDir: t.TempDir(), Logger: testLogger()})
	testutil.NoError(t, err, "devcluster.Start")
	t.Cleanup(func() { c.Close() })
	adm := sdkAdmin(t, c, 1)
	testutil.NoError(t, adm.CreateTopic(ctx, admin.TopicSpec{Topic: "V5Switch", Queues: 2}))
	testutil.NoError(t, c.WaitReplicasInSync(ctx))
	ap := startAccessPoint(t, c, 1)

	lines, stderr, err := runPeer(t, "produce", "--endpoint", ap.Addr(), "--topic", "V5Switch", "--count", "40", "--prefix", "s")
	testutil.NoError(t, err, stderr)
	testutil.Equal(t, lines[len(lines)-1].Sent, 40, lines)
	acked := map[string]bool{}
	consume := func(n int) {
		t.Helper()
		lines, stderr, err := runPeer(t, "simple", "--endpoint", ap.Addr(), "--topic", "V5Switch", "--group", "V5SwitchGroup",
			"--count", fmt.Sprint(n), "--await", "2s", "--invisible", "3s", "--timeout", "20s")
		testutil.NoError(t, err, stderr)
		for _, l := range lines {
			if l.Op == "ack" && l.Err == "" {
				acked[l.Body] = true
			}
		}
	}
	consume(20)
	testutil.True(t, len(acked) >= 20, "half acked before", len(acked))
	_, err = adm.SwitchMaster(ctx, devcluster.BrokerName(1), 1, false, 5*time.Second)
	testutil.NoError(t, err, "switchover")
	for round := 0; round < 3 && len(acked) < 40; round++ {
		consume(40 - len(acked))
	}
	for i := 0; i < 40; i++ {
		testutil.True(t, acked[fmt.Sprintf("s-%d", i)], "received and acked", i)
	}
}

// Silent connections (never a byte) and garbage do not hold up the access
// point: a client connecting after them is served.
func TestV5SilentConnectionsDoNotBlock(t *testing.T) {
	_, ap := cluster(t, "V5Silent")
	for i := 0; i < 50; i++ {
		cn, err := net.Dial("tcp", ap.Addr())
		testutil.NoError(t, err)
		t.Cleanup(func() { cn.Close() })
		if i%2 == 1 {
			cn.Write([]byte("GET / HTTP/1.1\r\n\r\n")) // not HTTP/2: the server hangs up
		}
	}
	lines, stderr, err := runPeer(t, "produce", "--endpoint", ap.Addr(), "--topic", "V5Silent", "--count", "3", "--tls")
	testutil.NoError(t, err, stderr)
	testutil.Equal(t, lines[len(lines)-1].Sent, 3, lines)
}

// A delay message from the official client is held until its delivery
// time, then received.
func TestV5DelayMessage(t *testing.T) {
	_, ap := cluster(t, "V5Delay")
	sent := time.Now()
	lines, stderr, err := runPeer(t, "produce", "--endpoint", ap.Addr(), "--topic", "V5Delay", "--count", "3", "--prefix", "d",
		"--delay", "10s")
	testutil.NoError(t, err, stderr)
	testutil.Equal(t, lines[len(lines)-1].Sent, 3, lines)
	consume := func(timeout string) int {
		lines, stderr, err := runPeer(t, "simple", "--endpoint", ap.Addr(), "--topic", "V5Delay", "--group", "V5DelayGroup",
			"--count", "3", "--await", "1s", "--timeout", timeout)
		testutil.NoError(t, err, stderr)
		return lines[len(lines)-1].Acked
	}
	if early := consume("2s"); time.Since(sent) < 9*time.Second {
		testutil.Equal(t, early, 0, "nothing before the delivery time")
	}
	testutil.Equal(t, consume("30s"), 3, "all after it")
	testutil.True(t, time.Since(sent) >= 10*time.Second, "received no earlier than the delivery time", time.Since(sent))
}

// Transactions from the official client: committed messages are received,
// rolled-back ones never; messages left open are checked through the
// access point's Telemetry stream and the client's answer holds.
func TestV5Transactions(t *testing.T) {
	c, ap := clusterWith(t, "V5Tx", func(_ int, o *broker.Options) {
		o.TransactionCheckInterval = 300 * time.Millisecond
		o.TransactionTimeout = time.Second
	})
	run := func(args ...string) []peerLine {
		t.Helper()
		lines, stderr, err := runPeer(t, append([]string{"transaction", "--endpoint", ap.Addr(), "--topic", "V5Tx", "--count", "3"}, args...)...)
		testutil.NoError(t, err, stderr)
		testutil.Equal(t, lines[len(lines)-1].Sent, 3, lines)
		return lines
	}
	run("--prefix", "commit", "--end", "commit")
	run("--prefix", "rollback", "--end", "rollback")
	checks := 0
	for _, l := range run("--prefix", "checked", "--end", "none", "--check", "commit", "--wait", "5s") {
		if l.Op == "check" {
			checks++
		}
	}
	testutil.True(t, checks >= 3, "every open transaction was checked", checks)
	bodies := map[string]bool{}
	for _, m := range drain(t, c, "V5Tx") {
		bodies[string(m.Body)] = true
	}
	for i := 0; i < 3; i++ {
		testutil.True(t, bodies[fmt.Sprintf("commit-%d", i)], "committed", i)
		testutil.True(t, bodies[fmt.Sprintf("checked-%d", i)], "committed on check", i)
		testutil.True(t, !bodies[fmt.Sprintf("rollback-%d", i)], "rolled back", i)
	}
	testutil.Equal(t, len(bodies), 6, bodies)
}

// An orderly group (admin group update --orderly) is FIFO for the official
// push consumer: a message group's messages arrive in the order sent.
func TestV5FIFOConsumerGroup(t *testing.T) {
	c, ap := cluster(t, "V5FifoGroup")
	adm := sdkAdmin(t, c, 1)
	testutil.NoError(t, adm.UpdateGroup(context.Background(), admin.GroupSpec{Group: "V5FifoConsumers", Orderly: true}))

	_, stderr, err := runPeer(t, "produce", "--endpoint", ap.Addr(), "--topic", "V5FifoGroup", "--count", "30", "--prefix", "o",
		"--fifo-group", "account-9")
	testutil.NoError(t, err, stderr)
	lines, stderr, err := runPeer(t, "push", "--endpoint", ap.Addr(), "--topic", "V5FifoGroup", "--group", "V5FifoConsumers",
		"--count", "30")
	testutil.NoError(t, err, stderr)
	testutil.Equal(t, lines[len(lines)-1].Acked, 30, lines)
	next := 0
	for _, l := range lines {
		if l.Op == "recv" {
			testutil.Equal(t, l.Body, fmt.Sprintf("o-%d", next), "in order")
			next++
		}
	}
}

// A push consumer whose handler outlasts the invisible time sees each
// message once: the access point renews the invisible time while the
// client is connected, and the client acks with the handle it got.
func TestV5PushConsumerSlowHandlerAutoRenew(t *testing.T) {
	restore := proxy.SetRenewTimes(2*time.Second, 500*time.Millisecond)
	defer restore()
	_, ap := cluster(t, "V5Renew")
	_, stderr, err := runPeer(t, "produce", "--endpoint", ap.Addr(), "--topic", "V5Renew", "--count", "3", "--prefix", "r")
	testutil.NoError(t, err, stderr)
	lines, stderr, err := runPeer(t, "push", "--endpoint", ap.Addr(), "--topic", "V5Renew", "--group", "V5RenewGroup",
		"--count", "3", "--handler-delay", "5s", "--timeout", "40s")
	testutil.NoError(t, err, stderr)
	testutil.Equal(t, lines[len(lines)-1].Acked, 3, lines)
	for _, l := range lines {
		if l.Op == "recv" {
			testutil.Equal(t, l.Attempt, 1, "delivered once, though the handler took longer than the invisible time", l.Body)
		}
	}
}

// RecallMessage cancels a delay message before it is due: the recalled
// ones are never received, the others are; recalling one twice fails.
func TestV5RecallDelayMessage(t *testing.T) {
	c, ap := cluster(t, "V5Recall")
	lines, stderr, err := runPeer(t, "produce", "--endpoint", ap.Addr(), "--topic", "V5Recall", "--count", "6", "--prefix", "rc",
		"--delay", "3s", "--recall-every", "2")
	testutil.NoError(t, err, stderr)
	recalled := map[string]bool{}
	for _, l := range lines {
		if l.Op == "recall" {
			testutil.Equal(t, l.Err, "", "recall", l.Body)
			recalled[l.Body] = true
		}
	}
	testutil.Equal(t, len(recalled), 3, lines)
	got := map[string]bool{}
	testutil.Eventually(t, 20*time.Second, func() error {
		for _, m := range drain(t, c, "V5Recall") {
			got[string(m.Body)] = true
		}
		if len(got) < 3 {
			return fmt.Errorf("%d of the 3 kept messages delivered", len(got))
		}
		return nil
	})
	// Each recalled message was sent, and is due, before the kept one after
	// it: with the kept ones delivered, a recalled one would show by now.
	for _, m := range drain(t, c, "V5Recall") {
		got[string(m.Body)] = true
	}
	for body := range recalled {
		testutil.True(t, !got[body], "recalled, never delivered", body)
	}
	testutil.Equal(t, len(got), 3, got)
}

// A 5.x consumer subscribed with SQL92 receives only the messages whose
// properties match; a malformed expression is ILLEGAL_FILTER_EXPRESSION.
func TestV5SQLFilter(t *testing.T) {
	c, ap := cluster(t, "V5Sql")
	p := sdkProducer(t, c, 1)
	for i := 0; i < 10; i++ {
		_, err := p.SendSync(context.Background(), &client.Message{Topic: "V5Sql", Body: []byte(fmt.Sprintf("amount-%d", i*30)),
			Properties: map[string]string{"amount": fmt.Sprint(i * 30)}})
		testutil.NoError(t, err)
	}
	lines, stderr, err := runPeer(t, "simple", "--endpoint", ap.Addr(), "--topic", "V5Sql", "--group", "V5SqlGroup",
		"--count", "6", "--await", "2s", "--sql", "amount > 100", "--timeout", "20s")
	testutil.NoError(t, err, stderr)
	testutil.Equal(t, lines[len(lines)-1].Acked, 6, lines)
	for _, l := range lines {
		if l.Op == "recv" {
			var amount int
			fmt.Sscanf(l.Body, "amount-%d", &amount)
			testutil.True(t, amount > 100, "only matching messages", l.Body)
		}
	}
	lines, _, err = runPeer(t, "simple", "--endpoint", ap.Addr(), "--topic", "V5Sql", "--group", "V5SqlGroup2",
		"--count", "1", "--await", "1s", "--sql", "amount >>> 1", "--timeout", "3s")
	testutil.NoError(t, err)
	bad := false
	for _, l := range lines {
		bad = bad || strings.Contains(l.Err, "ILLEGAL_FILTER_EXPRESSION")
	}
	testutil.True(t, bad, "a malformed expression is refused", lines)
}
