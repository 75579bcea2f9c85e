package broker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/zonemq/zonemq/internal/acl"
	"github.com/zonemq/zonemq/internal/namesrv"
	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/testutil"
)

// The ACL across a real name server and broker: unauthorised requests are
// refused with NO_PERMISSION and change nothing; rocketmq-client-go with
// credentials produces and consumes, without them it is refused.

const (
	aclAdminKey, aclAdminSecret   = "zonemqAdmin", "adminSecret1"
	aclAppKey, aclAppSecret       = "appUser01", "appSecret01"
	aclReaderKey, aclReaderSecret = "reader01", "readerSecret1"
	aclTopic                      = "AclTopic"
)

const testACL = `accounts:
  - accessKey: zonemqAdmin
    secretKey: adminSecret1
    admin: true
  - accessKey: appUser01
    secretKey: appSecret01
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms:
      - AclTopic=PUB|SUB
      - TBW102=PUB
    groupPerms:
      - acl_consumer=SUB
  - accessKey: reader01
    secretKey: readerSecret1
    topicPerms:
      - AclTopic=SUB
`

// aclCluster starts a name server and a broker sharing one ACL file; the
// broker registers with the admin account.
func aclCluster(t *testing.T) (*namesrv.Server, *Server) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "plain_acl.yml")
	testutil.NoError(t, os.WriteFile(path, []byte(testACL), 0o600))
	ns := startNamesrv(t, "127.0.1.1:0", "idc1", func(o *namesrv.Options) { o.ACLFile = path })
	opts := testBrokerOptions(t, "127.0.1.1", "idc1", "broker-acl", ns.Addr())
	opts.ACLFile = path
	opts.AccessKey, opts.SecretKey = aclAdminKey, aclAdminSecret
	return ns, startBroker(t, opts)
}

// signedInvoke sends one request signed with ak/sk ("" sends it unsigned).
func signedInvoke(t *testing.T, c *remoting.Client, addr string, code protocol.RequestCode, ext map[string]string, body []byte, ak, sk string) *remoting.Command {
	t.Helper()
	if ext == nil {
		ext = map[string]string{}
	}
	acl.Sign(int32(code), ext, body, ak, sk, time.Now())
	return invoke(t, c, addr, code, ext, body)
}

func maxOffset(t *testing.T, c *remoting.Client, addr, topic string) string {
	t.Helper()
	resp := signedInvoke(t, c, addr, protocol.GetMaxOffset, map[string]string{"topic": topic, "queueId": "0"}, nil, aclAdminKey, aclAdminSecret)
	return resp.ExtFields["offset"]
}

func TestBrokerACLRefusesAndKeepsState(t *testing.T) {
	ns, s := aclCluster(t)
	raw := newRawClient(t)

	// Admin codes: refused unsigned and for a non-admin account.
	create := protocol.CreateTopicRequestHeader{Topic: aclTopic, ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}
	expectCode(t, signedInvoke(t, raw, s.Addr(), protocol.UpdateAndCreateTopic, create.Ext(), nil, "", ""), protocol.NoPermission, "unsigned create")
	expectCode(t, signedInvoke(t, raw, s.Addr(), protocol.UpdateAndCreateTopic, create.Ext(), nil, aclAppKey, aclAppSecret), protocol.NoPermission, "non-admin create")
	expectCode(t, signedInvoke(t, raw, s.Addr(), protocol.UpdateAndCreateTopic, create.Ext(), nil, aclAppKey, "wrongSecret"), protocol.NoPermission, "wrong secret")
	_, exists := s.topics.get(aclTopic)
	testutil.True(t, !exists, "topic created by a refused request")
	expectCode(t, signedInvoke(t, raw, s.Addr(), protocol.UpdateAndCreateTopic, create.Ext(), nil, aclAdminKey, aclAdminSecret), protocol.Success, "admin create")

	// The broker registered with its admin credentials.
	testutil.Eventually(t, 15*time.Second, func() error {
		resp := signedInvoke(t, raw, ns.Addr(), protocol.GetRouteInfoByTopic, map[string]string{"topic": aclTopic}, nil, aclAppKey, aclAppSecret)
		if resp.Code != 0 {
			return fmt.Errorf("route: %d %s", resp.Code, resp.Remark)
		}
		return nil
	})
	resp := invoke(t, raw, ns.Addr(), protocol.GetRouteInfoByTopic, map[string]string{"topic": aclTopic}, nil)
	expectCode(t, resp, protocol.NoPermission, "unsigned route query")

	// Sends: unsigned, from a SUB-only account, to a denied topic.
	h := protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: aclTopic, DefaultTopic: protocol.AutoCreateTopicKey,
		DefaultTopicQueueNums: 1, BornTimestamp: time.Now().UnixMilli()}
	expectCode(t, signedInvoke(t, raw, s.Addr(), protocol.SendMessage, h.Ext(), []byte("x"), "", ""), protocol.NoPermission, "unsigned send")
	expectCode(t, signedInvoke(t, raw, s.Addr(), protocol.SendMessage, h.Ext(), []byte("x"), aclReaderKey, aclReaderSecret), protocol.NoPermission, "reader send")
	testutil.Equal(t, maxOffset(t, raw, s.Addr(), aclTopic), "0", "messages stored by refused sends")
	expectCode(t, signedInvoke(t, raw, s.Addr(), protocol.SendMessage, h.Ext(), []byte("x"), aclAppKey, aclAppSecret), protocol.Success, "app send")
	testutil.Equal(t, maxOffset(t, raw, s.Addr(), aclTopic), "1", "messages after the allowed send")

	// Offsets of a group the account may not use.
	upd := protocol.UpdateConsumerOffsetRequestHeader{ConsumerGroup: "other_group", Topic: aclTopic, QueueID: 0, CommitOffset: 1}
	expectCode(t, signedInvoke(t, raw, s.Addr(), protocol.UpdateConsumerOffset, upd.Ext(), nil, aclAppKey, aclAppSecret), protocol.NoPermission, "offset of another group")
	// Locks: body-named group.
	lock := []byte(`{"consumerGroup":"other_group","clientId":"c1","mqSet":[{"topic":"AclTopic","brokerName":"broker-acl","queueId":0}]}`)
	expectCode(t, signedInvoke(t, raw, s.Addr(), protocol.LockBatchMQ, nil, lock, aclAppKey, aclAppSecret), protocol.NoPermission, "lock for another group")

	// Name-server writes from a non-admin account change nothing.
	del := protocol.DeleteTopicFromNamesrvRequestHeader{Topic: aclTopic}
	expectCode(t, signedInvoke(t, raw, ns.Addr(), protocol.DeleteTopicInNamesrv, del.Ext(), nil, aclAppKey, aclAppSecret), protocol.NoPermission, "delete topic in namesrv")
	kv := protocol.PutKVConfigRequestHeader{Namespace: "ns", Key: "k", Value: "v"}
	expectCode(t, signedInvoke(t, raw, ns.Addr(), protocol.PutKVConfig, kv.Ext(), nil, "", ""), protocol.NoPermission, "put kv")
	unreg := protocol.UnregisterBrokerRequestHeader{BrokerName: "broker-acl", BrokerAddr: s.Addr(), ClusterName: protocol.DefaultCluster}
	expectCode(t, signedInvoke(t, raw, ns.Addr(), protocol.UnregisterBroker, unreg.Ext(), nil, aclAppKey, aclAppSecret), protocol.NoPermission, "unregister")
	hb := protocol.ClientHeartbeat{ClientID: "c@x@idc1", IDC: "idc1", Role: "producer"}
	expectCode(t, signedInvoke(t, raw, ns.Addr(), protocol.ClientHeartbeatToNamesrv, nil, hb.Encode(), "", ""), protocol.NoPermission, "client heartbeat")
	resp = signedInvoke(t, raw, ns.Addr(), protocol.GetRouteInfoByTopic, map[string]string{"topic": aclTopic}, nil, aclAppKey, aclAppSecret)
	expectCode(t, resp, protocol.Success, "route after the refused writes")
	resp = signedInvoke(t, raw, ns.Addr(), protocol.GetKVConfig, map[string]string{"namespace": "ns", "key": "k"}, nil, aclAppKey, aclAppSecret)
	expectCode(t, resp, protocol.QueryNotFound, "kv after the refused put")
}

func TestBrokerACLRocketMQClient(t *testing.T) {
	ns, s := aclCluster(t)
	raw := newRawClient(t)
	create := protocol.CreateTopicRequestHeader{Topic: aclTopic, ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}
	expectCode(t, signedInvoke(t, raw, s.Addr(), protocol.UpdateAndCreateTopic, create.Ext(), nil, aclAdminKey, aclAdminSecret), protocol.Success, "create")
	testutil.Eventually(t, 15*time.Second, func() error {
		resp := signedInvoke(t, raw, ns.Addr(), protocol.GetRouteInfoByTopic, map[string]string{"topic": aclTopic}, nil, aclAppKey, aclAppSecret)
		if resp.Code != 0 {
			return fmt.Errorf("route: %d %s", resp.Code, resp.Remark)
		}
		return nil
	})
	creds := primitive.Credentials{AccessKey: aclAppKey, SecretKey: aclAppSecret}

	// Without credentials: refused.
	bare := startRocketMQProducer(t, ns.Addr(), "acl_pg_bare", "acl-bare", producer.WithRetry(0))
	_, err := bare.SendSync(context.Background(), primitive.NewMessage(aclTopic, []byte("no")))
	testutil.True(t, err != nil, "a send without credentials succeeded")
	testutil.Equal(t, maxOffset(t, raw, s.Addr(), aclTopic), "0", "messages stored without credentials")

	// With credentials: produce and consume.
	p := startRocketMQProducer(t, ns.Addr(), "acl_pg", "acl-p", producer.WithCredentials(creds), producer.WithRetry(2))
	rmqRoundTrip(t, p.SendSync, ns.Addr(), aclTopic, "acl", "acl_consumer", consumer.WithCredentials(creds))
}

// TestBrokerRouteHealsAfterForeignDelete: a client's DELETE_TOPIC_IN_NAMESRV
// of a topic the broker still hosts is undone by the broker itself at its
// next heartbeat (the name server asks it for a full registration), long
// before its periodic registration; a forged REGISTER_BROKER for it from
// another connection, with an empty topic table, changes nothing. ACL off.
func TestBrokerRouteHealsAfterForeignDelete(t *testing.T) {
	ns := startNamesrv(t, "127.0.1.1:0", "idc1", nil)
	opts := testBrokerOptions(t, "127.0.1.1", "idc1", "broker-heal", ns.Addr())
	opts.RegisterInterval = time.Hour
	s := startBroker(t, opts)
	raw := newRawClient(t)
	const topic = "HealTopic"
	createTopic(t, raw, s.Addr(), topic, 2)
	waitRoute(t, raw, ns.Addr(), topic, s)

	attacker := newRawClient(t)
	del := protocol.DeleteTopicFromNamesrvRequestHeader{Topic: topic}
	expectCode(t, invoke(t, attacker, ns.Addr(), protocol.DeleteTopicInNamesrv, del.Ext(), nil), protocol.Success, "delete in namesrv")
	waitRoute(t, raw, ns.Addr(), topic, s)

	h := protocol.RegisterBrokerRequestHeader{BrokerName: "broker-heal", BrokerAddr: "127.0.9.1:10911",
		ClusterName: protocol.DefaultCluster, ZoneName: "idcEVIL"}
	for range 10 {
		expectCode(t, invoke(t, attacker, ns.Addr(), protocol.RegisterBroker, h.Ext(), []byte(`{"topicConfigSerializeWrapper":{"topicConfigTable":{}}}`)),
			protocol.NoPermission, "forged registration")
	}
	addr, zone, err := registeredAt(t, raw, ns.Addr(), "broker-heal")
	testutil.NoError(t, err)
	testutil.Equal(t, addr+" "+zone, s.Addr()+" idc1", "registered address and IDC")
	waitRoute(t, raw, ns.Addr(), topic, s)
}

// rmqRoundTrip sends n keyed messages to topic with send (a configured
// rocketmq-client-go producer's SendSync), each answered SEND_OK, and waits
// until a rocketmq-client-go push consumer of group, built with opts on top
// of the name server and instance options, has consumed every one.
func rmqRoundTrip(t *testing.T, send func(context.Context, ...*primitive.Message) (*primitive.SendResult, error),
	nsAddr, topic, prefix, group string, opts ...consumer.Option) {
	t.Helper()
	var want []string
	for i := range 20 {
		key := fmt.Sprintf("%s-%d", prefix, i)
		want = append(want, key)
		r, err := send(context.Background(), primitive.NewMessage(topic, []byte(key)).WithKeys([]string{key}))
		testutil.NoError(t, err, "SendSync", key)
		testutil.Equal(t, r.Status, primitive.SendOK, "send status")
	}
	got := newReceived()
	c, err := consumer.NewPushConsumer(append([]consumer.Option{
		consumer.WithGroupName(group),
		consumer.WithInstance(instanceName(prefix + "-c" + runToken)),
		consumer.WithNsResolver(primitive.NewPassthroughResolver([]string{nsAddr})),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	}, opts...)...)
	testutil.NoError(t, err, "NewPushConsumer")
	testutil.NoError(t, c.Subscribe(topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"},
		func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			got.add(msgs...)
			return consumer.ConsumeSuccess, nil
		}), "Subscribe")
	testutil.NoError(t, c.Start(), "consumer Start")
	t.Cleanup(func() { c.Shutdown() })
	testutil.Eventually(t, 60*time.Second, func() error {
		if m := missing(want, got); len(m) > 0 {
			return fmt.Errorf("not consumed yet: %v", m)
		}
		return nil
	})
}
