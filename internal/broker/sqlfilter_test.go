package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/testutil"
)

// sqlHeartbeat registers clientID in group with a SQL92 subscription.
func sqlHeartbeat(t *testing.T, s *Server, clientID, group, topic, expr string) {
	t.Helper()
	raw := newRawClient(t)
	hb := protocol.HeartbeatData{ClientID: clientID, ConsumerDataSet: []protocol.ConsumerData{{
		GroupName: group, ConsumeType: protocol.ConsumePassively, MessageModel: "CLUSTERING",
		ConsumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
		SubscriptionDataSet: []protocol.SubscriptionData{{Topic: topic, SubString: expr, TagsSet: []string{},
			CodeSet: protocol.TagCodes{}, SubVersion: 1, ExpressionType: protocol.ExpressionTypeSQL92}},
	}}}
	body, err := json.Marshal(hb)
	testutil.NoError(t, err, "heartbeat body")
	expectCode(t, invoke(t, raw, s.Addr(), protocol.HeartBeat, nil, body), protocol.Success, "HEART_BEAT")
}

// pullSQL pulls with the request's own SQL92 subscription.
func pullSQL(t *testing.T, s *Server, group, topic string, offset int64, expr string) *remoting.Command {
	t.Helper()
	h := protocol.PullMessageRequestHeader{ConsumerGroup: group, Topic: topic, QueueOffset: offset, MaxMsgNums: 32,
		SysFlag: protocol.PullFlagSubscription, Subscription: expr, ExpressionType: protocol.ExpressionTypeSQL92}
	return invoke(t, newRawClient(t), s.Addr(), protocol.PullMessage, h.Ext(), nil)
}

func TestBrokerSQLFilterPull(t *testing.T) {
	s := startBroker(t, testBrokerOptions(t, "127.0.1.1", "idc1", "broker-sql"))
	raw := newRawClient(t)
	const topic = "SQLTopic"
	createTopic(t, raw, s.Addr(), topic, 1)
	for i := range 10 {
		props := map[string]string{"a": strconv.Itoa(i), "b": "x"}
		if i%2 == 1 {
			props["b"] = "y"
		}
		expectCode(t, sendRaw(t, raw, s.Addr(), topic, 0, props, []byte("m"+strconv.Itoa(i))), protocol.Success, "send")
	}

	resp := pullSQL(t, s, "sql_cg", topic, 0, "a > 5 AND b = 'x'")
	expectCode(t, resp, protocol.Success, "SQL92 pull")
	var got []string
	for _, m := range decodeAll(t, resp.Body) {
		got = append(got, string(m.Body))
	}
	testutil.Equal(t, strings.Join(got, ","), "m6,m8", "matching messages")
	var rh protocol.PullMessageResponseHeader
	testutil.NoError(t, rh.SetExt(resp.ExtFields), "pull response header")
	testutil.Equal(t, rh.NextBeginOffset, int64(10), "next offset past the skipped messages")

	// Nothing matches: the consumer is told to move on at once.
	resp = pullSQL(t, s, "sql_cg", topic, 0, "a > 100")
	expectCode(t, resp, protocol.PullRetryImmediately, "SQL92 pull without a match")
	testutil.NoError(t, rh.SetExt(resp.ExtFields), "pull response header")
	testutil.Equal(t, rh.NextBeginOffset, int64(10), "next offset when nothing matched")
	testutil.Equal(t, len(resp.Body), 0, "body when nothing matched")

	// The subscription a heartbeat registered is used when the pull
	// carries none (rocketmq-client-go's push consumer).
	sqlHeartbeat(t, s, "127.0.0.1@sql", "sql_hb_cg", topic, "b = 'y' AND a BETWEEN 2 AND 5")
	h := protocol.PullMessageRequestHeader{ConsumerGroup: "sql_hb_cg", Topic: topic, MaxMsgNums: 32, ExpressionType: protocol.ExpressionTypeTag}
	resp = invoke(t, raw, s.Addr(), protocol.PullMessage, h.Ext(), nil)
	expectCode(t, resp, protocol.Success, "pull with the heartbeat's SQL92 subscription")
	got = got[:0]
	for _, m := range decodeAll(t, resp.Body) {
		got = append(got, string(m.Body))
	}
	testutil.Equal(t, strings.Join(got, ","), "m3,m5", "matching messages by the heartbeat's subscription")

	// rocketmq-client-go's pull consumer sends the SQL text but calls it
	// TAG; the heartbeat says SQL92, and wins.
	h = protocol.PullMessageRequestHeader{ConsumerGroup: "sql_hb_cg", Topic: topic, MaxMsgNums: 32, SysFlag: protocol.PullFlagSubscription,
		Subscription: "b = 'y' AND a BETWEEN 2 AND 5", ExpressionType: protocol.ExpressionTypeTag}
	resp = invoke(t, raw, s.Addr(), protocol.PullMessage, h.Ext(), nil)
	expectCode(t, resp, protocol.Success, "pull with the SQL text called TAG")
	testutil.Equal(t, len(decodeAll(t, resp.Body)), 2, "matching messages when the pull says TAG")
}

func TestBrokerSQLFilterRefusesBadExpressions(t *testing.T) {
	s := startBroker(t, testBrokerOptions(t, "127.0.1.1", "idc1", "broker-sqlbad"))
	raw := newRawClient(t)
	const topic = "SQLBadTopic"
	createTopic(t, raw, s.Addr(), topic, 1)

	resp := pullSQL(t, s, "sql_bad_cg", topic, 0, "a > 'x'")
	expectCode(t, resp, protocol.SubscriptionParseFailed, "pull with a bad expression")
	testutil.True(t, strings.Contains(resp.Remark, "only numbers can be ordered"), "remark says why: "+resp.Remark)

	// A heartbeat with a bad expression is accepted (as in RocketMQ); its
	// pulls are refused with the reason, which the client logs.
	sqlHeartbeat(t, s, "127.0.0.1@sqlbad", "sql_bad_hb", topic, "a >")
	h := protocol.PullMessageRequestHeader{ConsumerGroup: "sql_bad_hb", Topic: topic, MaxMsgNums: 32}
	resp = invoke(t, raw, s.Addr(), protocol.PullMessage, h.Ext(), nil)
	expectCode(t, resp, protocol.SubscriptionParseFailed, "pull by a heartbeat with a bad expression")

	check := func(expr, typ string) *remoting.Command {
		body, _ := json.Marshal(checkClientConfigBody{ClientID: "c", Group: "g",
			SubscriptionData: &protocol.SubscriptionData{Topic: topic, SubString: expr, ExpressionType: typ}})
		return invoke(t, raw, s.Addr(), protocol.CheckClientConfig, nil, body)
	}
	expectCode(t, check("a > 1", protocol.ExpressionTypeSQL92), protocol.Success, "CHECK_CLIENT_CONFIG good SQL92")
	expectCode(t, check("TagA || TagB", protocol.ExpressionTypeTag), protocol.Success, "CHECK_CLIENT_CONFIG TAG")
	expectCode(t, check("a IN (1)", protocol.ExpressionTypeSQL92), protocol.SubscriptionParseFailed, "CHECK_CLIENT_CONFIG bad SQL92")
	expectCode(t, invoke(t, raw, s.Addr(), protocol.CheckClientConfig, nil, []byte("{")), protocol.InvalidParameter, "CHECK_CLIENT_CONFIG bad body")
}

func TestBrokerSQLFilterDisabled(t *testing.T) {
	opts := testBrokerOptions(t, "127.0.1.1", "idc1", "broker-sqloff")
	opts.EnablePropertyFilter = false
	s := startBroker(t, opts)
	raw := newRawClient(t)
	createTopic(t, raw, s.Addr(), "SQLOffTopic", 1)
	resp := pullSQL(t, s, "sql_off_cg", "SQLOffTopic", 0, "a > 1")
	expectCode(t, resp, protocol.SystemError, "SQL92 pull with enablePropertyFilter=false")
	testutil.True(t, strings.Contains(resp.Remark, "enablePropertyFilter"), "remark names the setting: "+resp.Remark)
}

// TestBrokerSQLFilterRocketMQClient subscribes the official Go client with
// consumer.SQL92 and checks it receives exactly the matching messages.
func TestBrokerSQLFilterRocketMQClient(t *testing.T) {
	ns := startNamesrv(t, "127.0.1.1:0", "idc1", nil)
	s := startBroker(t, testBrokerOptions(t, "127.0.1.1", "idc1", "broker-sqlgo", ns.Addr()))
	raw := newRawClient(t)
	const topic = "SQLGoTopic"
	createTopic(t, raw, s.Addr(), topic, 4)
	waitRoute(t, raw, ns.Addr(), topic, s)

	group := "sql_go_" + runToken
	got := newReceived()
	c, err := consumer.NewPushConsumer(
		consumer.WithGroupName(group),
		consumer.WithInstance(instanceName("S"+runToken)),
		consumer.WithNsResolver(primitive.NewPassthroughResolver([]string{ns.Addr()})),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	)
	testutil.NoError(t, err, "NewPushConsumer")
	err = c.Subscribe(topic, consumer.MessageSelector{Type: consumer.SQL92, Expression: "a > 5 AND b = 'x'"},
		func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			got.add(msgs...)
			return consumer.ConsumeSuccess, nil
		})
	testutil.NoError(t, err, "Subscribe SQL92")
	testutil.NoError(t, c.Start(), "push consumer Start")
	t.Cleanup(func() { c.Shutdown() })

	p, err := producer.NewDefaultProducer(
		producer.WithGroupName("sql_go_pg"),
		producer.WithInstanceName(instanceName("SP"+runToken)),
		producer.WithNsResolver(primitive.NewPassthroughResolver([]string{ns.Addr()})),
	)
	testutil.NoError(t, err, "NewDefaultProducer")
	testutil.NoError(t, p.Start(), "producer Start")
	t.Cleanup(func() { p.Shutdown() })

	var want []string
	for i := range 200 {
		key := fmt.Sprintf("k-%d", i)
		m := primitive.NewMessage(topic, []byte(key)).WithKeys([]string{key})
		a, b := i%10, "x"
		if i%3 == 0 {
			b = "y"
		}
		switch {
		case i%7 == 0: // no property a: never matches
		case i%11 == 0:
			m.WithProperty("a", "not-a-number") // an evaluation error: no match
		default:
			m.WithProperty("a", strconv.Itoa(a))
		}
		m.WithProperty("b", b)
		if i%7 != 0 && i%11 != 0 && a > 5 && b == "x" {
			want = append(want, key)
		}
		r, err := p.SendSync(context.Background(), m)
		testutil.NoError(t, err, "SendSync")
		testutil.Equal(t, r.Status, primitive.SendOK, "send status")
	}

	testutil.Eventually(t, 60*time.Second, func() error {
		if m := missing(want, got); len(m) > 0 {
			return fmt.Errorf("missing %v (%d of %d received)", m, got.distinct(), len(want))
		}
		// Every queue consumed to its end, so nothing else is still coming.
		for q := int32(0); q < 4; q++ {
			if off, _ := s.store.QueryOffset(group, topic, q); off != s.store.MaxOffset(topic, q) {
				return fmt.Errorf("queue %d consumed to %d of %d", q, off, s.store.MaxOffset(topic, q))
			}
		}
		return nil
	})
	testutil.Equal(t, got.distinct(), len(want), "distinct messages received (only the matching ones)")
}

// TestBrokerSQLFilterRocketMQPullConsumer: rocketmq-client-go's pull
// consumer sends its SQL92 expression in every pull but calls it TAG; the
// broker takes the type from the group's heartbeat and filters by SQL92.
func TestBrokerSQLFilterRocketMQPullConsumer(t *testing.T) {
	ns := startNamesrv(t, "127.0.1.1:0", "idc1", nil)
	s := startBroker(t, testBrokerOptions(t, "127.0.1.1", "idc1", "broker-sqlpull", ns.Addr()))
	raw := newRawClient(t)
	const topic = "SQLPullTopic"
	createTopic(t, raw, s.Addr(), topic, 2)
	waitRoute(t, raw, ns.Addr(), topic, s)
	want := map[string]bool{}
	for i := range 40 {
		key := fmt.Sprintf("sp-%d", i)
		props := map[string]string{protocol.PropertyKeys: key, "n": strconv.Itoa(i)}
		if i%4 == 0 {
			want[key] = true
			props["kind"] = "match"
		}
		expectCode(t, sendRaw(t, raw, s.Addr(), topic, int32(i%2), props, []byte(key)), protocol.Success, "send")
	}

	pc, err := consumer.NewPullConsumer(
		consumer.WithGroupName("sql_pull_cg_"+runToken),
		consumer.WithInstance(instanceName("sqlpull"+runToken)),
		consumer.WithNsResolver(primitive.NewPassthroughResolver([]string{ns.Addr()})),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	)
	testutil.NoError(t, err, "NewPullConsumer")
	testutil.NoError(t, pc.Subscribe(topic, consumer.MessageSelector{Type: consumer.SQL92, Expression: "kind = 'match' AND n >= 0"}), "Subscribe")
	testutil.NoError(t, pc.Start(), "pull consumer Start")
	t.Cleanup(func() { pc.Shutdown() })

	got := map[string]bool{}
	testutil.Eventually(t, 60*time.Second, func() error {
		cr, err := pc.Poll(context.Background(), time.Second)
		if err == nil {
			for _, m := range cr.GetMsgList() {
				got[string(m.Body)] = true
			}
			pc.ACK(context.Background(), cr, consumer.ConsumeSuccess)
		}
		for k := range want {
			if !got[k] {
				return fmt.Errorf("pull consumer has %d of %d matching messages", len(got), len(want))
			}
		}
		return nil
	})
	for k := range got {
		testutil.True(t, want[k], "pull consumer got the non-matching "+k)
	}
}
