package remoting_test

// The golden frames under testdata/golden were recorded from the real
// rocketmq-client-go by this test. It is off by default (it needs nothing but
// the module cache, but rewrites testdata); regenerate with
//
//	ZONEMQ_CAPTURE_GOLDEN=1 go test -run TestRemotingCaptureGolden ./internal/remoting/
//
// The fake peer below plays name server and broker on one loopback listener,
// answers just enough for the client to walk through its producer, consumer
// and admin calls, and keeps the first raw frame of every kind it sees.

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"

	"github.com/zonemq/zonemq/internal/remoting"
)

// goldenClientVersion is the rocketmq-client-go version the frames come from
// (go.mod pins it).
const goldenClientVersion = "github.com/apache/rocketmq-client-go/v2 v2.1.3-0.20251226070945-2173d070fd1b"

const (
	goldenTopic       = "GoldenTopic"
	goldenBrokerName  = "broker-a"
	goldenPushGroup   = "golden_cg"
	goldenOrderGroup  = "golden_ocg"
	goldenPullGroup   = "golden_pullcg"
	goldenRunInfoCode = 307 // GET_CONSUMER_RUNNING_INFO, server → client
)

// goldenRequired are the frames a capture run must produce; the rest are
// kept when the client happens to send them.
var goldenRequired = []string{
	"get_routeinfo_by_topic", "send_message", "send_message_transaction_half", "send_batch_message",
	"end_transaction", "heart_beat", "get_consumer_list_by_group", "query_consumer_offset", "get_max_offset",
	"pull_message_push", "pull_message_pull", "update_consumer_offset", "consumer_send_msg_back",
	"search_offset_by_timestamp", "lock_batch_mq", "unlock_batch_mq", "update_and_create_topic",
	"delete_topic_in_broker", "delete_topic_in_namesrv", "get_all_topic_list_from_nameserver",
	"get_all_subscriptiongroup_config", "response_get_consumer_running_info",
}

func TestRemotingCaptureGolden(t *testing.T) {
	if os.Getenv("ZONEMQ_CAPTURE_GOLDEN") != "1" {
		t.Skip("set ZONEMQ_CAPTURE_GOLDEN=1 to re-record testdata/golden from rocketmq-client-go")
	}
	rlog.SetLogLevel("error")
	peer := newGoldenPeer(t)
	addr := peer.ln.Addr().String()
	ns := primitive.NamesrvAddr{addr}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// Producer: a single send, a batch, and a transactional half message.
	p, err := rocketmq.NewProducer(producer.WithNameServer(ns), producer.WithGroupName("golden_pg"),
		producer.WithInstanceName("golden-producer"), producer.WithRetry(0))
	mustNil(t, err)
	mustNil(t, p.Start())
	msg := primitive.NewMessage(goldenTopic, []byte("hello-golden"))
	msg.WithTag("TagA")
	msg.WithKeys([]string{"k1", "k2"})
	_, err = p.SendSync(ctx, msg)
	mustNil(t, err)
	b1 := primitive.NewMessage(goldenTopic, []byte("batch-1"))
	b1.WithTag("TagB")
	_, err = p.SendSync(ctx, b1, primitive.NewMessage(goldenTopic, []byte("batch-2")))
	mustNil(t, err)
	mustNil(t, p.Shutdown())

	tp, err := rocketmq.NewTransactionProducer(commitListener{}, producer.WithNameServer(ns),
		producer.WithGroupName("golden_txg"), producer.WithInstanceName("golden-tx"), producer.WithRetry(0))
	mustNil(t, err)
	mustNil(t, tp.Start())
	_, err = tp.SendMessageInTransaction(ctx, primitive.NewMessage(goldenTopic, []byte("tx-body")))
	mustNil(t, err)

	// Push consumers: a concurrent one that asks for a redelivery (send
	// back) and an orderly one (lock/unlock).
	pc, err := rocketmq.NewPushConsumer(consumer.WithNameServer(ns), consumer.WithGroupName(goldenPushGroup),
		consumer.WithInstance("golden-push"))
	mustNil(t, err)
	var once sync.Once
	consumed := make(chan struct{})
	mustNil(t, pc.Subscribe(goldenTopic, consumer.MessageSelector{Type: consumer.TAG, Expression: "TagA || TagB"},
		func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			once.Do(func() { close(consumed) })
			return consumer.ConsumeRetryLater, nil
		}))
	mustNil(t, pc.Start())
	oc, err := rocketmq.NewPushConsumer(consumer.WithNameServer(ns), consumer.WithGroupName(goldenOrderGroup),
		consumer.WithInstance("golden-order"), consumer.WithConsumerOrder(true),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	mustNil(t, err)
	mustNil(t, oc.Subscribe(goldenTopic, consumer.MessageSelector{},
		func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			return consumer.ConsumeSuccess, nil
		}))
	mustNil(t, oc.Start())
	select {
	case <-consumed:
	case <-ctx.Done():
		t.Fatal("the push consumer never got the message")
	}

	// Pull consumer: Poll (sysFlag with the subscription bit) and an offset
	// search by time.
	lc, err := rocketmq.NewPullConsumer(consumer.WithNameServer(ns), consumer.WithGroupName(goldenPullGroup),
		consumer.WithInstance("golden-pull"))
	mustNil(t, err)
	mustNil(t, lc.Subscribe(goldenTopic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"}))
	mustNil(t, lc.Start())
	if cr, err := lc.Poll(ctx, 10*time.Second); err == nil {
		lc.ACK(ctx, cr, consumer.ConsumeSuccess)
	}
	mqs, err := lc.GetTopicRouteInfo(goldenTopic)
	mustNil(t, err)
	_, err = lc.OffsetForTimestamp(mqs[0], time.Now().UnixMilli())
	mustNil(t, err)

	// Admin calls.
	adm, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver([]string{addr})))
	mustNil(t, err)
	mustNil(t, adm.CreateTopic(ctx, admin.WithTopicCreate("GoldenAdminTopic"), admin.WithBrokerAddrCreate(addr)))
	_, err = adm.FetchAllTopicList(ctx)
	mustNil(t, err)
	_, err = adm.GetAllSubscriptionGroup(ctx, addr, 3*time.Second)
	mustNil(t, err)
	mustNil(t, adm.DeleteTopic(ctx, admin.WithTopicDelete("GoldenAdminTopic"), admin.WithBrokerAddrDelete(addr),
		admin.WithNameSrvAddr([]string{addr})))

	// Shutting the consumers down persists their offsets and unlocks the
	// orderly consumer's queues.
	waitFor(t, 30*time.Second, func() bool {
		return peer.has("response_get_consumer_running_info", "consumer_send_msg_back", "lock_batch_mq")
	})
	mustNil(t, lc.Shutdown())
	mustNil(t, pc.Shutdown())
	mustNil(t, oc.Shutdown())
	mustNil(t, tp.Shutdown())
	mustNil(t, adm.Close())
	waitFor(t, 20*time.Second, func() bool { return peer.has(goldenRequired...) })
	peer.close()
	peer.write(t, filepath.Join("testdata", "golden"))
}

type commitListener struct{}

func (commitListener) ExecuteLocalTransaction(*primitive.Message) primitive.LocalTransactionState {
	return primitive.CommitMessageState
}

func (commitListener) CheckLocalTransaction(*primitive.MessageExt) primitive.LocalTransactionState {
	return primitive.CommitMessageState
}

func mustNil(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func waitFor(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("condition not met within %v", d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// goldenPeer is the fake name server + broker.
type goldenPeer struct {
	t  *testing.T
	ln net.Listener

	mu        sync.Mutex
	frames    map[string][]byte          // name → first raw frame of that kind
	asked     map[int32]string           // opaque of a request we sent → frame name of its answer
	clientIDs map[string]map[string]bool // group → client ids from heartbeats
	queried   map[string]bool            // group/topic → offset queried once
	delivered map[string]bool            // group/topic → message at offset 0 delivered
	runInfo   bool
	conns     map[net.Conn]*sync.Mutex
	done      chan struct{}
	wg        sync.WaitGroup
}

func newGoldenPeer(t *testing.T) *goldenPeer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	mustNil(t, err)
	p := &goldenPeer{
		t: t, ln: ln,
		frames: map[string][]byte{}, asked: map[int32]string{}, clientIDs: map[string]map[string]bool{},
		queried: map[string]bool{}, delivered: map[string]bool{}, conns: map[net.Conn]*sync.Mutex{},
		done: make(chan struct{}),
	}
	p.wg.Add(1)
	go p.acceptLoop()
	t.Cleanup(p.close)
	return p
}

func (p *goldenPeer) acceptLoop() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.conns[c] = &sync.Mutex{}
		p.mu.Unlock()
		p.wg.Add(1)
		go p.readLoop(c)
	}
}

func (p *goldenPeer) close() {
	select {
	case <-p.done:
		return
	default:
	}
	close(p.done)
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *goldenPeer) has(names ...string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, n := range names {
		if p.frames[n] == nil {
			return false
		}
	}
	return true
}

func (p *goldenPeer) send(c net.Conn, cmd *remoting.Command) {
	p.mu.Lock()
	wmu := p.conns[c]
	p.mu.Unlock()
	wmu.Lock()
	defer wmu.Unlock()
	c.Write(remoting.EncodeFrame(cmd))
}

func (p *goldenPeer) readLoop(c net.Conn) {
	defer p.wg.Done()
	defer c.Close()
	for {
		var lenBuf [4]byte
		if _, err := io.ReadFull(c, lenBuf[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(lenBuf[:])
		if n > remoting.DefaultMaxFrameSize {
			p.t.Errorf("client sent a %d-byte frame", n)
			return
		}
		raw := make([]byte, 4+n)
		copy(raw, lenBuf[:])
		if _, err := io.ReadFull(c, raw[4:]); err != nil {
			return
		}
		cmd, err := remoting.DecodeFrame(raw[4:])
		if err != nil {
			p.t.Errorf("undecodable frame from the client: %v (%x)", err, raw)
			return
		}
		p.serve(c, raw, cmd)
	}
}

func (p *goldenPeer) keep(name string, raw []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.frames[name] == nil {
		p.frames[name] = raw
	}
}

var goldenNames = map[int32]string{
	105: "get_routeinfo_by_topic", 10: "send_message", 320: "send_batch_message", 310: "send_message_v2",
	34: "heart_beat", 38: "get_consumer_list_by_group", 14: "query_consumer_offset", 30: "get_max_offset",
	29: "search_offset_by_timestamp", 15: "update_consumer_offset", 36: "consumer_send_msg_back",
	37: "end_transaction", 41: "lock_batch_mq", 42: "unlock_batch_mq", 17: "update_and_create_topic",
	215: "delete_topic_in_broker", 216: "delete_topic_in_namesrv", 206: "get_all_topic_list_from_nameserver",
	201: "get_all_subscriptiongroup_config", 31: "get_min_offset", 11: "pull_message",
}

func (p *goldenPeer) serve(c net.Conn, raw []byte, req *remoting.Command) {
	if req.IsResponse() {
		p.mu.Lock()
		name := p.asked[req.Opaque]
		p.mu.Unlock()
		if name != "" {
			p.keep(name, raw)
		}
		return
	}
	name, ok := goldenNames[req.Code]
	if !ok {
		name = fmt.Sprintf("request_%d", req.Code)
	}
	switch req.Code {
	case 10:
		if sf, _ := strconv.Atoi(req.Ext("sysFlag")); sf&4 != 0 {
			name = "send_message_transaction_half"
		}
	case 11:
		if sf, _ := strconv.Atoi(req.Ext("sysFlag")); sf&4 != 0 {
			name = "pull_message_pull"
		} else {
			name = "pull_message_push"
		}
	}
	// Retry-topic variants of the per-queue calls look the same but say
	// less; keep the golden topic's.
	if !strings.HasPrefix(req.Ext("topic"), "%RETRY%") {
		p.keep(name, raw)
	}

	resp := remoting.NewResponse(req, 0, "")
	switch req.Code {
	case 105:
		resp.Body = []byte(fmt.Sprintf(`{"queueDatas":[{"brokerName":%q,"readQueueNums":1,"writeQueueNums":1,"perm":6,"topicSysFlag":0}],`+
			`"brokerDatas":[{"cluster":"DefaultCluster","brokerName":%q,"brokerAddrs":{"0":%q}}],"filterServerTable":{}}`,
			goldenBrokerName, goldenBrokerName, p.ln.Addr().String()))
	case 10, 310, 320:
		resp.SetExt("msgId", "7F00000100004DC700000000000003E8")
		resp.SetExt("queueId", "0")
		resp.SetExt("queueOffset", "0")
		resp.SetExt("transactionId", "")
	case 34:
		p.heartbeat(c, req)
	case 38:
		var ids []string
		p.mu.Lock()
		for id := range p.clientIDs[req.Ext("consumerGroup")] {
			ids = append(ids, id)
		}
		p.mu.Unlock()
		sort.Strings(ids)
		resp.Body, _ = json.Marshal(map[string][]string{"consumerIdList": ids})
	case 14:
		key := req.Ext("consumerGroup") + "/" + req.Ext("topic")
		p.mu.Lock()
		first := !p.queried[key]
		p.queried[key] = true
		p.mu.Unlock()
		if first {
			resp.Code = 22 // QUERY_NOT_FOUND: makes a CONSUME_FROM_LAST consumer ask GET_MAX_OFFSET
		} else {
			resp.SetExt("offset", "0")
		}
	case 29, 30, 31:
		resp.SetExt("offset", "0")
	case 11:
		p.pull(c, req, resp)
		return
	case 41:
		var body struct {
			MQSet json.RawMessage `json:"mqSet"`
		}
		json.Unmarshal(req.Body, &body)
		resp.Body = []byte(`{"lockOKMQSet":` + string(body.MQSet) + `}`)
	case 206:
		resp.Body = []byte(`{"topicList":["` + goldenTopic + `"]}`)
	case 201:
		resp.Body = []byte(`{"subscriptionGroupTable":{},"dataVersion":{"counter":0,"timestamp":0}}`)
	}
	p.send(c, resp)
}

func (p *goldenPeer) heartbeat(c net.Conn, req *remoting.Command) {
	var hb struct {
		ClientID    string `json:"clientID"`
		ConsumerSet []struct {
			GroupName string `json:"groupName"`
		} `json:"consumerDataSet"`
	}
	if err := json.Unmarshal(req.Body, &hb); err != nil {
		p.t.Errorf("heartbeat body: %v", err)
		return
	}
	p.mu.Lock()
	askRunInfo := false
	for _, cd := range hb.ConsumerSet {
		if p.clientIDs[cd.GroupName] == nil {
			p.clientIDs[cd.GroupName] = map[string]bool{}
		}
		p.clientIDs[cd.GroupName][hb.ClientID] = true
		if cd.GroupName == goldenPushGroup && !p.runInfo {
			p.runInfo, askRunInfo = true, true
		}
	}
	p.mu.Unlock()
	if askRunInfo {
		// A request from the broker side, to record the client's answer.
		ask := remoting.NewRequest(goldenRunInfoCode, map[string]string{
			"consumerGroup": goldenPushGroup, "clientId": hb.ClientID, "jstackEnable": "false",
		}, nil)
		ask.Opaque = 1 << 30
		p.mu.Lock()
		p.asked[ask.Opaque] = "response_get_consumer_running_info"
		p.mu.Unlock()
		time.AfterFunc(200*time.Millisecond, func() { p.send(c, ask) })
	}
}

// pull delivers one message at offset 0 of the golden topic to each group
// and otherwise parks the request briefly before PULL_NOT_FOUND, so the
// consumers do not spin.
func (p *goldenPeer) pull(c net.Conn, req, resp *remoting.Command) {
	topic := req.Ext("topic")
	offset, _ := strconv.ParseInt(req.Ext("queueOffset"), 10, 64)
	key := req.Ext("consumerGroup") + "/" + topic
	p.mu.Lock()
	deliver := topic == goldenTopic && offset == 0 && !p.delivered[key]
	if deliver {
		p.delivered[key] = true
	}
	p.mu.Unlock()
	resp.SetExt("minOffset", "0")
	resp.SetExt("suggestWhichBrokerId", "0")
	if deliver {
		resp.SetExt("nextBeginOffset", "1")
		resp.SetExt("maxOffset", "1")
		resp.Body = storedGoldenMessage(topic, p.ln.Addr().(*net.TCPAddr))
		p.send(c, resp)
		return
	}
	resp.Code = 19 // PULL_NOT_FOUND
	resp.SetExt("nextBeginOffset", strconv.FormatInt(offset, 10))
	resp.SetExt("maxOffset", strconv.FormatInt(offset, 10))
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		select {
		case <-time.After(300 * time.Millisecond):
			p.send(c, resp)
		case <-p.done:
		}
	}()
}

// storedGoldenMessage builds a v1 stored record by hand (remoting's tests do
// not lean on internal/protocol's codec).
func storedGoldenMessage(topic string, host *net.TCPAddr) []byte {
	body := []byte("hello-golden")
	props := "TAGS\x01TagA\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01C0A8000100002A9F000000000000000a\x02"
	ip := host.IP.To4()
	var b []byte
	b = binary.BigEndian.AppendUint32(b, uint32(91+len(body)+len(topic)+len(props)))
	b = binary.BigEndian.AppendUint32(b, 0xDAA320A7)
	b = binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(body)&0x7FFFFFFF)
	b = binary.BigEndian.AppendUint32(b, 0)  // queue id
	b = binary.BigEndian.AppendUint32(b, 0)  // flag
	b = binary.BigEndian.AppendUint64(b, 0)  // queue offset
	b = binary.BigEndian.AppendUint64(b, 42) // commit-log offset
	b = binary.BigEndian.AppendUint32(b, 0)  // sysflag
	b = binary.BigEndian.AppendUint64(b, uint64(time.Now().UnixMilli()))
	b = append(b, ip...)
	b = binary.BigEndian.AppendUint32(b, uint32(host.Port))
	b = binary.BigEndian.AppendUint64(b, uint64(time.Now().UnixMilli()))
	b = append(b, ip...)
	b = binary.BigEndian.AppendUint32(b, uint32(host.Port))
	b = binary.BigEndian.AppendUint32(b, 0) // reconsume times
	b = binary.BigEndian.AppendUint64(b, 0) // prepared transaction offset
	b = binary.BigEndian.AppendUint32(b, uint32(len(body)))
	b = append(b, body...)
	b = append(b, byte(len(topic)))
	b = append(b, topic...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(props)))
	return append(b, props...)
}

// write stores every captured frame as <dir>/<name>.hex, replacing what was
// there.
func (p *goldenPeer) write(t *testing.T, dir string) {
	t.Helper()
	mustNil(t, os.MkdirAll(dir, 0o755))
	old, _ := filepath.Glob(filepath.Join(dir, "*.hex"))
	for _, f := range old {
		os.Remove(f)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	names := make([]string, 0, len(p.frames))
	for n := range p.frames {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		raw := p.frames[n]
		var sb strings.Builder
		fmt.Fprintf(&sb, "# %s: one frame as rocketmq-client-go sent it, length field included.\n", n)
		fmt.Fprintf(&sb, "# Captured from %s by TestRemotingCaptureGolden.\n", goldenClientVersion)
		if hl := int(binary.BigEndian.Uint32(raw[4:]) & 0xFFFFFF); raw[4] == 0 && printableASCII(raw[8:8+hl]) {
			// A JSON header, shown for readers; the hex below is what counts.
			fmt.Fprintf(&sb, "# header: %s\n# body: %d bytes\n", raw[8:8+hl], len(raw)-8-hl)
		}
		h := hex.EncodeToString(raw)
		for len(h) > 64 {
			sb.WriteString(h[:64] + "\n")
			h = h[64:]
		}
		sb.WriteString(h + "\n")
		mustNil(t, os.WriteFile(filepath.Join(dir, n+".hex"), []byte(sb.String()), 0o644))
		t.Logf("captured %s (%d bytes)", n, len(raw))
	}
}

func printableASCII(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}
