package client

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"net/netip"
	"regexp"
	"strings"
	"testing"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/testutil"
)

func TestClientConfigValidation(t *testing.T) {
	cases := []struct {
		cfg   ClientConfig
		field string
	}{
		{ClientConfig{}, "AddrsrvURLs"},
		{ClientConfig{NamesrvAddrs: []string{"nohostport"}}, "NamesrvAddrs"},
		{ClientConfig{AddrsrvURLs: []string{"http://"}}, "AddrsrvURLs"},
		{ClientConfig{NamesrvAddrs: []string{"127.0.0.1:9876"}, IDC: "bad idc"}, "IDC"},
		{ClientConfig{NamesrvAddrs: []string{"127.0.0.1:9876"}, LocalIP: "x"}, "LocalIP"},
		{ClientConfig{NamesrvAddrs: []string{"127.0.0.1:9876"}, InstanceName: "a@b"}, "InstanceName"},
	}
	for _, c := range cases {
		_, err := c.cfg.normalize()
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field {
			t.Errorf("normalize(%+v) = %v, want a ConfigError on %s", c.cfg, err, c.field)
		}
	}
	cfg, err := ClientConfig{NamesrvAddrs: []string{"127.0.0.1:9876;127.0.0.2:9876"}, AddrsrvURLs: []string{"127.0.1.1:18080/"}}.normalize()
	testutil.NoError(t, err)
	testutil.Equal(t, len(cfg.NamesrvAddrs), 2, "split name servers")
	testutil.Equal(t, cfg.AddrsrvURLs[0], "http://127.0.1.1:18080", "address server URL")
	testutil.Equal(t, cfg.RequestTimeout, DefaultRequestTimeout, "default request timeout")
	testutil.True(t, cfg.InstanceName != "", "default instance name")
	other, _ := ClientConfig{NamesrvAddrs: []string{"127.0.0.1:9876"}}.normalize()
	testutil.True(t, other.InstanceName != cfg.InstanceName, "instance names differ per client")

	if _, err := NewProducer(ProducerConfig{ClientConfig: ClientConfig{NamesrvAddrs: []string{"127.0.0.1:1"}}, Group: "bad group"}); err == nil {
		t.Fatal("NewProducer accepted a bad group")
	}
	if _, err := NewPushConsumer(ConsumerConfig{ClientConfig: ClientConfig{NamesrvAddrs: []string{"127.0.0.1:1"}}}); err == nil {
		t.Fatal("NewPushConsumer accepted an empty group")
	}
	p, err := NewProducer(ProducerConfig{ClientConfig: ClientConfig{NamesrvAddrs: []string{"127.0.0.1:1"}}})
	testutil.NoError(t, err)
	if _, err := p.SendSync(context.Background(), &Message{Topic: "T", Body: []byte("x")}); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("send before Start: %v", err)
	}
	testutil.NoError(t, p.Shutdown(context.Background()))
	if _, err := p.SendSync(context.Background(), &Message{Topic: "T", Body: []byte("x")}); !errors.Is(err, ErrShutdown) {
		t.Fatalf("send after Shutdown: %v", err)
	}
}

func TestClientUniqKeys(t *testing.T) {
	u := newUniqKeys()
	re := regexp.MustCompile(`^[0-9A-F]{20}[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for i := 0; i < 200000; i++ {
		k := u.next()
		if !re.MatchString(k) {
			t.Fatalf("key %q is not 20 upper + 12 lower hex characters", k)
		}
		if seen[k] {
			t.Fatalf("key %q repeated after %d keys", k, i)
		}
		seen[k] = true
	}
}

func TestClientProcessQueueCommitOffset(t *testing.T) {
	pq := newProcessQueue(context.Background(), MessageQueue{Topic: "T", QueueID: 0}, &brokerInfo{}, nil, 10)
	testutil.Equal(t, pq.commitOffset(), int64(10), "nothing pulled")
	var msgs []*MessageExt
	for off := int64(10); off < 15; off++ {
		msgs = append(msgs, &MessageExt{QueueOffset: off})
	}
	pq.put(msgs, 17) // 15 and 16 were filtered out by tag
	testutil.Equal(t, pq.commitOffset(), int64(10), "nothing consumed")
	pq.markDone([]*MessageExt{msgs[1], msgs[3]})
	testutil.Equal(t, pq.commitOffset(), int64(10), "lowest unconsumed is still 10")
	pq.markDone([]*MessageExt{msgs[0]})
	testutil.Equal(t, pq.commitOffset(), int64(12), "10 and 11 done")
	testutil.Equal(t, pq.cached(), 3, "cached after the front run")
	pq.markDone([]*MessageExt{msgs[2], msgs[4]})
	testutil.Equal(t, pq.commitOffset(), int64(17), "all done: the next pull offset")
	testutil.Equal(t, pq.cached(), 0, "cached when all done")
	pq.drop()
	testutil.True(t, !pq.put(msgs, 20), "put after drop")
}

func TestClientSubscriptionExpressions(t *testing.T) {
	s, err := newSubscription("T", " TagA || TagB ", nil)
	testutil.NoError(t, err)
	testutil.True(t, s.match("TagA") && s.match("TagB") && !s.match("TagC") && !s.match(""), "tag filter")
	testutil.Equal(t, len(s.data.CodeSet), 2, "code set")
	testutil.Equal(t, s.data.CodeSet[0], protocol.TagsHashCode("TagA"), "Java hash code")
	all, err := newSubscription("T", "", nil)
	testutil.NoError(t, err)
	testutil.True(t, all.match("x") && all.match(""), "empty expression matches all")
	testutil.Equal(t, all.expr, "*", "empty expression becomes *")
	if _, err := newSubscription("T", "||", nil); err == nil {
		t.Fatal("an expression without tags was accepted")
	}
}

// testRoute builds a route with one broker per IDC name given, named
// broker-a, broker-b, ...
func testRoute(topic string, idcs ...string) *route { return testRouteNamed(topic, "broker-", idcs...) }

func testRouteNamed(topic, prefix string, idcs ...string) *route {
	data := &protocol.TopicRouteData{}
	for i, x := range idcs {
		name := prefix + string(rune('a'+i))
		data.BrokerDatas = append(data.BrokerDatas, protocol.BrokerData{BrokerName: name, ZoneName: x, BrokerAddrs: map[int64]string{0: "127.0.0.1:1"}})
		data.QueueDatas = append(data.QueueDatas, protocol.QueueData{BrokerName: name, ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6})
	}
	return newRoute(topic, data, nil)
}

func TestClientQueueChoice(t *testing.T) {
	c := &core{cfg: ClientConfig{IDC: "idc1"}}
	c.routes = newRouteTable(c)
	s := &sender{c: c, isolation: DefaultBrokerIsolation, isolated: map[string]isolation{}}
	r := testRoute("T", "idc2", "idc1", "idc3")
	c.routes.topics["T"] = r
	p, err := s.plan(context.Background(), "T")
	testutil.NoError(t, err)
	for i := 0; i < 10; i++ {
		q, err := s.pickRoundRobin(p, map[string]bool{})
		testutil.NoError(t, err)
		testutil.Equal(t, q.broker.idc, "idc1", "healthy pick")
	}
	q, err := s.pickRoundRobin(p, map[string]bool{"broker-b": true})
	testutil.NoError(t, err)
	testutil.True(t, q.broker.idc != "idc1", "after the own broker failed")
	s.isolate("broker-a", "")
	s.isolate("broker-c", "")
	q, _ = s.pickRoundRobin(p, map[string]bool{"broker-b": true})
	testutil.True(t, q.broker.name == "broker-a" || q.broker.name == "broker-c", "isolated brokers are still tried last")
	_, err = s.pickRoundRobin(p, map[string]bool{"broker-a": true, "broker-b": true, "broker-c": true})
	testutil.True(t, errors.Is(err, errNoQueue), "all tried")
	testutil.True(t, r.idcHasLiveBroker("IDC2") && !r.idcHasLiveBroker("idc9"), "idcHasLiveBroker")

	// A topic that lives only in other IDCs is created locally through the
	// auto-create template, not sent across IDCs.
	c.routes.topics["Remote"] = testRouteNamed("Remote", "remote-", "idc2")
	c.routes.topics[protocol.AutoCreateTopicKey] = testRoute(protocol.AutoCreateTopicKey, "idc1", "idc2")
	p, err = s.plan(context.Background(), "Remote")
	testutil.NoError(t, err)
	s.recovered("broker-a")
	q, err = s.pickRoundRobin(p, map[string]bool{})
	testutil.NoError(t, err)
	testutil.True(t, q.autoCreate && q.broker.idc == "idc1", "local auto-create")
	q, err = s.pickRoundRobin(p, map[string]bool{q.broker.name: true})
	testutil.NoError(t, err)
	testutil.True(t, !q.autoCreate && q.broker.idc == "idc2", "then the topic's remote broker")

	// Ordered sends use the own IDC's queues only while it has any.
	p, _ = s.plan(context.Background(), "T")
	choices := s.orderedChoices(p)
	testutil.Equal(t, len(choices[0]), 2, "own IDC's ordered queues")
	testutil.Equal(t, choices[0][0].broker.idc, "idc1", "ordered queue IDC")
	testutil.Equal(t, len(choices[2]), 6, "every queue")
	r.data.OrderTopicConf = "broker-c:1;broker-a:3"
	qs := orderQueues(r)
	testutil.Equal(t, len(qs), 4, "orderTopicConf queues")
	testutil.Equal(t, qs[0].broker.name, "broker-c", "orderTopicConf order")
	mqs := []MessageQueue{{QueueID: 0}, {QueueID: 1}, {QueueID: 2}}
	testutil.Equal(t, HashSelector{}.Select(mqs, nil, 7).QueueID, 1, "integer keys map by value")
	testutil.Equal(t, HashSelector{}.Select(mqs, nil, "order-9"), HashSelector{}.Select(mqs, nil, "order-9"), "stable")
}

func TestClientDecodeMessages(t *testing.T) {
	body := strings.Repeat("z", 5000)
	z, smaller, err := compressBody([]byte(body))
	testutil.NoError(t, err)
	testutil.True(t, smaller, "a repetitive body compresses")
	props := protocol.EncodeProperties(map[string]string{"TAGS": "T1", "KEYS": "a b", "UNIQ_KEY": "ABC", "RETRY_TOPIC": "Orig"})
	var buf []byte
	for i, m := range []*protocol.MessageExt{
		{Topic: "%RETRY%g", QueueID: 1, QueueOffset: 5, CommitLogOffset: 100, SysFlag: protocol.SysFlagCompressed, Body: z, Properties: props, ReconsumeTimes: 2,
			StoreHost: netip.MustParseAddrPort("127.0.1.1:10911"), BornHost: netip.MustParseAddrPort("127.0.1.1:5000")},
		{Topic: "Plain", QueueID: 1, QueueOffset: 6, CommitLogOffset: 300, Body: []byte("plain"), StoreHost: netip.MustParseAddrPort("127.0.1.1:10911")},
	} {
		_ = i
		buf = protocol.AppendStoredMessage(buf, m)
	}
	b := &brokerInfo{name: "broker-idc1", idc: "idc1", addrs: map[int64]string{0: "127.0.1.1:10911"}}
	msgs, err := decodeMessages(buf, b)
	testutil.NoError(t, err)
	testutil.Equal(t, len(msgs), 2, "messages")
	m := msgs[0]
	testutil.Equal(t, string(m.Body), body, "inflated body")
	testutil.Equal(t, m.MsgID, "ABC", "MsgID from UNIQ_KEY")
	testutil.Equal(t, strings.Join(m.Keys, ","), "a,b", "keys")
	testutil.Equal(t, m.ReconsumeTimes, 2, "reconsume times")
	testutil.Equal(t, m.BrokerAddr, "127.0.1.1:10911", "broker address stamp")
	testutil.Equal(t, m.IDC, "idc1", "IDC stamp")
	restoreRetryTopic(m)
	testutil.Equal(t, m.Topic, "Orig", "retry topic restored")
	testutil.Equal(t, msgs[1].MsgID, msgs[1].OffsetMsgID, "MsgID falls back to the offset id")
	testutil.Equal(t, msgs[1].OffsetMsgID, protocol.OffsetMessageID(netip.MustParseAddrPort("127.0.1.1:10911"), 300), "offset id")
}

func TestClientCompressBodyIncompressible(t *testing.T) {
	// A body compression cannot shrink travels as it is.
	body := make([]byte, 5000)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range body {
		body[i] = byte(rng.Uint32())
	}
	for i := 0; i < 3; i++ { // pooled writers are reused correctly
		_, smaller, err := compressBody(body)
		testutil.NoError(t, err)
		testutil.True(t, !smaller, "incompressible body")
		z, smaller, err := compressBody(bytes.Repeat([]byte("ab"), 3000))
		testutil.NoError(t, err)
		testutil.True(t, smaller, "compressible body")
		out, err := decompressBody(z, 1<<20)
		testutil.NoError(t, err)
		testutil.True(t, bytes.Equal(out, bytes.Repeat([]byte("ab"), 3000)), "round trip after reuse")
	}
}

func BenchmarkClientCompressBody4K(b *testing.B) {
	body := bytes.Repeat([]byte("zonemq-benchmark-"), 4096/17+1)[:4096]
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := compressBody(body); err != nil {
			b.Fatal(err)
		}
	}
}
