package client

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/testutil"
)

// fakeBroker records the requests it gets and answers them with answer.
type fakeBroker struct {
	name, idc string
	srv       *remoting.Server

	mu     sync.Mutex
	reqs   []*remoting.Command
	answer func(req *remoting.Command) *remoting.Command
}

func (b *fakeBroker) requests(code protocol.RequestCode) []*remoting.Command {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []*remoting.Command
	for _, r := range b.reqs {
		if r.Code == int32(code) {
			out = append(out, r)
		}
	}
	return out
}

// sendOK answers a send like a broker that stored it at offset 7.
func sendOK(req *remoting.Command) *remoting.Command {
	resp := remoting.NewResponse(req, int32(protocol.Success), "")
	h := protocol.SendMessageResponseHeader{
		MsgID:   protocol.OffsetMessageID(netip.MustParseAddrPort("127.0.0.1:10911"), 1234),
		QueueID: 0, QueueOffset: 7,
	}
	if q := req.Ext("queueId"); q != "" {
		fmt.Sscan(q, &h.QueueID)
	} else if q := req.Ext("e"); q != "" {
		fmt.Sscan(q, &h.QueueID)
	}
	resp.ExtFields = h.Ext()
	return resp
}

func startFakeBroker(t *testing.T, name, idcName string) *fakeBroker {
	t.Helper()
	srv, err := remoting.NewServer(remoting.ServerOptions{Listen: "127.0.0.1:0"})
	testutil.NoError(t, err)
	b := &fakeBroker{name: name, idc: idcName, srv: srv, answer: sendOK}
	srv.HandleDefault(func(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
		b.mu.Lock()
		b.reqs = append(b.reqs, req)
		answer := b.answer
		b.mu.Unlock()
		return answer(req)
	})
	go srv.Serve()
	t.Cleanup(func() { srv.Close() })
	return b
}

// startFakeNamesrv serves one route (in fastjson's unquoted-key form) for
// every topic, and answers the client heartbeat like a stock RocketMQ name
// server: REQUEST_CODE_NOT_SUPPORTED.
func startFakeNamesrv(t *testing.T, brokers ...*fakeBroker) string {
	t.Helper()
	var bds, qds []string
	for _, b := range brokers {
		bds = append(bds, fmt.Sprintf(`{"brokerAddrs":{0:"%s"},"brokerName":"%s","cluster":"DefaultCluster","zoneName":"%s"}`, b.srv.Addr(), b.name, b.idc))
		qds = append(qds, fmt.Sprintf(`{"brokerName":"%s","perm":6,"readQueueNums":2,"writeQueueNums":2,"topicSysFlag":0}`, b.name))
	}
	route := `{"brokerDatas":[` + strings.Join(bds, ",") + `],"filterServerTable":{},"queueDatas":[` + strings.Join(qds, ",") + `]}`
	srv, err := remoting.NewServer(remoting.ServerOptions{Listen: "127.0.0.1:0"})
	testutil.NoError(t, err)
	srv.Handle(int32(protocol.GetRouteInfoByTopic), func(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
		resp := remoting.NewResponse(req, int32(protocol.Success), "")
		resp.Body = []byte(route)
		return resp
	})
	go srv.Serve()
	t.Cleanup(func() { srv.Close() })
	return srv.Addr()
}

func newTestProducer(t *testing.T, namesrv, idcName string) *Producer {
	t.Helper()
	p, err := NewProducer(ProducerConfig{ClientConfig: ClientConfig{NamesrvAddrs: []string{namesrv}, IDC: idcName}, Group: "pg"})
	testutil.NoError(t, err)
	testutil.NoError(t, p.Start(context.Background()))
	t.Cleanup(func() { p.Shutdown(context.Background()) })
	return p
}

func keysOf(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestSenderWireFormat: SEND_MESSAGE carries exactly rocketmq-client-go's
// long keys, big bodies travel zlib-compressed, and a batch is one
// SEND_BATCH_MESSAGE with the keys a–n and rocketmq-client-go's item layout.
func TestClientSenderWireFormat(t *testing.T) {
	b := startFakeBroker(t, "broker-a", "idc1")
	p := newTestProducer(t, startFakeNamesrv(t, b), "idc1")
	ctx := context.Background()

	res, err := p.SendSync(ctx, &Message{Topic: "WireTopic", Tags: "TagA", Keys: []string{"k1", "k2"}, Body: []byte("hello"), Properties: map[string]string{"p": "v"}})
	testutil.NoError(t, err)
	testutil.Equal(t, res.QueueOffset, int64(7), "queue offset")
	testutil.Equal(t, res.BrokerName, "broker-a", "broker")
	testutil.Equal(t, res.IDC, "idc1", "IDC")
	sends := b.requests(protocol.SendMessage)
	testutil.Equal(t, len(sends), 1, "SEND_MESSAGE requests")
	req := sends[0]
	want := []string{"batch", "bname", "bornTimestamp", "defaultTopic", "defaultTopicQueueNums", "flag", "maxReconsumeTimes",
		"producerGroup", "properties", "queueId", "reconsumeTimes", "sysFlag", "topic", "unitMode"}
	testutil.Equal(t, strings.Join(keysOf(req.ExtFields), ","), strings.Join(want, ","), "ext keys")
	for k, v := range map[string]string{"defaultTopic": "TBW102", "defaultTopicQueueNums": "4", "batch": "false", "bname": "broker-a",
		"producerGroup": "pg", "topic": "WireTopic", "sysFlag": "0", "unitMode": "false"} {
		testutil.Equal(t, req.Ext(k), v, k)
	}
	props := protocol.ParseProperties(req.Ext("properties"))
	testutil.Equal(t, props["TAGS"], "TagA", "TAGS")
	testutil.Equal(t, props["KEYS"], "k1 k2", "KEYS")
	testutil.Equal(t, props["p"], "v", "user property")
	testutil.Equal(t, props["UNIQ_KEY"], res.MsgID, "UNIQ_KEY")
	testutil.Equal(t, string(req.Body), "hello", "body")

	big := bytes.Repeat([]byte("0123456789"), 500)
	_, err = p.SendSync(ctx, &Message{Topic: "WireTopic", Body: big})
	testutil.NoError(t, err)
	req = b.requests(protocol.SendMessage)[1]
	testutil.Equal(t, req.Ext("sysFlag"), "1", "compressed sysFlag")
	inflated, err := decompressBody(req.Body, 1<<20)
	testutil.NoError(t, err)
	testutil.True(t, bytes.Equal(inflated, big), "compressed body round trip")

	m1 := &Message{Topic: "WireTopic", Body: []byte("one"), Tags: "T1"}
	m2 := &Message{Topic: "WireTopic", Body: []byte("two")}
	res, err = p.SendSync(ctx, m1, m2)
	testutil.NoError(t, err)
	testutil.Equal(t, len(strings.Split(res.MsgID, ",")), 2, "batch ids")
	batches := b.requests(protocol.SendBatchMessage)
	testutil.Equal(t, len(batches), 1, "SEND_BATCH_MESSAGE requests")
	req = batches[0]
	testutil.Equal(t, strings.Join(keysOf(req.ExtFields), ","), "a,b,c,d,e,f,g,h,i,j,k,l,m,n", "batch ext keys")
	testutil.Equal(t, req.Ext("m"), "true", "batch flag")
	testutil.Equal(t, req.Ext("i"), "", "batch wrapper properties")
	// Each item is laid out as rocketmq-client-go's Message.Marshal lays it.
	body := req.Body
	for i, m := range []*Message{m1, m2} {
		size := int(binary.BigEndian.Uint32(body))
		item := body[:size]
		body = body[size:]
		propLen := int(binary.BigEndian.Uint16(item[20+len(m.Body):]))
		props := string(item[22+len(m.Body) : 22+len(m.Body)+propLen])
		gm := primitive.NewMessage(m.Topic, m.Body)
		for k, v := range protocol.ParseProperties(props) {
			gm.WithProperty(k, v)
		}
		if len(protocol.ParseProperties(props)) == 1 { // map order is fixed only for one property
			testutil.True(t, bytes.Equal(item, gm.Marshal()), fmt.Sprintf("item %d matches rocketmq-client-go's encoding", i))
		}
		testutil.Equal(t, string(item[20:20+len(m.Body)]), string(m.Body), "item body")
		testutil.Equal(t, protocol.ParseProperties(props)["UNIQ_KEY"], strings.Split(res.MsgID, ",")[i], "item UNIQ_KEY")
	}
	testutil.Equal(t, len(body), 0, "trailing batch bytes")
}

// TestSenderFailover: a broker answering a retryable code is left for
// another broker (other IDC) inside the same call and avoided afterwards; a
// MESSAGE_ILLEGAL comes back at once without trying another broker.
func TestClientSenderFailover(t *testing.T) {
	a := startFakeBroker(t, "broker-a", "idc1")
	b := startFakeBroker(t, "broker-b", "idc2")
	p := newTestProducer(t, startFakeNamesrv(t, a, b), "idc1")
	ctx := context.Background()

	res, err := p.SendSync(ctx, &Message{Topic: "FoTopic", Body: []byte("x")})
	testutil.NoError(t, err)
	testutil.Equal(t, res.BrokerName, "broker-a", "healthy: own IDC")

	a.mu.Lock()
	a.answer = func(req *remoting.Command) *remoting.Command {
		return remoting.NewResponse(req, int32(protocol.SystemBusy), "busy")
	}
	a.mu.Unlock()
	res, err = p.SendSync(ctx, &Message{Topic: "FoTopic", Body: []byte("x")})
	testutil.NoError(t, err)
	testutil.Equal(t, res.BrokerName, "broker-b", "after SYSTEM_BUSY")
	testutil.Equal(t, res.IDC, "idc2", "failover IDC")
	before := len(a.requests(protocol.SendMessage))
	res, err = p.SendSync(ctx, &Message{Topic: "FoTopic", Body: []byte("x")})
	testutil.NoError(t, err)
	testutil.Equal(t, res.BrokerName, "broker-b", "isolated broker avoided")
	testutil.Equal(t, len(a.requests(protocol.SendMessage)), before, "requests to the isolated broker")

	// Every broker refuses the message itself: one attempt, error at once.
	illegal := func(req *remoting.Command) *remoting.Command {
		return remoting.NewResponse(req, int32(protocol.MessageIllegal), "too big")
	}
	a.mu.Lock()
	a.answer = illegal
	a.mu.Unlock()
	b.mu.Lock()
	b.answer = illegal
	b.mu.Unlock()
	_, err = p.SendSync(ctx, &Message{Topic: "FoTopic", Body: []byte("x")})
	if !errors.Is(err, &ResponseError{Code: CodeMessageIllegal}) {
		t.Fatalf("err = %v, want MESSAGE_ILLEGAL", err)
	}
	var se *SendError
	testutil.True(t, errors.As(err, &se), "a *SendError")
	testutil.Equal(t, len(se.Attempts), 1, "attempts on MESSAGE_ILLEGAL")

	// Every broker busy: the error lists the attempts, after the timeout.
	busy := func(req *remoting.Command) *remoting.Command {
		return remoting.NewResponse(req, int32(protocol.SystemBusy), "busy")
	}
	a.mu.Lock()
	a.answer = busy
	a.mu.Unlock()
	b.mu.Lock()
	b.answer = busy
	b.mu.Unlock()
	tctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	_, err = p.SendSync(tctx, &Message{Topic: "FoTopic", Body: []byte("x")})
	testutil.True(t, errors.As(err, &se), "a *SendError")
	testutil.True(t, errors.Is(err, ErrTimeout), "ErrTimeout when the deadline passed")
	testutil.True(t, errors.Is(err, &ResponseError{Code: CodeSystemBusy}), "the attempts' codes")
	testutil.True(t, time.Since(t0) < 2*time.Second, "the context deadline bounds the send")
	if len(se.Attempts) < 2 {
		t.Fatalf("attempts %+v, want both brokers", se.Attempts)
	}
}

// TestClientSendBackFallback: when the broker cannot take a message back
// (CONSUMER_SEND_MSG_BACK fails), the consumer sends a copy to the group's
// retry topic itself, as rocketmq-client-go does.
func TestClientSendBackFallback(t *testing.T) {
	b := startFakeBroker(t, "broker-a", "idc1")
	b.answer = func(req *remoting.Command) *remoting.Command {
		if req.Code == int32(protocol.ConsumerSendMsgBack) {
			return remoting.NewResponse(req, int32(protocol.SystemError), "store busy")
		}
		return sendOK(req)
	}
	ns := startFakeNamesrv(t, b)
	pc, err := NewPushConsumer(ConsumerConfig{ClientConfig: ClientConfig{NamesrvAddrs: []string{ns}, IDC: "idc1"}, Group: "g"})
	testutil.NoError(t, err)
	testutil.NoError(t, pc.Subscribe("T", "*", func(context.Context, []*MessageExt) ConsumeResult { return ConsumeSuccess }))
	testutil.NoError(t, pc.Start(context.Background()))
	defer pc.Shutdown(context.Background())

	bi := &brokerInfo{name: "broker-a", idc: "idc1", addrs: map[int64]string{0: b.srv.Addr()}}
	pq := newProcessQueue(context.Background(), MessageQueue{Topic: "T", BrokerName: "broker-a"}, bi, nil, 0)
	m := &MessageExt{Message: Message{Topic: "T", Body: []byte("again"), Properties: map[string]string{"UNIQ_KEY": "U1", "TAGS": "A"}},
		MsgID: "U1", CommitLogOffset: 42, ReconsumeTimes: 1}
	testutil.NoError(t, pc.sendBack(context.Background(), pq, m, 0))

	back := b.requests(protocol.ConsumerSendMsgBack)
	testutil.Equal(t, len(back), 1, "CONSUMER_SEND_MSG_BACK requests")
	for k, v := range map[string]string{"group": "g", "offset": "42", "delayLevel": "0", "originMsgId": "U1", "originTopic": "T", "maxReconsumeTimes": "16", "bname": "broker-a"} {
		testutil.Equal(t, back[0].Ext(k), v, k)
	}
	var retry *remoting.Command
	for _, r := range b.requests(protocol.SendMessage) {
		if r.Ext("topic") == "%RETRY%g" {
			retry = r
		}
	}
	if retry == nil {
		t.Fatal("no SEND_MESSAGE to the retry topic")
	}
	testutil.Equal(t, retry.Ext("reconsumeTimes"), "2", "reconsumeTimes")
	testutil.Equal(t, retry.Ext("producerGroup"), "CLIENT_INNER_PRODUCER", "producer group")
	props := protocol.ParseProperties(retry.Ext("properties"))
	for k, v := range map[string]string{"RETRY_TOPIC": "T", "ORIGIN_MESSAGE_ID": "U1", "DELAY": "4", "UNIQ_KEY": "U1", "TAGS": "A"} {
		testutil.Equal(t, props[k], v, "property "+k)
	}
	testutil.Equal(t, string(retry.Body), "again", "body")
}
